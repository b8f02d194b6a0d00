"""The fast paths give the answers of the straightforward definitions they replace."""

from __future__ import annotations

import importlib
import json
from dataclasses import replace
from unittest.mock import patch

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from drods.model.binding import TargetCluster
from drods.model.placement import (
    ClusterAffinity,
    FieldSelector,
    FieldSelectorRequirement,
    Placement,
    ReplicaScheduling,
    StaticClusterWeight,
    WeightPreference,
)
from drods.model.selector import LabelSelector, LabelSelectorRequirement
from drods.scheduler import Profile, Scheduler, Snapshot, webster
from drods.scheduler.divide import aggregate
from drods.scheduler.selectors import affinity_mask
from drods.scheduler.task import AffinityKey, StaticRules
from drods.scheduler.weights import static_weights
from drods.schedulerd.records import Decision, decode_binding, encode_object, merge_status, with_status
from tests.scheduler.conftest import add, status, task

divide_module = importlib.import_module("drods.scheduler.divide")  # the package re-exports its function
TIERS = ["gold", "silver", "bronze"]
REGIONS = ["eu", "us", "ap"]


def _fleet(n: int, seed: int) -> Snapshot:
    rng = np.random.default_rng(seed)
    snap = Snapshot()
    for i in range(n):
        labels = {"tier": TIERS[int(rng.integers(3))]} if rng.random() < 0.8 else {}
        add(snap, f"c{i:03d}", labels=labels, region=REGIONS[int(rng.integers(3))])
    return snap


def _rule(rng: np.random.Generator, n: int) -> StaticClusterWeight:
    kind = int(rng.integers(5))
    weight = int(rng.integers(1, 9))
    if kind == 0:
        aff = ClusterAffinity(clusterNames=[f"c{int(i):03d}" for i in rng.choice(n + 3, size=2)])
    elif kind == 1:
        aff = ClusterAffinity(labelSelector=LabelSelector(matchLabels={"tier": TIERS[int(rng.integers(3))]}))
    elif kind == 2:
        aff = ClusterAffinity(labelSelector=LabelSelector(matchExpressions=[LabelSelectorRequirement(
            key="tier", operator="In", values=list(rng.choice(TIERS, size=2, replace=False)))]))
    elif kind == 3:
        aff = ClusterAffinity(fieldSelector=FieldSelector(matchExpressions=[FieldSelectorRequirement(
            key="region", operator="In", values=[REGIONS[int(rng.integers(3))]])]))
    else:
        aff = ClusterAffinity(clusterNames=[f"c{int(rng.integers(n)):03d}"], exclude=["c000"])
    return StaticClusterWeight(targetCluster=aff, weight=weight)


@settings(max_examples=60, deadline=None)
@given(seed=st.integers(0, 10_000), rules=st.integers(1, 12))
def test_static_weights_equal_the_rule_by_rule_definition(seed: int, rules: int) -> None:
    """Karmada: a cluster's weight is the highest rule matching it (names, labels, fields, exclude)."""
    n = 30
    snap = _fleet(n, seed)
    rng = np.random.default_rng(seed + 1)
    rule_list = [_rule(rng, n) for _ in range(rules)]
    expected = np.zeros(n)
    for r in rule_list:
        m = affinity_mask(snap, AffinityKey.of(r.targetCluster))
        expected = np.maximum(expected, np.where(m, float(r.weight), 0.0))
    got = static_weights(snap, StaticRules.of(rule_list))
    assert got.tolist() == expected.tolist()
    assert static_weights(snap, StaticRules.of(rule_list)) is got  # cached until the topology changes
    add(snap, "c999", labels={"tier": "gold"})
    assert static_weights(snap, StaticRules.of(rule_list)).size == n + 1


