"""A decision that keeps a binding's placement assumes nothing new: a partial binding retried on every
capacity change to the same verdict had its own replicas assumed afresh each time — counted twice (the
members' status and the assumption) for as long as the retries went on, so the rest was never placed
(17 of 20 on two members at 60 % of a 0.85 limit)."""

from __future__ import annotations

import pytest

from drods.model.cluster import ClusterSpec
from drods.schedulerd.cache import ClusterRecord, SchedulerCache, StatusRecord

CPU = (1.0, 0.0, 0.0, 1.0, 0.0)  # one core and one pod a replica


def _status(allocated: float, t: float) -> StatusRecord:
    return StatusRecord("m", {"cpu": {"capacity": 20.0, "allocated": allocated}, "memory": {"capacity": 64.0}}, t)


def _level(cache: SchedulerCache) -> float:
    return float(cache.snap.water_level[cache.snap.index["m"]])


def test_a_same_verdict_retry_does_not_assume_the_placement_again() -> None:
    now = [1000.0]
    cache = SchedulerCache(clock=lambda: now[0], assume_ttl=60.0)
    cache.on_cluster("m", ClusterRecord("m", {}, ClusterSpec(), True))
    cache.on_status("m", _status(0.0, now[0]))
    cache.assume_decision("web", (), (("m", 9),), CPU, now[0])  # 9 placed, the rest pending
    assert _level(cache) == pytest.approx(0.45)
    for t in (1020.0, 1040.0, 1059.0):  # retried on capacity blips: placed the same 9 each time
        now[0] = t
        cache.on_status("m", _status(9.0, t))  # the member counts the 9 pods (and the assumption still does)
        cache.assume_decision("web", (("m", 9),), (("m", 9),), CPU, t)
        cache.sweep()
    assert _level(cache) == pytest.approx(0.90)  # counted twice until the status is known to count them
    now[0] = 1061.0  # a status published the assumption's minute after the decision counts its pods
    cache.on_status("m", _status(9.0, now[0]))
    cache.sweep()
    assert _level(cache) == pytest.approx(0.45)  # once: room for the rest
    # a decision that changes the placement assumes what it adds, as before
    cache.assume_decision("web", (("m", 9),), (("m", 12),), CPU, now[0])
    assert _level(cache) == pytest.approx(0.60)


def test_a_retry_written_anew_with_the_same_placement_keeps_the_assumptions_evidence() -> None:
    """A retry whose verdict reads differently ("the 2 selected feasible clusters …" for "1 …") is written
    with a new scheduledTime and the same placement: the assumption keeps its time and what the members
    showed, and settles once a status taken after that counts the pods — it is not adopted afresh."""
    now = [1000.0]
    cache = SchedulerCache(clock=lambda: now[0], assume_ttl=60.0)
    cache.on_cluster("m", ClusterRecord("m", {}, ClusterSpec(), True))
    cache.on_status("m", _status(0.0, now[0]))
    placement = (("m", 9),)
    cache.assume_decision("web", (), placement, CPU, 1000.0)
    cache.observe("web", placement, 1000.0, CPU)  # the decision's echo
    now[0] = 1005.0
    cache.observe("web", placement, 1000.0, CPU, shown=(("m", 9, 1005.0),))  # the member shows the copy whole
    cache.observe("web", placement, 1010.0, CPU, shown=(("m", 9, 1005.0),))  # a retry, written anew
    now[0] = 1012.0
    cache.on_status("m", _status(9.0, now[0]))  # taken after the copy showed: counts its pods
    cache.sweep()
    assert _level(cache) == pytest.approx(0.45)  # once
