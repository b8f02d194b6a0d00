"""The scheduler applies a planned peak-shave move only while its target is within the users'
latency SLO, read as the UserLatencySLO filter reads it: measured pair, declared, local; unknown is beyond."""

from __future__ import annotations

import json
from types import SimpleNamespace
from typing import Any, cast

from drods.model.annotations import PEAK_SHAVE, PEAK_SHAVE_MOVES, RESCHEDULE_REASON
from drods.model.cluster import NetworkProfile
from drods.scheduler import Snapshot
from drods.scheduler.framework import ScheduleResult
from drods.scheduler.users import UserDemand
from drods.schedulerd.fleet import MoveBudget
from drods.schedulerd.queue import SchedulingQueue
from drods.schedulerd.records import BindingRecord
from drods.schedulerd.shaving import shaved
from tests.scheduler.conftest import add

EU = UserDemand.of([("region", "eu", 1.0)], "declared")


def fleet() -> Snapshot:
    snap = Snapshot()
    add(snap, "eu-0", region="eu", network=NetworkProfile(latencyMs={"eu": 5}))
    add(snap, "us-0", region="us", network=NetworkProfile(latencyMs={"eu": 90}))
    add(snap, "ap-0", region="ap", network=NetworkProfile(latencyMs={"eu": 220}))
    add(snap, "xx-0", region="xx")  # nothing known about its latency to the users
    return snap


def apply(snap: Snapshot, to: list[str], slo: float | None) -> ScheduleResult:
    moves = [{"from": "eu-0", "to": c, "replicas": 2} for c in to]
    obj: dict[str, Any] = {"metadata": {"annotations": {RESCHEDULE_REASON: f"{PEAK_SHAVE}: eu-0 hot",
                                                        PEAK_SHAVE_MOVES: json.dumps(moves)}}}
    rec = cast(BindingRecord, SimpleNamespace(name="web", placement=(("eu-0", 10),), replicas=10))
    got = shaved(obj, rec, snap, MoveBudget(1000), cast(SchedulingQueue, None), EU, slo)
    assert got is not None
    return got


def test_declared_latency_guards_when_nothing_is_measured() -> None:
    snap = fleet()
    assert dict(apply(snap, ["us-0", "ap-0", "xx-0"], 100.0).pairs) == {"eu-0": 8, "us-0": 2}
    assert dict(apply(snap, ["us-0", "ap-0", "xx-0"], None).pairs) == {"eu-0": 4, "us-0": 2, "ap-0": 2, "xx-0": 2}


def test_measured_latency_wins_over_declared() -> None:
    snap = fleet()
    snap.set_network_pair("us-0", "eu", 150.0, None)  # declared 90 ms, measured beyond the SLO
    snap.set_network_pair("xx-0", "eu", 40.0, None)  # unknown until measured
    got = apply(snap, ["us-0", "xx-0"], 100.0)
    assert dict(got.pairs) == {"eu-0": 8, "xx-0": 2}
    assert "not moved to us-0: beyond the users' latency SLO of 100 ms" in got.message
