"""bench/memory.py works at a small size, with its Works listed through the API (a check that it runs
and that its figures mean what they say, not a timed test)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.timeout(300)

BENCH = Path(__file__).resolve().parents[2] / "bench" / "memory.py"


@pytest.mark.parametrize("limit", ["0", "7"])
def test_the_works_are_stored_and_listed_whole_or_in_pages(limit: str) -> None:
    done = subprocess.run([sys.executable, str(BENCH), "--clusters", "10", "--bindings", "20", "--works",
                           "--settle", "2", "--list-limit", limit], capture_output=True, text=True, timeout=280)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert done.stdout.startswith("# conditions: ")
    assert ", failover at once even with most or every cluster down, " in done.stdout.splitlines()[0]  # the storm
    out = json.loads(done.stdout.strip().splitlines()[-1])
    assert out["bindings"] == 20 and out["works"] >= 20  # one to three clusters each
    assert 20 <= out["listed"] <= out["works"] and out["list_limit"] == int(limit)  # Works may come after
    assert out["list_peak_rss_mb"] >= out["list_rss_before_mb"] > 0


def test_a_listing_needs_the_works() -> None:
    done = subprocess.run([sys.executable, str(BENCH), "--list-limit", "5"], capture_output=True, text=True,
                          timeout=60)
    assert done.returncode == 2 and "--list-limit needs --works" in done.stderr


def test_a_scheduled_binding_short_of_its_replicas_is_not_counted_converged() -> None:
    """A failover with nowhere to go keeps a Binding on several clusters Scheduled on the others, short of
    its replicas: the storm's convergence waits for those too, not only for the Unschedulable ones."""
    from bench.memory import _phase

    def binding(replicas: int, placed: list[int], phase: str = "Scheduled", kind: str = "Divided") -> dict:
        return {"spec": {"replicas": replicas, "placement": {"replicaScheduling": {"replicaSchedulingType": kind}}},
                "status": {"phase": phase, "placement": [{"cluster": f"c{i}", "replicas": n}
                                                         for i, n in enumerate(placed)]}}

    assert _phase(binding(3, [1, 1, 1])) == "Scheduled"
    assert _phase(binding(3, [1, 1])) == "Partial"
    assert _phase(binding(3, [], "Unschedulable")) == "Unschedulable"
    assert _phase(binding(2, [2, 2], kind="Duplicated")) == "Scheduled"
    assert _phase(binding(2, [], kind="Duplicated")) == "Partial"
    assert _phase({"status": {}}) == ""
