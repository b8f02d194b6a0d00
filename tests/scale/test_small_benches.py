"""The autoscaling and migration benches run at a small size and their figures mean what they say (both had
broken unseen: the autoscaler's constructor changed, and a move now goes only where the placement allows;
a check that they run, not a timed test)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.timeout(300)

BENCH = Path(__file__).resolve().parents[2] / "bench"


def printed(script: str, *args: str) -> list[str]:
    """The lines a bench printed (its conditions, then its JSON line); it must have succeeded."""
    done = subprocess.run([sys.executable, str(BENCH / script), *args], capture_output=True, text=True, timeout=280)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    return done.stdout.strip().splitlines()


def run(script: str, *args: str) -> dict[str, object]:
    return dict(json.loads(printed(script, *args)[-1]))


def test_the_autoscaling_bench_decides_on_the_workloads_own_use() -> None:
    out = run("autoscaling.py", "--workloads", "200", "--clusters", "10", "--writes", "50")
    assert out["workloads"] == 200 and out["reconcile_writes"] == 50
    assert 0 < int(out["would_scale"]) < 200  # fed the members' readings of each workload, it decides on them


def test_the_migration_bench_moves_the_data_and_loses_no_write() -> None:
    out = run("migration.py", "--size-gib", "0.01", "--bandwidth-mbps", "400")
    assert out["lost_writes"] == 0 and out["checksums_equal"] is True
    assert int(out["status_bytes_copied"]) > 0


def test_the_scheduler_bench_decides_the_failure_storms_bindings() -> None:
    """``--shape storm``: the bindings ``bench/memory.py``'s storm makes the scheduler decide again."""
    out = run("scheduler.py", "--mode", "algorithm", "--shape", "storm", "--clusters", "300", "--tasks", "200",
              "--warmup", "10")
    assert out["shape"] == "storm" and out["tasks"] == 200 and float(str(out["throughput_per_s"])) > 0


def test_the_scheduler_bench_runs_on_the_products_allocator_or_glibcs_to_the_same_decisions() -> None:
    """``--allocator``: the algorithm as ``drods serve`` runs it (the default), or on glibc's defaults, as
    figures before 2026-12-07 were measured; the decisions are the same either way."""
    lines = {}
    for allocator in ("product", "glibc"):
        out = printed("scheduler.py", "--mode", "algorithm", "--shape", "storm", "--clusters", "300", "--tasks", "200",
                      "--warmup", "10", "--allocator", allocator)
        assert out[0].startswith("# conditions:") and out[0].endswith(f"allocator {allocator}"), out[0]
        lines[allocator] = [ln for ln in out if ln.startswith(("#   phases:", "#   fleet_water_level_end:"))]
    assert len(lines["product"]) == 2 and lines["product"] == lines["glibc"]


@pytest.mark.parametrize(("args", "says"), [
    (["--clusters", "0"], "argument --clusters: 0: must be 1 or more"),
    (["--rate", "0"], "argument --rate: 0: must be more than 0"),
    (["--workloads", "-5"], "argument --workloads: -5: must be 1 or more"),
    (["--scenario", "idle,cold-start"], "cold-start fills the store before the control plane starts: it comes first"),
])
def test_a_bad_size_is_one_error_line_before_anything_starts(args: list[str], says: str) -> None:
    """A fleet of 0 members failed with a traceback after starting; a rate of 0 divided by zero 12 s in."""
    scenario = [] if "--scenario" in args else ["--scenario", "distribution"]
    done = subprocess.run([sys.executable, str(BENCH / "scale.py"), *scenario, *args], capture_output=True, text=True,
                          timeout=60)
    assert done.returncode == 2 and says in done.stderr and "Traceback" not in done.stderr, done.stderr
