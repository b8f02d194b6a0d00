"""Affinity concentration: the tier, best-first overflow under the caps, existing replicas kept,
and the scheduler using it only when an affinity plugin ran."""

from __future__ import annotations

import numpy as np

from drods.scheduler import Profile, Scheduler, Snapshot, Task
from drods.scheduler.concentrate import ConcentrationSettings, affinity_mean, concentrate
from tests.scheduler.conftest import add, status, task

ON = ConcentrationSettings(min_spread=5.0, margin=0.5)


def test_tier_then_best_first_overflow_under_the_caps() -> None:
    a = np.array([100.0, 99.0, 90.0, 0.0, 100.0])
    caps = np.array([2.0, 5.0, 5.0, 9.0, 1.0])
    none = np.zeros(5, dtype=np.intp)
    prefer = np.zeros(5)
    # 3 replicas: the top tier (0 and 4: 3 seats) holds them
    c = concentrate(a, caps, none, prefer, 3, ON, ("TrafficAffinity",))
    assert c is not None and c.keep.tolist() == [0, 4]
    assert c.record(5) == {"plugins": ["TrafficAffinity"], "kept": 2, "of": 5, "affinitySpread": 100.0,
                           "tierFrom": 99.5}
    # 7 replicas: the tier holds 3, the next best (99: 5 seats) is added, not the 0-scored cluster
    c = concentrate(a, caps, none, prefer, 7, ON, ())
    assert c is not None and c.keep.tolist() == [0, 1, 4]
    # 12 replicas: 0, 4, 1 hold 8, cluster 2 (90) makes 13
    c = concentrate(a, caps, none, prefer, 12, ON, ())
    assert c is not None and c.keep.tolist() == [0, 1, 2, 4]
    # every cluster needed: nothing to narrow
    assert concentrate(a, caps, none, prefer, 14, ON, ()) is None


def test_no_separation_no_concentration_and_existing_kept() -> None:
    a = np.array([100.0, 97.0, 96.0])
    caps = np.full(3, 10.0)
    assert concentrate(a, caps, np.zeros(3, dtype=np.intp), np.zeros(3), 2, ON, ()) is None  # spread 4 < 5
    a = np.array([100.0, 50.0, 0.0])
    c = concentrate(a, caps, np.array([0, 0, 2]), np.zeros(3), 4, ON, ())
    assert c is not None and c.keep.tolist() == [0, 2]  # the worst keeps its replicas: no move
    # the weighted mean of two affinity rows
    rows = np.array([[100.0, 0.0], [0.0, 100.0]])
    assert affinity_mean(rows, np.array([3.0, 1.0])).tolist() == [75.0, 25.0]


def _fleet(snap: Snapshot) -> None:
    for nm in ("a", "b", "c", "d"):
        add(snap, nm, region="eu", zone=f"eu-{nm}", st=status(cpu=100, mem=400, cpu_used=65))  # spread mode


def test_scheduler_concentrates_on_the_callee_and_spreads_without_traffic(snap: Snapshot) -> None:
    _fleet(snap)
    sched = Scheduler(Profile.default(), rng_seed=1)
    blind = sched.schedule(Task(task(replicas=4), name="web", workload="shop/web"), snap)
    assert len(blind.pairs) > 1 and "concentration" not in blind.analysis
    snap.traffic = {"shop/web": {"shop/db": 1e6}}
    snap.workload_placements = {"shop/db": (("c", 1),)}
    r = sched.schedule(Task(task(replicas=4), name="web", workload="shop/web"), snap)
    assert r.placement_dict() == {"c": 4}
    assert r.analysis["concentration"]["plugins"] == ["TrafficAffinity"]
    # the water-level limit still holds: c has room for 2 replicas under 85 %, the rest overflows
    add(snap, "c", region="eu", zone="eu-c", st=status(cpu=100, mem=400, cpu_used=83))
    r = sched.schedule(Task(task(replicas=4), name="web", workload="shop/web"), snap)
    assert r.placement_dict()["c"] == 2 and r.placed == 4
    # disabled in the profile: plain water-level division
    off = Scheduler(Profile.from_dict({"concentration": {"enabled": False}}), rng_seed=1)
    assert "concentration" not in off.schedule(Task(task(replicas=4), name="web", workload="shop/web"),
                                               snap).analysis


def test_a_repelling_affinity_keeps_the_fewest_best_clusters() -> None:
    a = np.array([100.0, 100.0, 100.0, 40.0])
    caps = np.array([4.0, 4.0, 4.0, 9.0])
    none = np.zeros(4, dtype=np.intp)
    prefer = np.array([1.0, 3.0, 2.0, 0.0])
    # attracting (traffic, data): the whole tied top tier is kept
    c = concentrate(a, caps, none, prefer, 3, ON, ("TrafficAffinity",))
    assert c is not None and c.keep.tolist() == [0, 1, 2]
    # repelling (Dissonance): one cluster holds 3 replicas — the preferred one of the tie
    c = concentrate(a, caps, none, prefer, 3, ON, ("Dissonance",), fewest=True)
    assert c is not None and c.keep.tolist() == [1] and c.tier.tolist() == [0]
    # 6 replicas need two: the two preferred of the tie, still not the third
    c = concentrate(a, caps, none, prefer, 6, ON, ("Dissonance",), fewest=True)
    assert c is not None and c.keep.tolist() == [1, 2]
    # existing replicas elsewhere stay (no move just for concentrating)
    c = concentrate(a, caps, np.array([0, 0, 0, 2]), prefer, 3, ON, ("Dissonance",), fewest=True)
    assert c is not None and c.keep.tolist() == [1, 3]


def test_scheduler_puts_a_classed_workload_on_one_clash_free_cluster(snap: Snapshot) -> None:
    _fleet(snap)
    snap.set_class_placement("batch", "cpu-batch", [("a", 10)], 1.0)  # a clashes with latency-sensitive
    sched = Scheduler(Profile.default(), rng_seed=1)
    r = sched.schedule(Task(task(replicas=3), name="api", workload_class="latency-sensitive"), snap)
    assert r.analysis["concentration"]["plugins"] == ["Dissonance"]
    # b, c and d are equally free of clashing classes: one of them holds all three replicas
    assert len(r.pairs) == 1 and r.pairs[0][0] != "a" and r.placed == 3


def test_a_replica_beside_each_significant_traffic_peer() -> None:
    a = np.array([100.0, 40.0, 0.0, 10.0])
    caps = np.array([5.0, 5.0, 5.0, 0.0])
    none = np.zeros(4, dtype=np.intp)
    anchors = np.array([9e6, 4e6, 0.0, 2e6])  # peers on 0 (heaviest), 1 and 3 (3 cannot hold one)
    c = concentrate(a, caps, none, np.zeros(4), 3, ON, ("TrafficAffinity",), anchors=anchors)
    assert c is not None and c.keep.tolist() == [0, 1] and c.tier.tolist() == [0, 0]
    assert c.required.tolist() == [0, 1] and c.record(4)["besidePeers"] == 2
    # one replica: only the heaviest peer's cluster is required … and a repelling affinity ignores peers
    c = concentrate(a, caps, none, np.zeros(4), 1, ON, (), anchors=anchors)
    assert c is not None and c.required.tolist() == [0]
    c = concentrate(a, caps, none, np.zeros(4), 3, ON, (), anchors=anchors, fewest=True)
    assert c is not None and c.required.size == 0 and c.keep.tolist() == [0]
