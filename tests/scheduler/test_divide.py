"""Replica division: Karmada static weights, Webster rounding, caps, stability, properties."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from drods.model.binding import TargetCluster
from drods.model.cluster import NetworkProfile
from drods.model.placement import (
    ClusterAffinity,
    Placement,
    ReplicaScheduling,
    StaticClusterWeight,
    WeightPreference,
)
from drods.scheduler import DivisionInput, Scheduler, Snapshot, Task, aggregate, divide, webster
from drods.scheduler.divide import TopClamp
from tests.scheduler.conftest import add, status, task

INF = np.inf


def w(*xs: float) -> np.ndarray:
    return np.asarray(xs, dtype=np.float64)


def static_placement(weights: dict[str, int]) -> Placement:
    return Placement(replicaScheduling=ReplicaScheduling(
        replicaSchedulingType="Divided", replicaDivisionPreference="Weighted",
        weightPreference=WeightPreference(staticWeightList=[
            StaticClusterWeight(targetCluster=ClusterAffinity(clusterNames=[c]), weight=x)
            for c, x in weights.items()])))


def test_webster_basic_and_karmada_examples() -> None:
    assert webster(6, w(1, 2), w(INF, INF)).tolist() == [2, 4]
    assert webster(7, w(1, 1), w(INF, INF)).tolist() == [4, 3]  # tie → first (name order)
    # the weights of karmada issue 6735: 170:110:60
    prev = None
    for total in range(0, 40):
        cur = webster(total, w(170, 110, 60), w(INF, INF, INF))
        assert cur.sum() == total
        if prev is not None:
            assert (cur >= prev).all(), f"house monotone broken at {total}: {prev} -> {cur}"
        prev = cur


def test_webster_caps_and_redistribution() -> None:
    s = webster(10, w(1, 1, 1), w(1, INF, INF))
    assert s.tolist()[0] == 1 and s.sum() == 10 and sorted(s.tolist()[1:]) == [4, 5]
    # total beyond every cap: place what fits and no more
    assert webster(100, w(3, 1), w(5, 7)).tolist() == [5, 7]
    # weight-0 clusters never get replicas
    assert webster(5, w(0, 1), w(INF, INF)).tolist() == [0, 5]


def test_webster_large_counts_use_divisor_search() -> None:
    rng = np.random.default_rng(3)
    weights = rng.random(2000) * 100
    caps = np.floor(rng.random(2000) * 40)
    s = webster(30_000, weights, caps)
    assert s.sum() == min(30_000, caps.sum())
    assert (s <= caps).all()
    s2 = webster(1000, weights, np.full(2000, INF))
    assert s2.sum() == 1000


def test_stable_scale_up_only_adds() -> None:
    init = np.array([3, 0, 5])
    s = webster(12, w(1, 1, 1), w(INF, INF, INF), initial=init)
    assert s.sum() == 12 and (s >= init).all()
    assert s.tolist() == [4, 3, 5]


def test_stable_scale_down_removes_most_over_share_then_lowest_weight() -> None:
    init = np.array([4, 4])
    s = webster(6, w(1, 2), w(INF, INF), initial=init)
    assert s.tolist() == [2, 4]  # the weight-1 cluster was over its share
    s = webster(5, w(1, 3), w(INF, INF), initial=np.array([2, 4]))
    assert s.tolist() == [1, 4]
    # equal priority → lowest weight loses first
    s = webster(3, w(1, 3), w(INF, INF), initial=np.array([1, 3]))  # priorities 1/0.5=2 and 3/2.5=1.2
    assert s.tolist() == [1, 2]


def test_aggregate_fewest_clusters_in_proportion() -> None:
    # the biggest first until the replicas fit, then divided in proportion to room (not to the brim)
    assert aggregate(7, w(3, 3, 5)).tolist() == [3, 0, 4]
    assert aggregate(12, w(6, 8, 10)).tolist() == [0, 5, 7]
    # scale-up: clusters already used first, even when smaller
    assert aggregate(10, w(20, 40, 8), initial=np.array([0, 0, 4])).tolist() == [4, 0, 6]
    # scale-down keeps the fewest clusters that already hold the count, empties the rest
    assert aggregate(8, w(100, 100), initial=np.array([4, 8])).tolist() == [0, 8]
    assert aggregate(3, w(3, 3, 5), initial=np.array([2, 2, 2])).tolist() == [2, 1, 0]


def _inp(kind: str, total: int, caps: list[float], existing: list[int] | None = None,
         scores: list[float] | None = None, spread: float = 1.0) -> DivisionInput:
    m = len(caps)
    return DivisionInput(kind=kind, total=total, caps=np.asarray(caps, dtype=float),
                         existing=np.asarray(existing or [0] * m), scores=np.asarray(scores or [50.0] * m),
                         prefer=-np.arange(m, dtype=float), spread=spread)


def test_duplicated_and_aggregated() -> None:
    assert divide(_inp("Duplicated", 3, [5, 2, INF])).tolist() == [3, 0, 3]
    # Aggregated: a cluster that can hold everything wins alone (best score among those)
    assert divide(_inp("Aggregated", 4, [10, 10, 3], scores=[10, 90, 99])).tolist() == [0, 4, 0]
    # else the biggest first, fewest clusters, in proportion to what each holds
    assert divide(_inp("Aggregated", 12, [10, 5, 3])).tolist() == [8, 4, 0]


def test_dynamic_pack_vs_spread() -> None:
    spread = divide(_inp("WaterLevel", 10, [10, 10, 30], spread=1.0))
    assert spread.tolist() == [2, 2, 6]  # ∝ headroom
    pack = divide(_inp("WaterLevel", 10, [5, 8, 30], spread=0.0))
    assert pack.tolist() == [0, 0, 10]  # fewest clusters
    spread = divide(_inp("WaterLevel", 10, [5, 8, 30], spread=1.0))
    mid = divide(_inp("WaterLevel", 10, [5, 8, 30], spread=0.5))
    assert mid.sum() == 10 and spread[2] <= mid[2] <= pack[2]
    # pack prefers clusters already in use
    used = divide(_inp("WaterLevel", 10, [20, 20, 30], existing=[4, 0, 0], spread=0.0))
    assert used.tolist() == [10, 0, 0]


@settings(max_examples=300, deadline=None)
@given(
    caps=st.lists(st.one_of(st.integers(0, 50).map(float), st.just(INF)), min_size=1, max_size=12),
    total=st.integers(0, 400),
    kind=st.sampled_from(["WaterLevel", "AvailableReplicas", "Aggregated", "StaticWeight"]),
    spread=st.floats(0, 1),
    data=st.data(),
)
def test_division_invariants(caps: list[float], total: int, kind: str, spread: float, data: st.DataObject) -> None:
    m = len(caps)
    scores = data.draw(st.lists(st.floats(0, 100), min_size=m, max_size=m))
    weights = data.draw(st.lists(st.integers(1, 9).map(float), min_size=m, max_size=m))
    inp = _inp(kind, total, caps, scores=scores, spread=spread)
    inp.static_weights = np.asarray(weights)
    s = divide(inp)
    c = np.asarray(caps)
    assert (s >= 0).all()
    assert (s <= c).all(), "a cluster got more than fits"
    assert s.sum() == min(total, c.sum())


@settings(max_examples=200, deadline=None)
@given(
    weights=st.lists(st.integers(1, 20).map(float), min_size=1, max_size=8),
    caps=st.data(),
    t1=st.integers(0, 200),
    t2=st.integers(0, 200),
)
def test_webster_incremental_properties(weights: list[float], caps: st.DataObject, t1: int, t2: int) -> None:
    m = len(weights)
    c = np.asarray(caps.draw(st.lists(st.integers(0, 60).map(float), min_size=m, max_size=m)))
    wa = np.asarray(weights)
    a = webster(t1, wa, c)
    b = webster(t2, wa, c, initial=a)
    assert b.sum() == min(t2, c.sum()) or (b.sum() == min(t2, np.maximum(c, a).sum()))
    assert (b <= np.maximum(c, a)).all()
    if t2 >= t1:
        assert (b >= a).all(), "scale-up moved existing replicas"
    else:
        assert (b <= a).all(), "scale-down added replicas somewhere"
        # incremental divisor method from a divisor-method state = fresh divisor method
        assert b.sum() == webster(t2, wa, c).sum()


def test_static_weights_through_scheduler(snap: Snapshot, sched: Scheduler) -> None:
    add(snap, "member1", st=status(cpu=1000, mem=4000))
    add(snap, "member2", st=status(cpu=1000, mem=4000))
    add(snap, "member3", st=status(cpu=1000, mem=4000))
    r = sched.schedule(task(replicas=6, placement=static_placement({"member1": 1, "member2": 2})), snap)
    assert r.placement_dict() == {"member1": 2, "member2": 4}
    assert r.division == "StaticWeight"
    r = sched.schedule(task(replicas=7, placement=static_placement({"member1": 1, "member2": 1})), snap)
    assert r.placement_dict() == {"member1": 4, "member2": 3}


def test_a_dynamic_weight_makes_the_static_list_ignored(snap: Snapshot, sched: Scheduler) -> None:
    """Karmada's ``dynamicWeight``: "if specified, StaticWeightList will be ignored" — every cluster shares."""
    for c in ("member1", "member2", "member3"):
        add(snap, c, st=status(cpu=1000, mem=4000))
    placement = static_placement({"member1": 1, "member2": 5})
    assert placement.replicaScheduling is not None and placement.replicaScheduling.weightPreference is not None
    placement.replicaScheduling.weightPreference.dynamicWeight = "AvailableReplicas"
    r = sched.schedule(task(replicas=6, placement=placement), snap)
    assert r.division == "AvailableReplicas"
    assert r.placement_dict() == {"member1": 2, "member2": 2, "member3": 2}


