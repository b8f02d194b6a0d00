"""bench/dominance.py works on a small run, with a setting tried and its baselines cached (a check that it
runs and that its figures are the simulator's, not a timed test)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.server_process import drods_command

pytestmark = pytest.mark.timeout(300)

ROOT = Path(__file__).resolve().parents[2]
BENCH = ROOT / "bench" / "dominance.py"


def bench(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, str(BENCH), *args], capture_output=True, text=True, timeout=280)


def test_a_setting_is_tried_against_cached_baselines_and_the_figures_are_the_simulators(tmp_path: Path) -> None:
    first = bench("--runs", "trace-replay", "--autoops", '{"peakshaveMinGain": 0.02}', "--cache", str(tmp_path))
    assert first.returncode == 0, first.stdout[-3000:] + first.stderr[-3000:]
    assert first.stdout.startswith("# conditions: 1 runs (trace-replay), autoops {\"peakshaveMinGain\": 0.02}")
    out = json.loads(first.stdout.strip().splitlines()[-1])
    assert out["runs"] == 1 and out["autoops"] == {"peakshaveMinGain": 0.02}
    assert len(list(tmp_path.glob("trace-replay-*-None-*.json"))) == 3  # one per baseline
    run = out["per_run"]["trace-replay"]
    assert out["dominating"] == int(run["dominates"]) and (run["dominates"] == (run["worse_on"] == {}))
    # the same WaterLevel run as `drods simulate` gives with the setting in the scenario file
    scenario = (ROOT / "examples" / "scenarios" / "trace-replay.yaml").read_text().replace(
        "background:", "autoops: {preallocate: false, peakshaveMinGain: 0.02}\nbackground:")
    (tmp_path / "traces").symlink_to(ROOT / "examples" / "scenarios" / "traces")
    (tmp_path / "tr.yaml").write_text(scenario)
    sim = subprocess.run([*drods_command(), "simulate", "--scenario", str(tmp_path / "tr.yaml"),
                          "--out", str(tmp_path / "out"), "--policies", "WaterLevel,Aggregated"],
                         capture_output=True, text=True, timeout=280)
    assert sim.returncode == 0, sim.stderr[-3000:]
    wl = json.loads((tmp_path / "out" / "summary.json").read_text())["policies"]["WaterLevel"]
    assert run["peak_gap_mean"] == wl["peak_gap_mean"] and run["replicas_moved"] == wl["replicas_moved"]
    again = bench("--runs", "trace-replay", "--autoops", '{"peakshaveMinGain": 0.02}', "--cache", str(tmp_path))
    assert json.loads(again.stdout.strip().splitlines()[-1])["per_run"] == out["per_run"]


def test_a_setting_the_scenario_would_refuse_is_refused_before_anything_runs() -> None:
    done = bench("--runs", "trace-replay", "--autoops", '{"peakshaveMinGain": 7}')
    assert done.returncode != 0 and "--autoops / --plugin-args" in done.stderr and "peakshaveMinGain" in done.stderr
    assert "# conditions" not in done.stdout