def test_one_rule_per_cluster_through_the_scheduler_is_equal_spread_in_name_order() -> None:
    snap = Snapshot()
    for i in range(40):
        add(snap, f"m{39 - i:02d}")
    pl = Placement(replicaScheduling=ReplicaScheduling(weightPreference=WeightPreference(staticWeightList=[
        StaticClusterWeight(targetCluster=ClusterAffinity(clusterNames=[f"m{i:02d}"]), weight=1)
        for i in range(40)])))
    r = Scheduler(Profile.default(), rng_seed=1).schedule(task(replicas=5, placement=pl), snap)
    # equal weights, five seats: exact ties go to the first names
    assert r.pairs == (("m00", 1), ("m01", 1), ("m02", 1), ("m03", 1), ("m04", 1))
    assert r.placement == [TargetCluster(cluster=c, replicas=k) for c, k in r.pairs]
    assert r.placement_dict() == dict(r.pairs)
    assert list(r.scores["total"]) == [c for c, _ in r.pairs]


def _greedy(total: int, w: np.ndarray, cap: np.ndarray, prefer: np.ndarray) -> list[int]:
    """Webster from nothing, one seat at a time: highest w/(s+0.5); exact ties to fewer seats,
    then the preferred cluster, then the first."""
    s = [0] * w.size
    for _ in range(total):
        best = None
        for i in range(w.size):
            if w[i] <= 0 or s[i] >= cap[i]:
                continue
            key = (w[i] / (s[i] + 0.5), -s[i], prefer[i], -i)
            if best is None or key > best[0]:
                best = (key, i)
        if best is None:
            break
        s[best[1]] += 1
    return s


@settings(max_examples=60, deadline=None)
@given(seed=st.integers(0, 10_000), m=st.integers(400, 700), total=st.integers(11, 16),
       levels=st.integers(1, 4))
def test_top_seat_search_over_many_clusters_equals_greedy(seed: int, m: int, total: int, levels: int) -> None:
    """Many clusters, few seats, many exact ties: the shape where only the clusters that can win
    a seat are searched."""
    _check_top_seats(seed, m, total, levels)


@settings(max_examples=60, deadline=None)
@given(seed=st.integers(0, 10_000), m=st.integers(2, 60), total=st.integers(1, 16), levels=st.integers(1, 4))
def test_top_seat_search_over_few_clusters_equals_greedy(seed: int, m: int, total: int, levels: int) -> None:
    _check_top_seats(seed, m, total, levels)


@settings(max_examples=150, deadline=None)
@given(seed=st.integers(0, 10_000), m=st.integers(1, 80), total=st.integers(1, 20), levels=st.integers(1, 4),
       with_initial=st.booleans(), with_prefer=st.booleans(), in_use=st.booleans())
def test_one_cluster_holding_everything_is_found_as_the_full_sort_finds_it(
        seed: int, m: int, total: int, levels: int, with_initial: bool, with_prefer: bool, in_use: bool) -> None:
    """Aggregated's "the first cluster in its order holds every new replica" shortcut gives the
    placement of the full sort, over many exact ties in use, room, score and preference — and with
    no cluster in use, where it searches every row."""
    rng = np.random.default_rng(seed)
    caps = rng.integers(0, total + 3, size=m).astype(np.float64)
    initial = rng.integers(0, 2, size=m) * (rng.random(m) < 0.2) if with_initial and in_use else None
    used = rng.random(m) < 0.1 if in_use else np.zeros(m, dtype=bool)
    scores = rng.integers(0, levels, size=m).astype(np.float64) * 25.0
    prefer = rng.integers(0, levels, size=m).astype(np.float64) if with_prefer else None
    got = aggregate(total, caps, initial=initial, used=used, scores=scores, prefer=prefer)
    with patch.object(divide_module, "_first_that_holds", lambda *_: None):
        full = aggregate(total, caps, initial=initial, used=used, scores=scores, prefer=prefer)
    assert got.tolist() == full.tolist()