def test_static_weights_capped_and_redistributed(snap: Snapshot, sched: Scheduler) -> None:
    add(snap, "small", st=status(cpu=4, mem=400))  # 3 one-core replicas below 85%
    add(snap, "big", st=status(cpu=1000, mem=4000))
    r = sched.schedule(task(replicas=10, placement=static_placement({"small": 5, "big": 5})), snap)
    assert r.placement_dict() == {"small": 3, "big": 7}
    assert not r.partial


def test_scale_up_and_down_through_scheduler(snap: Snapshot, sched: Scheduler) -> None:
    for i in range(4):
        add(snap, f"c{i}", st=status(cpu=100, mem=400, cpu_used=10 * i))
    spec = task(replicas=8)
    r1 = sched.schedule(Task(spec, name="w"), snap)
    cur = r1.placement
    up = sched.schedule(Task(task(replicas=12), name="w", current=cur), snap)
    before = r1.placement_dict()
    after = up.placement_dict()
    assert sum(after.values()) == 12
    assert all(after.get(c, 0) >= n for c, n in before.items()), (before, after)
    down = sched.schedule(Task(task(replicas=5), name="w", current=up.placement), snap)
    d = down.placement_dict()
    assert sum(d.values()) == 5
    assert all(d.get(c, 0) <= n for c, n in after.items()), (after, d)
    # same count again: nothing moves
    same = sched.schedule(Task(task(replicas=5), name="w", current=down.placement), snap)
    assert same.placement_dict() == d


