"""bench/scale.py works: each scenario at a small size, end to end (a check that it runs and its
figures mean what they say, not a timed test)."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

pytestmark = pytest.mark.timeout(600)

BENCH = Path(__file__).resolve().parents[2] / "bench" / "scale.py"


def run(*args: str, detection: str = "the product's") -> dict[str, dict[str, Any]]:
    """The bench's JSON lines by scenario; its conditions name the ``detection`` of silent members it ran with."""
    done = subprocess.run([sys.executable, str(BENCH), *args], capture_output=True, text=True, timeout=560)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    conditions = done.stdout.splitlines()[0]
    assert conditions.startswith("# conditions: ") and f", failure detection {detection}:" in conditions, conditions
    lines = [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]
    return {line["scenario"]: line for line in lines}


def test_every_scenario_in_push_mode(tmp_path: Path) -> None:
    trace = tmp_path / "trace.jsonl"
    out = run("--scenario", "cold-start,distribution,storm", "--clusters", "2", "--nodes-per-cluster", "2",
              "--workloads", "4", "--rate", "4", "--seconds", "2", "--down-seconds", "8", "--flat-window", "4",
              "--timeout", "120", "--stages", "--trace", str(trace), detection="fast")  # a storm's default
    cold, dist, storm = out["cold-start"], out["distribution"], out["storm"]
    assert cold["clusters"] == 2 and cold["workloads"] == 4 and cold["store"] == "sqlite"
    assert cold["ready_s"] is not None and cold["copies"] == 4
    assert cold["works"] == cold["works_applied"] == 4  # one member each: a Work per Deployment
    assert set(cold["peak_rss_mb"]) == {"drods serve", "sim fleet"} and cold["works_per_s"] > 0
    assert 1 <= dist["operations"] == dist["arrived"] <= 8  # 4 ops/s for 2 s at most, each seen in a member
    assert 0 < dist["p50_ms"] <= dist["p99_ms"] <= dist["max_ms"]
    assert dist["p99_create_ms"] is not None  # the stream starts with a create
    assert all(v is None or 0 < v <= dist["max_ms"] for v in (dist["p99_create_ms"], dist["p99_update_ms"]))
    assert set(dist["cores"]) == {"drods serve", "sim fleet", "bench"} and dist["cores"]["drods serve"] > 0
    # each step of the way, from the control plane's watch streams (a create passes all five)
    assert set(dist["stages"]) == {"bound", "scheduled", "written", "member", "applied"}
    assert all(st["p99_ms"] is not None and 0 <= st["p50_ms"] <= st["p99_ms"] for st in dist["stages"].values())
    assert 0 <= dist["stages_late"] <= dist["operations"]
    # --trace: each operation on its line, in the order sent, its latency among those the figures count
    rows = [json.loads(line) for line in trace.read_text().splitlines()]
    assert len(rows) == dist["operations"] and rows[0]["op"] == "create"
    assert [r["at_s"] for r in rows] == sorted(r["at_s"] for r in rows) and rows[-1]["at_s"] < 2.5
    assert max(r["ms"] for r in rows) == dist["max_ms"]
    bindings = 4 + (dist["operations"] + 1) // 2  # the steady ones and those the stream created
    # within the not-ready toleration a decision keeps each binding's replicas on its NotReady member (as
    # Karmada's); the storm ends once every binding was decided after the last member went, not at --timeout
    assert storm["redecisions"] == bindings and sum(storm["phases_down"].values()) == bindings
    assert set(storm["phases_down"]) <= {"Scheduled", "Propagated", "Running", "Failed", "Unschedulable"}
    assert 8 <= storm["down_s"] < 120 and 0 < storm["all_redecided_s"] <= storm["down_s"]
    assert len(storm["rss_mb"]) >= 7 and storm["converged_s"] is not None