def _check_top_seats(seed: int, m: int, total: int, levels: int) -> None:
    rng = np.random.default_rng(seed)
    w = rng.integers(1, levels + 1, size=m).astype(np.float64) * 10.0
    cap = rng.integers(0, 3, size=m).astype(np.float64)
    prefer = rng.permutation(m).astype(np.float64)
    got = webster(total, w, cap, initial=np.zeros(m, dtype=np.intp), prefer=prefer)
    assert got.tolist() == _greedy(total, w, cap, prefer)


def test_placement_is_in_name_order_whatever_order_the_clusters_came_in() -> None:
    """Rows in name order skip the sort by name; rows out of name order (a cluster registered
    later, a removal moving a row) are sorted."""
    pl = Placement(replicaScheduling=ReplicaScheduling(replicaSchedulingType="Duplicated"))
    names = ["m00", "m01", "m02", "m03"]
    for order in (names, names[::-1], ["m02", "m00", "m03", "m01"]):
        snap = Snapshot()
        for nm in order:
            add(snap, nm, st=status(cpu=10))
        assert snap.name_ordered() == (order == names)
        r = Scheduler(Profile.default(), rng_seed=1).schedule(task(replicas=2, placement=pl), snap)
        assert [c for c, _ in r.pairs] == names
    snap.remove_cluster("m02")  # the last row moves into the hole
    r = Scheduler(Profile.default(), rng_seed=1).schedule(task(replicas=2, placement=pl), snap)
    assert [c for c, _ in r.pairs] == ["m00", "m01", "m03"]


def test_assume_takes_pairs_and_a_cluster_named_twice() -> None:
    snap = Snapshot()
    add(snap, "a", st=status(cpu=10))
    add(snap, "b", st=status(cpu=10))
    snap.assume((("a", 2), ("b", 1), ("a", 1)), [1.0, 0.0, 0.0, 1.0, 0.0], key="k")
    assert snap.free[snap.index["a"], 0] == 7.0 and snap.free[snap.index["b"], 0] == 9.0
    assert snap.forget(key="k")
    assert snap.free[:, 0].tolist() == [10.0, 10.0]
    snap.assume([TargetCluster(cluster="b", replicas=4), TargetCluster(cluster="gone", replicas=3)],
                [1.0, 0.0, 0.0, 1.0, 0.0])
    assert snap.free[snap.index["b"], 0] == 6.0
    # many clusters at once (one array update): each row gets its own count, forget undoes it
    for i in range(12):
        add(snap, f"m{i}", st=status(cpu=10))
    many = tuple((f"m{i}", i % 3 + 1) for i in range(12))
    snap.assume(many, [2.0, 0.0, 0.0, 1.0, 0.0], key="many")
    assert [snap.free[snap.index[f"m{i}"], 0] for i in range(12)] == [10.0 - 2 * (i % 3 + 1) for i in range(12)]
    snap.forget(key="many")
    assert [snap.free[snap.index[f"m{i}"], 0] for i in range(12)] == [10.0] * 12


def test_own_status_write_is_known_without_parsing() -> None:
    raw = json.dumps({"metadata": {"name": "app", "generation": 3},
                      "spec": {"replicas": 4, "resources": {"cpu": 1}},
                      "status": {"phase": "Propagated", "placement": [{"cluster": "x", "replicas": 4}]}}).encode()
    rec = decode_binding("/registry/bindings/app", raw, 7)
    assert rec is not None
    for d in (Decision(True, (("a", 3), ("b", 1)), "scheduled", {}, 3, 1_700_000_000.123),
              Decision(False, (), "no room", {"a": "full"}, 3, 1_700_000_001.0)):
        obj = json.loads(raw)
        obj["status"] = merge_status(obj["status"], d)
        value = encode_object(obj)
        decoded = decode_binding(rec.key, value, 9)
        assert decoded is not None
        assert replace(with_status(rec, obj, value), mod_revision=9) == decoded
        # the record keeps the object but its reasons (written anew by every decision)
        assert decoded.object() == {**obj, "status": {k: v for k, v in obj["status"].items() if k != "reasons"}}
        assert (b"reasons" in value, b"reasons" in decoded.raw) == (bool(d.reasons), False)
