"""A decision that removes replicas stops counting them at once (kube-scheduler forgets a pod when its
binding goes): the member reports their requests until the pods are gone and monitoring's rate control
lets the fall through, and meanwhile a scale-down from 15 to 1 kept its cluster at 74 % for a minute —
the next placement went there against a real 16 %."""

from __future__ import annotations

import pytest

from drods.model.binding import BindingSpec
from drods.model.cluster import ClusterSpec
from drods.scheduler.framework import Scheduler
from drods.scheduler.profile import Profile
from drods.scheduler.task import Task
from drods.schedulerd.cache import ClusterRecord, SchedulerCache, StatusRecord

CORES = 20.0
CPU = (1.0, 0.0, 0.0, 1.0, 0.0)  # one core and one pod a replica


def _status(name: str, allocated: float, t: float) -> StatusRecord:
    """A member's report: the cpu its running pods request."""
    return StatusRecord(name, {"cpu": {"capacity": CORES, "allocated": allocated},
                               "memory": {"capacity": 64.0}}, t)


def _fleet(now: list[float], **allocated: float) -> SchedulerCache:
    cache = SchedulerCache(clock=lambda: now[0], assume_ttl=60.0)
    for name, cpu in allocated.items():
        cache.on_cluster(name, ClusterRecord(name, {}, ClusterSpec(), True))
        cache.on_status(name, _status(name, cpu, now[0]))
    return cache


def _level(cache: SchedulerCache, name: str) -> float:
    return float(cache.snap.water_level[cache.snap.index[name]])


def test_a_scale_down_stops_counting_the_removed_replicas_until_the_status_drops_them() -> None:
    now = [1000.0]
    cache = _fleet(now, m1=15.0, m2=15.0)  # 15 replicas of "web" on each, their status counts them
    assert _level(cache, "m1") == pytest.approx(0.75)
    cache.assume_decision("web", (("m1", 15), ("m2", 15)), (("m1", 1),), CPU, now[0])
    # at once: what remains on m1 (1 core), nothing on m2
    assert _level(cache, "m1") == pytest.approx(0.05) and _level(cache, "m2") == pytest.approx(0.0)

    now[0] = 1010.0  # the next reports still count the pods (terminating, or held by rate control)
    cache.on_status("m1", _status("m1", 15.0, now[0]))
    cache.on_status("m2", _status("m2", 9.0, now[0]))  # m2's pods partly gone: no part counted twice
    assert _level(cache, "m1") == pytest.approx(0.05) and _level(cache, "m2") == pytest.approx(0.0)
    now[0] = 1020.0
    cache.on_status("m1", _status("m1", 1.0, now[0]))  # the status shows them gone: nothing left to release
    assert cache.released("m1") is None and _level(cache, "m1") == pytest.approx(0.05)
    cache.on_status("m1", _status("m1", 6.0, now[0] + 1))  # what comes after is another workload's
    assert _level(cache, "m1") == pytest.approx(0.30)
    assert cache.released("m2") is not None  # m2 still reports 3 of them: still released
    # a status published assume_ttl after the decision counts none of them (their pods are gone by then),
    # however little its load fell (another workload may have grown meanwhile)
    now[0] = 1061.0
    cache.on_status("m2", _status("m2", 9.0, now[0]))
    assert cache.released("m2") is None and _level(cache, "m2") == pytest.approx(0.45)


def test_a_shrink_of_assumed_replicas_releases_only_what_the_status_counts() -> None:
    now = [1000.0]
    cache = _fleet(now, m1=12.0)  # 12 replicas counted by the status
    cache.assume_decision("web", (("m1", 12),), (("m1", 18),), CPU, now[0])  # 6 more: assumed
    assert _level(cache, "m1") == pytest.approx(0.90)
    cache.assume_decision("web", (("m1", 18),), (("m1", 14),), CPU, now[0] + 1)  # the assumed ones go first
    assert cache.released("m1") is None and _level(cache, "m1") == pytest.approx(0.70)
    cache.assume_decision("web", (("m1", 14),), (("m1", 4),), CPU, now[0] + 2)  # 2 assumed, 8 counted go
    assert _level(cache, "m1") == pytest.approx(0.20)
    assert float(cache.released("m1")[0]) == pytest.approx(8.0)  # type: ignore[index]


def test_an_unwritten_scale_down_counts_its_replicas_again() -> None:
    now = [1000.0]
    cache = _fleet(now, m1=15.0)
    cache.assume_decision("web", (("m1", 15),), (("m1", 1),), CPU, now[0])
    assert _level(cache, "m1") == pytest.approx(0.05)
    cache.unrelease("web")  # the decision was not written: the 15 replicas run on
    assert cache.released("m1") is None and _level(cache, "m1") == pytest.approx(0.75)


def test_the_next_placement_is_decided_on_the_level_a_scale_down_left() -> None:
    """The next workload's replicas go by the lowered level: to m1, now the emptiest, not m2."""
    now = [1000.0]
    cache = _fleet(now, m1=15.0, m2=4.0)
    cache.assume_decision("web", (("m1", 15),), (("m1", 1),), CPU, now[0])
    now[0] = 1010.0
    cache.on_status("m1", _status("m1", 15.0, now[0]))  # within one report: still the removed pods
    spec = BindingSpec.model_validate({"replicas": 4, "resources": {"cpu": 1}, "placement": {"replicaScheduling": {
        "replicaSchedulingType": "Divided", "weightPreference": {"dynamicWeight": "WaterLevel"}}}})
    result = Scheduler(Profile.default(), rng_seed=7).schedule(Task(spec, name="api"), cache.snap)
    assert result.phase == "Scheduled", result.message
    placed = dict(result.pairs)
    assert placed.get("m1", 0) > placed.get("m2", 0), (placed, result.message)


def test_an_unwritten_decision_counts_again_only_its_own_releases_wherever_they_are() -> None:
    """Found by the binding, not by a pass over every cluster's releases (a storm's return undid decisions
    over tens of thousands of them); what the statuses consumed is not kept for it."""
    now = [1000.0]
    cache = _fleet(now, m1=15.0, m2=10.0, m3=5.0)
    cache.assume_decision("web", (("m1", 10), ("m2", 5)), (("m1", 1),), CPU, now[0])  # off m1 and m2
    cache.assume_decision("api", (("m1", 5), ("m3", 5)), (("m3", 5),), CPU, now[0])  # off m1
    assert _level(cache, "m1") == pytest.approx(0.05) and _level(cache, "m2") == pytest.approx(0.25)
    cache.unrelease("web")  # web's decision was not written: its 9 on m1 and 5 on m2 count again; api's 5 do not
    assert _level(cache, "m1") == pytest.approx(0.50) and _level(cache, "m2") == pytest.approx(0.50)
    assert _level(cache, "m3") == pytest.approx(0.25)
    now[0] = 1010.0
    cache.on_status("m1", _status("m1", 10.0, now[0]))  # api's 5 gone from m1: its release there is consumed
    assert cache.released("m1") is None and _level(cache, "m1") == pytest.approx(0.50)
    cache.unrelease("api")  # nothing of api's is released any more
    assert _level(cache, "m1") == pytest.approx(0.50)
    assert not cache._released_of  # nothing held for bindings with no release left