def test_a_step_seen_after_the_next_one_counts_as_reached_then() -> None:
    """The API's watch of Works may deliver a Work after the member's watch showed its copy: that
    step is not negative, the one before it absorbs the lag, and the operation is counted late."""
    spec = importlib.util.spec_from_file_location("scale_bench", BENCH)
    assert spec is not None and spec.loader is not None
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    on_time = [("sent", 0.0), ("written", 0.1), ("member", 0.3), ("applied", 0.4)]
    behind = [("sent", 0.0), ("written", 5.0), ("member", 0.5), ("applied", 6.0)]  # Works' watch 4.5 s late
    stages, late = bench.split_stages([on_time, behind])
    assert late == 1
    assert stages["written"]["p99_ms"] == 500.0  # the late one: reached when the member had it
    assert stages["member"]["p50_ms"] == 0.0 and stages["member"]["p99_ms"] == 200.0
    assert stages["applied"]["p99_ms"] == 5500.0 and stages["applied"]["n"] == 2
    assert all(st["p50_ms"] >= 0 for st in stages.values())


def test_sync_and_distribution_in_pull_mode() -> None:
    """`drods cluster join --from --pull` and `drods agent --from` carry the stream to the members;
    ``sync`` counts the Works the restarted control plane writes for Bindings made without it."""
    out = run("--scenario", "sync,distribution,idle", "--mode", "pull", "--clusters", "2", "--nodes-per-cluster",
              "2", "--workloads", "3", "--rate", "4", "--seconds", "1", "--timeout", "120")  # no storm: the product's
    sync, dist, idle = out["sync"], out["distribution"], out["idle"]
    assert sync["works"] == 3 and sync["bind_s"] > 0  # one member each: a Work per Binding, no more
    assert sync["start_s"] > 0 and 0 < sync["first_work_s"] <= sync["works_written_s"]
    assert sync["cpu_s"] > 0 and sync["peak_rss_mb"] > 0
    assert sync["works_per_s"] is None or sync["works_per_s"] > 0  # None: all three in one count
    assert dist["mode"] == "pull" and 1 <= dist["operations"] == dist["arrived"] <= 4
    assert dist["p99_ms"] is not None
    # what watching the fleet costs, per process (the agents are a process of their own in pull mode)
    assert idle["seconds"] >= 1 and set(idle["cpu_s"]) == set(idle["cores"]) == {"drods serve", "sim fleet", "agents"}
    assert all(v >= 0 for v in idle["cores"].values()) and all(v > 0 for v in idle["rss_mb"].values())


def test_the_control_plane_split_into_its_three_processes() -> None:
    """``--processes split``: `drods apiserver`, `drods scheduler` and `drods controllers` over one
    store carry the cold start and the stream; each process's figures apart."""
    out = run("--scenario", "cold-start,distribution", "--processes", "split", "--clusters", "2",
              "--nodes-per-cluster", "2", "--workloads", "3", "--rate", "4", "--seconds", "1", "--timeout", "120",
              "--failure-detection", "fast", detection="fast")  # asked for, without a storm
    cold, dist = out["cold-start"], out["distribution"]
    plane = {"drods apiserver", "drods scheduler", "drods controllers"}
    assert cold["processes"] == dist["processes"] == "split"
    assert cold["ready_s"] is not None and cold["works"] == cold["works_applied"] == 3
    assert set(cold["peak_rss_mb"]) == set(cold["cpu_s"]) == plane | {"sim fleet"}
    assert all(cold["cpu_s"][p] > 0 for p in plane)  # each did its share from its start
    assert 1 <= dist["operations"] == dist["arrived"] <= 4 and dist["p99_ms"] is not None
    assert set(dist["cores"]) == plane | {"sim fleet", "bench"}


def test_sync_on_a_fleet_too_small_stops_at_once_and_says_why() -> None:
    """Bindings the members have no room for end the sync scenario with the reason, not after
    ``--timeout`` with a count."""
    done = subprocess.run([sys.executable, str(BENCH), "--scenario", "sync", "--clusters", "1", "--nodes-per-cluster",
                           "1", "--max-pods", "3", "--workloads", "8", "--timeout", "400"],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode != 0
    assert "Bindings Unschedulable" in done.stderr and "--nodes-per-cluster" in done.stderr, done.stderr[-3000:]
    assert not [line for line in done.stdout.splitlines() if line.startswith("{")]