def test_replicas_on_lost_cluster_are_replaced(snap: Snapshot, sched: Scheduler) -> None:
    add(snap, "a")
    add(snap, "b", ready=False)
    cur = [TargetCluster(cluster="a", replicas=2), TargetCluster(cluster="b", replicas=2),
           TargetCluster(cluster="gone", replicas=1)]
    r = sched.schedule(Task(task(replicas=5), name="w", current=cur), snap)
    assert r.placement_dict() == {"a": 5}


def test_duplicated_through_scheduler(snap: Snapshot, sched: Scheduler) -> None:
    add(snap, "a")
    add(snap, "b")
    add(snap, "tiny", st=status(cpu=2))
    pl = Placement(replicaScheduling=ReplicaScheduling(replicaSchedulingType="Duplicated"))
    r = sched.schedule(task(replicas=3, placement=pl), snap)
    assert r.placement_dict() == {"a": 3, "b": 3}
    assert r.reasons["tiny"] == "only 1 replicas fit (Duplicated needs 3)"


def test_aggregated_through_scheduler(snap: Snapshot, sched: Scheduler) -> None:
    add(snap, "a", st=status(cpu=10, mem=400))
    add(snap, "b", st=status(cpu=100, mem=400))
    add(snap, "c", st=status(cpu=100, mem=400))
    pl = Placement(replicaScheduling=ReplicaScheduling(replicaDivisionPreference="Aggregated"))
    r = sched.schedule(task(replicas=20, placement=pl), snap)
    assert len(r.placement) == 1 and r.placed == 20 and "a" not in r.placement_dict()
    r = sched.schedule(task(replicas=120, placement=pl), snap)
    assert len(r.placement) == 2 and r.placed == 120


def test_available_replicas_weights(snap: Snapshot, sched: Scheduler) -> None:
    add(snap, "a", st=status(cpu=20, mem=400))   # 17 fit below 85%
    add(snap, "b", st=status(cpu=100, mem=400))  # 85 fit
    pl = Placement(replicaScheduling=ReplicaScheduling(
        weightPreference=WeightPreference(dynamicWeight="AvailableReplicas")))
    r = sched.schedule(task(replicas=12, placement=pl), snap)
    assert r.placement_dict() == {"a": 2, "b": 10}


