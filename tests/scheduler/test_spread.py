"""Spread constraints chosen together (groups, clusters, capacity) — or refused with the reason."""

from __future__ import annotations

import itertools

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from drods.model.placement import Placement, ReplicaScheduling, SpreadConstraint
from drods.scheduler import Scheduler, Snapshot
from drods.scheduler.groups import pick
from tests.scheduler.conftest import add, status, task


def _pods(n: int) -> dict[str, object]:
    return status(pods={"capacity": n, "used": 0})


def _fleet(spec: list[tuple[str, str, int]]) -> Snapshot:
    snap = Snapshot()
    for name, region, pods in spec:
        add(snap, name, region=region, st=_pods(pods))
    return snap


def test_pick_prefers_rank_and_swaps_only_when_needed() -> None:
    size = np.array([50.0, 60.0, 80.0, 40.0])           # best first
    assert pick(size, 0, 2, 0, 110).tolist() == [0, 1]  # the best two hold it
    assert pick(size, 0, 2, 0, 120).tolist() == [0, 2]  # swap the second for the biggest
    assert pick(size, 0, 2, 0, 150) is None              # no two hold 150
    assert pick(np.array([1.0, 3.0, 2.0, 4.0]), 0, 3, 0, 6).tolist() == [0, 1, 2]


def test_region_passed_over_when_it_has_too_few_clusters() -> None:
    # region r1 has the best cluster but only two clusters; cluster minGroups 3 needs r2
    snap = _fleet([("a1", "r1", 100), ("a2", "r1", 100), ("b1", "r2", 10), ("b2", "r2", 10), ("b3", "r2", 10)])
    pl = Placement(spreadConstraints=[SpreadConstraint(spreadByField="region", maxGroups=1, minGroups=1),
                                      SpreadConstraint(spreadByField="cluster", maxGroups=3, minGroups=3)],
                   replicaScheduling=ReplicaScheduling(replicaDivisionPreference="Aggregated"))
    r = Scheduler(rng_seed=0).schedule(task(replicas=6, cpu=0, mem=0, placement=pl), snap)
    assert r.phase == "Scheduled" and set(r.placement_dict()) == {"b1", "b2", "b3"}, r.message
    # no region holds 4 clusters: refused, and the message says why
    pl.spreadConstraints[1] = SpreadConstraint(spreadByField="cluster", maxGroups=4, minGroups=4)
    r = Scheduler(rng_seed=0).schedule(task(replicas=6, cpu=0, mem=0, placement=pl), snap)
    assert r.phase == "Unschedulable"
    assert "spread by region: no 1 of the 2 region groups hold the 4 clusters" in r.message


def test_cluster_selection_swaps_for_capacity_and_places_what_fits() -> None:
    snap = _fleet([("m1", "r", 40), ("m2", "r", 60), ("m3", "r", 80), ("m4", "r", 50)])
    pl = Placement(spreadConstraints=[SpreadConstraint(spreadByField="cluster", maxGroups=2, minGroups=1)],
                   replicaScheduling=ReplicaScheduling(replicaDivisionPreference="Aggregated"))
    r = Scheduler(rng_seed=0).schedule(task(replicas=120, cpu=0, mem=0, placement=pl), snap)
    assert r.placed == 120 and len(r.placement) == 2 and "m3" in r.placement_dict()
    r = Scheduler(rng_seed=0).schedule(task(replicas=200, cpu=0, mem=0, placement=pl), snap)
    assert r.partial and r.placed == 140 and set(r.placement_dict()) == {"m2", "m3"}