def test_static_weights_no_match_means_equal_weights(snap: Snapshot, sched: Scheduler) -> None:
    add(snap, "x", st=status(cpu=1000, mem=4000))
    add(snap, "y", st=status(cpu=1000, mem=4000))
    r = sched.schedule(task(replicas=4, placement=static_placement({"nowhere": 3})), snap)
    assert r.placement_dict() == {"x": 2, "y": 2}


def test_spread_min_groups_get_a_replica_each(snap: Snapshot) -> None:
    from drods.model.placement import SpreadConstraint

    add(snap, "us-big", region="us", st=status(cpu=1000, mem=4000))
    add(snap, "eu-small", region="eu", st=status(cpu=100, mem=400, cpu_used=60))
    pl = Placement(spreadConstraints=[SpreadConstraint(spreadByField="region", minGroups=2)],
                   replicaScheduling=ReplicaScheduling(replicaDivisionPreference="Aggregated"))
    r = Scheduler(rng_seed=0).schedule(task(replicas=3, placement=pl), snap)
    assert set(r.placement_dict()) == {"us-big", "eu-small"} and r.placed == 3


def _webster_condition(s: np.ndarray, wts: np.ndarray, caps: np.ndarray) -> bool:
    """Capped divisor-method condition: no free seat ranks above a held one."""
    held = (s > 0) & (wts > 0)
    free = (s < caps) & (wts > 0)
    if not held.any() or not free.any():
        return True
    worst_held = float((wts[held] / (s[held] - 0.5)).min())
    best_free = float((wts[free] / (s[free] + 0.5)).max())
    return best_free <= worst_held * (1 + 1e-9)


@settings(max_examples=300, deadline=None)
@given(
    weights=st.lists(st.integers(0, 6).map(float), min_size=1, max_size=7),
    data=st.data(),
    t1=st.integers(0, 60),
    t2=st.integers(0, 60),
    with_prefer=st.booleans(),
)
def test_one_tie_rule_any_path_same_answer(weights: list[float], data: st.DataObject, t1: int, t2: int,
                                           with_prefer: bool) -> None:
    """Small integer weights make exact ties common: from scratch, scaled up and scaled down
    divisions agree seat for seat (one tie rule for adding and removing)."""
    m = len(weights)
    c = np.asarray(data.draw(st.lists(st.one_of(st.integers(0, 30).map(float), st.just(INF)),
                                      min_size=m, max_size=m)))
    wa = np.asarray(weights)
    prefer = -np.arange(m, dtype=float) if with_prefer else None
    fresh = webster(t2, wa, c, prefer=prefer)
    via = webster(t2, wa, c, initial=webster(t1, wa, c, prefer=prefer), prefer=prefer)
    assert via.tolist() == fresh.tolist(), (t1, t2)
    assert _webster_condition(fresh, wa, c)


def test_classic_sainte_lague_rounds_agree_with_karmada() -> None:
    votes = w(100000, 80000, 30000, 20000)
    rounds = [[1, 0, 0, 0], [1, 1, 0, 0], [2, 1, 0, 0], [2, 1, 1, 0], [2, 2, 1, 0], [2, 2, 1, 1],
              [3, 2, 1, 1], [3, 3, 1, 1]]
    for seats, want in enumerate(rounds, start=1):
        assert webster(seats, votes, w(INF, INF, INF, INF)).tolist() == want
    # a forced reschedule from 8 down to 6 keeps PartyD's seat, as a division from scratch does
    assert webster(6, votes, w(INF, INF, INF, INF), initial=np.array([3, 3, 1, 1])).tolist() == [2, 2, 1, 1]


@settings(max_examples=300, deadline=None)
@given(
    caps=st.lists(st.integers(0, 40).map(float), min_size=1, max_size=9),
    total=st.integers(1, 200),
    data=st.data(),
)
def test_aggregated_minimal_and_proportional(caps: list[float], total: int, data: st.DataObject) -> None:
    c = np.asarray(caps)
    m = c.size
    s = aggregate(total, c, prefer=-np.arange(m, dtype=float))
    assert s.sum() == min(total, c.sum()) and (s <= c).all()
    room = np.minimum(c, total)
    fewest = int(np.searchsorted(np.cumsum(np.sort(room)[::-1]), total - 0.5)) + 1
    assert (s > 0).sum() <= min(fewest, int((c > 0).sum())), "more clusters than needed"
    used = s > 0
    assert _webster_condition(s[used], room[used], room[used]), "not proportional to room"
    # scale-down empties clusters rather than trimming them all, never grows one
    down = data.draw(st.integers(0, int(s.sum())))
    d = aggregate(down, c, initial=s)
    assert d.sum() == down and (d <= s).all()
    keep = int(np.searchsorted(np.cumsum(np.sort(s)[::-1]), down - 0.5)) + 1 if down else 0
    assert (d > 0).sum() <= keep


def _clamped(total: int, levels: list[float], existing: list[int], step: float = 0.0156,
             caps: float = 12.0) -> tuple[list[int], list[int]]:
    """A WaterLevel scale-up over equal clusters at ``levels``: (without the clamp, with it)."""
    m = len(levels)
    inp = _inp("WaterLevel", total, [caps] * m, existing=existing)
    plain = divide(inp).tolist()
    inp.clamp = TopClamp(np.asarray(levels), np.full(m, step), np.asarray(existing))
    return plain, divide(inp).tolist()


def test_a_scale_up_piles_no_new_replica_onto_the_hottest_while_the_others_have_room() -> None:
    """light-load's peak: 15 → 25 replicas over six clusters, the one they hold least of already the hottest."""
    levels, existing = [0.691, 0.661, 0.652, 0.656, 0.661, 0.671], [2, 3, 2, 3, 2, 3]
    plain, clamped = _clamped(25, levels, existing)
    assert plain[0] > 2  # in proportion to room: the hottest takes its share and ends highest
    assert clamped[0] == 2 and sum(clamped) == 25 and all(n >= e for n, e in zip(clamped, existing, strict=True))
    after = [lv + (n - e) * 0.0156 for lv, n, e in zip(levels, clamped, existing, strict=True)]
    assert max(after) <= max(levels) + 0.5 * 0.0156 + 1e-9


def test_a_share_under_the_hottest_is_divided_as_without_the_clamp() -> None:
    plain, clamped = _clamped(14, [0.40, 0.41, 0.42, 0.40, 0.43, 0.70], [2, 2, 2, 2, 2, 2])
    assert clamped == plain == [3, 3, 2, 2, 2, 2]  # the two new seats on the preferred, far under the hottest


def test_when_every_cluster_stands_as_high_the_level_rises_for_all_of_them() -> None:
    plain, clamped = _clamped(30, [0.5] * 6, [2] * 6)
    assert sum(clamped) == 30 and max(clamped) - min(clamped) <= 1


@settings(max_examples=200, deadline=None)
@given(levels=st.lists(st.floats(0.0, 0.9), min_size=1, max_size=10), data=st.data())
def test_the_clamp_keeps_the_divisions_invariants(levels: list[float], data: st.DataObject) -> None:
    m = len(levels)
    existing = data.draw(st.lists(st.integers(0, 5), min_size=m, max_size=m))
    caps = [float(e + data.draw(st.integers(0, 8))) for e in existing]
    total = data.draw(st.integers(sum(existing), sum(existing) + 40))
    inp = _inp("WaterLevel", total, caps, existing=existing)
    plain = divide(inp)
    inp.clamp = TopClamp(np.asarray(levels), np.full(m, 0.02), np.asarray(existing))
    out = divide(inp)
    assert out.sum() == plain.sum() == min(total, int(sum(caps)))  # as many placed
    assert (out <= np.asarray(caps)).all() and (out >= np.asarray(existing)).all()  # capped; a scale-up only adds


def test_through_the_scheduler_a_scale_up_near_its_users_leaves_the_hottest_cluster_alone(
        snap: Snapshot, sched: Scheduler) -> None:
    for i, used in enumerate((44.0, 40.0, 40.5, 41.0)):  # 64 cores each, one region: c0 the hottest by ~0.06
        add(snap, f"c{i}", region="eu", network=NetworkProfile(latencyMs={"eu": 5}),
            st=status(cpu=64, mem=256, cpu_used=used))
    placed = [TargetCluster(cluster=f"c{i}", replicas=2) for i in range(4)]
    snap.assume(placed, task().resources, key="w")
    users = Placement.model_validate({"users": [{"region": "eu"}], "latencySLOMs": 50})
    up = sched.schedule(Task(task(replicas=16, placement=users), name="w", current=placed), snap).placement_dict()
    assert sum(up.values()) == 16 and up["c0"] == 2, up
    # without users the water-level weights spread as ever (S10): the hottest takes its share
    plain = sched.schedule(Task(task(replicas=16), name="w", current=placed), snap).placement_dict()
    assert sum(plain.values()) == 16 and plain["c0"] > 2, plain