def _pick_reference(size: np.ndarray, forced: int, most: int, least: int, need: float) -> list[int] | None:
    """The greedy spelt out: walk best first, take an entry when some completion still works."""
    n = size.size
    most = min(most, n)
    forced = min(forced, most)

    def works(chosen: list[int], nxt: int) -> bool:  # can chosen ∪ (a subset of [nxt:]) meet both bounds?
        rest = sorted(size[nxt:].tolist(), reverse=True)
        slots = most - len(chosen)
        if slots < 0 or len(chosen) + len(rest) < least:
            return False
        return float(size[chosen].sum()) + sum(rest[:slots]) >= need and slots >= least - len(chosen)

    chosen = list(range(forced))
    if not works(chosen, forced):
        return None
    for i in range(forced, n):
        if len(chosen) < most and works([*chosen, i], i + 1):
            chosen.append(i)
    return chosen


@settings(max_examples=400, deadline=None)
@given(size=st.lists(st.integers(0, 12).map(float), min_size=1, max_size=10), data=st.data())
def test_pick_is_the_best_ranked_selection_that_works(size: list[float], data: st.DataObject) -> None:
    arr = np.asarray(size)
    most = data.draw(st.integers(1, len(size) + 1))
    least = data.draw(st.integers(0, most))
    forced = data.draw(st.integers(0, min(most, len(size))))
    need = float(data.draw(st.integers(0, int(arr.sum()) + 3)))
    got = pick(arr, forced, most, least, need)
    want = _pick_reference(arr, forced, most, least, need)
    assert (None if got is None else got.tolist()) == want


@settings(max_examples=120, deadline=None)
@given(
    regions=st.lists(st.integers(1, 3), min_size=1, max_size=4),
    rmin=st.integers(1, 3), rmax=st.integers(1, 4), cmin=st.integers(1, 6), cmax=st.integers(1, 8),
    seed=st.integers(0, 3),
)
def test_constraints_met_together_or_refused(regions: list[int], rmin: int, rmax: int, cmin: int, cmax: int,
                                             seed: int) -> None:
    """Scheduled ⇔ some choice of regions meets both constraints; when scheduled, it does."""
    rmin, rmax = min(rmin, rmax), max(rmin, rmax)
    cmin, cmax = min(cmin, cmax), max(cmin, cmax)
    spec = [(f"c{g}-{i}", f"r{g}", 100) for g, k in enumerate(regions) for i in range(k)]
    snap = _fleet(spec)
    pl = Placement(spreadConstraints=[SpreadConstraint(spreadByField="region", maxGroups=rmax, minGroups=rmin),
                                      SpreadConstraint(spreadByField="cluster", maxGroups=cmax, minGroups=cmin)])
    r = Scheduler(rng_seed=seed).schedule(task(replicas=40, cpu=0, mem=0, placement=pl), snap)
    feasible = cmax >= rmin and any(
        rmin <= len(sub) <= rmax and sum(regions[g] for g in sub) >= cmin
        for k in range(1, len(regions) + 1) for sub in itertools.combinations(range(len(regions)), k))
    assert (r.phase == "Scheduled") == feasible, r.message
    if feasible:
        used = {c.split("-")[0] for c in r.placement_dict()}
        assert rmin <= len(used) <= rmax
        assert cmin <= len(r.placement) <= cmax
        assert r.placed == 40
    else:
        assert r.message


def test_region_swapped_for_one_that_holds_the_replicas() -> None:
    # r1's cluster is the best scored (idle) but holds 10; r2's holds 100
    snap = Snapshot()
    add(snap, "a1", region="r1", st=status(pods={"capacity": 10, "used": 0}))
    add(snap, "b1", region="r2", st=status(cpu_used=40, pods={"capacity": 100, "used": 0}))
    pl = Placement(spreadConstraints=[SpreadConstraint(spreadByField="region", maxGroups=1, minGroups=1)],
                   replicaScheduling=ReplicaScheduling(replicaDivisionPreference="Aggregated"))
    small = Scheduler(rng_seed=0).schedule(task(replicas=8, cpu=0, mem=0, placement=pl), snap)
    assert small.placement_dict() == {"a1": 8}  # the best region when it holds them
    big = Scheduler(rng_seed=0).schedule(task(replicas=50, cpu=0, mem=0, placement=pl), snap)
    assert big.placement_dict() == {"b1": 50} and not big.partial

