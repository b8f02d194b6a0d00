"""Karmada ``pkg/scheduler/core/assignment_test.go`` (stored version 0372cabb) and
``division_algorithm_test.go`` (stored version 08887eea), case by case.

"dynamic weight" is ``dynamicWeight: AvailableReplicas``; a cluster's available replicas are its
``pods`` allocatable. Cases both files share run once and name both sources. The old file's
``Test_divideRemainingReplicas`` exercises a helper of Karmada's pre-Webster remainder algorithm
with no policy-level meaning; it is not translated (docs/karmada.md, "Sources").
"""

from __future__ import annotations

import pytest

from drods.model.placement import ReplicaScheduling
from tests.karmada.harness import (
    AGGREGATED,
    DUPLICATED,
    DYNAMIC,
    differs,
    fleet,
    placed,
    schedule,
    static,
)


def members(*pods: int | None) -> dict[str, int | None]:
    return {f"member{i + 1}": p for i, p in enumerate(pods)}


def run(pods: dict[str, int | None], replicas: int, rs: ReplicaScheduling,
        current: dict[str, int] | None = None) -> tuple[str, dict[str, int], bool]:
    r = schedule(fleet(pods), replicas, rs=rs, current=current)
    return r.phase, placed(r), r.partial


W321 = {"member1": 3, "member2": 2, "member3": 1}
UNBOUNDED3 = members(None, None, None)


# --------------------------------------------------------------------------- static weights
@pytest.mark.parametrize(("name", "clusters", "weights", "replicas", "want"), [
    ("replica 12, weight 3:2:1", UNBOUNDED3, list(W321.items()), 12, {"member1": 6, "member2": 4, "member3": 2}),
    ("insufficient replica assignment should get 0 replica", members(None, None),
     [("member1", 1), ("member2", 1)], 0, {}),
    ("selected cluster without weight should be ignored", members(None, None), [("member1", 1)], 2, {"member1": 2}),
    ("cluster with multiple weights", members(None, None), [("member1", 1), ("member2", 1), ("member1", 2)], 3,
     {"member1": 2, "member2": 1}),
])
def test_static_weight(name: str, clusters: dict[str, int | None], weights: list[tuple[str, int]], replicas: int,
                       want: dict[str, int]) -> None:
    """assignment_test Test_assignByStaticWeightStrategy; division_algorithm_test
    Test_divideReplicasByStaticWeight."""
    phase, got, _ = run(clusters, replicas, static(weights))
    assert phase == "Scheduled" and got == want


def test_static_weight_replica_14_weight_321_is_webster() -> None:
    """Karmada's tables expect 8:4:2 (the largest weight takes the whole remainder);
    Webster — which Karmada's own Dispenser now uses — gives 7:5:2 (quotas 7, 4.67, 2.33)."""
    differs("D9")
    assert run(UNBOUNDED3, 14, static(W321))[1] == {"member1": 7, "member2": 5, "member3": 2}


def test_default_weight_means_water_level() -> None:
    """Karmada: ``Weighted`` without a weight preference is equal static weights (4:4:4).
    DRO-DS divides by water level; on a quiet fleet it packs the fewest clusters."""
    differs("D3")
    rs = ReplicaScheduling(replicaSchedulingType="Divided", replicaDivisionPreference="Weighted")
    phase, got, _ = run(UNBOUNDED3, 12, rs)
    assert phase == "Scheduled" and sum(got.values()) == 12 and len(got) == 1


# --------------------------------------------------------------------------- dynamic, from scratch
@pytest.mark.parametrize(("name", "pods", "rs", "want"), [
    ("replica 12, dynamic weight 6:8:10", members(6, 8, 10), DYNAMIC, [{"member1": 3, "member2": 4, "member3": 5}]),
    ("replica 12, dynamic weight 18:12:6", members(18, 12, 6), DYNAMIC, [{"member1": 6, "member2": 4, "member3": 2}]),
    ("replica 12, dynamic weight 6:12:6", members(6, 12, 6), DYNAMIC, [{"member1": 3, "member2": 6, "member3": 3}]),
    ("replica 12, aggregated 6:8:10", members(6, 8, 10), AGGREGATED, [{"member2": 5, "member3": 7}]),
    ("replica 12, aggregated 12:8:10", members(12, 8, 10), AGGREGATED, [{"member1": 12}]),
    ("replica 12, aggregated 12:6:6", members(6, 12, 6), AGGREGATED, [{"member2": 12}]),
    # Karmada keeps its input order among equals (member1, member2); DRO-DS breaks the tie at random
    ("replica 12, aggregated 6:6:6", members(6, 6, 6), AGGREGATED,
     [{"member1": 6, "member2": 6}, {"member1": 6, "member3": 6}, {"member2": 6, "member3": 6}]),
])
def test_divide_from_scratch(name: str, pods: dict[str, int | None], rs: ReplicaScheduling,
                             want: list[dict[str, int]]) -> None:
    """assignment_test Test_dynamicScaleUp; division_algorithm_test Test_divideReplicasByResource and
    Test_divideReplicasByPreference."""
    phase, got, partial = run(pods, 12, rs)
    assert phase == "Scheduled" and not partial and got in want


def test_dynamic_weight_8_8_10_is_webster() -> None:
    """Karmada expects 4:3:5 or 3:4:5 (remainder to the largest); Webster ties the two 8s and gives 4:4:4."""
    differs("D9")
    assert run(members(8, 8, 10), 12, DYNAMIC)[1] == {"member1": 4, "member2": 4, "member3": 4}


def test_dynamic_weight_20_12_6_is_webster() -> None:
    """division_algorithm_test expects 7:4:1; Webster gives 6:4:2 (quotas 6.3, 3.8, 1.9)."""
    differs("D9")
    assert run(members(20, 12, 6), 12, DYNAMIC)[1] == {"member1": 6, "member2": 4, "member3": 2}


@pytest.mark.parametrize("rs", [DYNAMIC, AGGREGATED], ids=["dynamic weight 3:3:3", "aggregated 3:3:3"])
def test_not_enough_room_places_what_fits(rs: ReplicaScheduling) -> None:
    """Karmada refuses 12 replicas over room for 9; DRO-DS places 9 and reports a partial placement."""
    differs("D1")
    r = schedule(fleet(members(3, 3, 3)), 12, rs=rs)
    assert r.phase == "Scheduled" and r.partial and r.placed == 9 and "placed 9/12" in r.message


# --------------------------------------------------------------------------- scaling
@pytest.mark.parametrize(("name", "pods", "replicas", "rs", "current", "want"), [
    ("replica 12 -> 6, dynamic weighted 1:1:1", members(1, 1, 1), 6, DYNAMIC, {"member1": 2, "member2": 4,
                                                                              "member3": 6},
     {"member1": 1, "member2": 2, "member3": 3}),
    ("replica 12 -> 6, aggregated 1:1:1", members(1, 1, 1), 6, AGGREGATED, {"member1": 4, "member2": 8},
     {"member2": 6}),
    ("replica 12 -> 8, aggregated 100:100", members(100, 100), 8, AGGREGATED, {"member1": 4, "member2": 8},
     {"member2": 8}),
    ("replica 12 -> 24, aggregated 6:6:20", members(6, 6, 20), 24, AGGREGATED, {"member1": 4, "member2": 8},
     {"member1": 10, "member2": 14}),
    ("replica 12, dynamic weight 3:3, with cluster3 disappeared and cluster2 appeared", members(3, 3), 12, DYNAMIC,
     {"member1": 6, "member3": 6}, {"member1": 9, "member2": 3}),
])
def test_scale(name: str, pods: dict[str, int | None], replicas: int, rs: ReplicaScheduling,
               current: dict[str, int], want: dict[str, int]) -> None:
    """assignment_test Test_dynamicScale and Test_dynamicScaleUp."""
    phase, got, partial = run(pods, replicas, rs, current)
    assert phase == "Scheduled" and not partial and got == want


def test_scale_up_dynamic_keeps_current_and_aims_at_capacity_share() -> None:
    """12 → 24 over room 10:10:10 from 2:4:6. Karmada divides the 12 new replicas by room (6:8:10);
    DRO-DS only adds (nothing moves) and gives the new replicas where the clusters are furthest
    below their share of what each can hold in all (existing + room)."""
    differs("D10")
    cur = {"member1": 2, "member2": 4, "member3": 6}
    got = run(members(10, 10, 10), 24, DYNAMIC, cur)[1]
    assert got == {"member1": 7, "member2": 8, "member3": 9}
    assert all(got[c] >= n for c, n in cur.items())


@pytest.mark.parametrize(("rs", "current"), [(DYNAMIC, {"member1": 2, "member2": 4, "member3": 6}),
                                             (AGGREGATED, {"member1": 4, "member2": 8})],
                         ids=["replica 12 -> 24, dynamic weighted 1:1:1", "replica 12 -> 24, aggregated 1:1:1"])
def test_scale_up_without_room_is_partial(rs: ReplicaScheduling, current: dict[str, int]) -> None:
    differs("D1")
    r = schedule(fleet(members(1, 1, 1)), 24, rs=rs, current=current)
    assert r.phase == "Scheduled" and r.partial and r.placed == 15
    assert all(r.placement_dict().get(c, 0) >= n for c, n in current.items())


def test_scale_up_aggregated_4_6_8_is_webster() -> None:
    """12 new replicas over room 4:6:8 (all three needed): Karmada's table 2:4:6 (remainder to the
    largest), Webster 3:4:5 → 7:12:5."""
    differs("D9")
    got = run(members(4, 6, 8), 24, AGGREGATED, {"member1": 4, "member2": 8})[1]
    assert got == {"member1": 7, "member2": 12, "member3": 5}


def test_scale_up_aggregated_cluster_replaced_is_webster() -> None:
    """member2 gone, member4 new: 20 replicas over room 4:8:12 — Karmada's table 3:6:11, Webster 3:7:10."""
    differs("D9")
    got = run({"member1": 4, "member3": 8, "member4": 12}, 24, AGGREGATED, {"member1": 4, "member2": 8})[1]
    assert got == {"member1": 7, "member3": 7, "member4": 10}


# --------------------------------------------------------------------------- duplicated
def test_duplicated_multiple_clusters() -> None:
    assert run({"cluster1": None, "cluster2": None}, 2, DUPLICATED)[1] == {"cluster1": 2, "cluster2": 2}


def test_duplicated_no_target_cluster() -> None:
    """Karmada's assign step returns an empty list; its scheduler then fails with "no clusters
    available to schedule" (common_test) — DRO-DS: Unschedulable, no placement."""
    r = schedule(fleet({}), 2, rs=DUPLICATED)
    assert r.phase == "Unschedulable" and r.placement == []


def test_duplicated_zero_replicas() -> None:
    """Karmada lists both clusters with 0 replicas; DRO-DS lists only clusters that get replicas."""
    differs("D14")
    r = schedule(fleet({"cluster1": None, "cluster2": None}), 0, rs=DUPLICATED)
    assert r.phase == "Scheduled" and r.placement == []


# --------------------------------------------------------------------------- old Dispenser helper
@pytest.mark.parametrize(("new", "want"), [(6, {"A": 2, "B": 4, "C": 6}), (3, {"A": 2, "B": 3, "C": 4}),
                                           (2, {"A": 1, "B": 3, "C": 4})])
def test_dispenser_take_by_weight(new: int, want: dict[str, int]) -> None:
    """division_algorithm_test Test_dispenser_takeByWeight (08887eea) expects 2:4:6, 1:3:5 and
    1:2:5 — the old remainder rule; the 3- and 2-replica answers are Webster's, which Karmada's
    later binding_test expects for the same inputs."""
    if new != 6:
        differs("D9")
    snap = fleet(dict.fromkeys("ABC"))
    r = schedule(snap, 6 + new, rs=static({"A": 1, "B": 2, "C": 3}), current={"A": 1, "B": 2, "C": 3})
    assert placed(r) == want


def test_static_weights_are_capped_by_what_fits() -> None:
    """Karmada divides static weights without looking at room (5:5); DRO-DS never places more than
    fits a cluster and gives the rest to the others by the same weights."""
    differs("D4")
    r = schedule(fleet({"member1": 2, "member2": None}), 10, rs=static({"member1": 1, "member2": 1}))
    assert placed(r) == {"member1": 2, "member2": 8} and not r.partial


def test_no_replica_scheduling_means_water_level_division() -> None:
    """Karmada treats a placement without ``replicaScheduling`` as Duplicated (4 on each);
    DRO-DS divides the 4 replicas by water level."""
    differs("D3")
    r = schedule(fleet({"member1": None, "member2": None}), 4)
    assert r.division == "WaterLevel" and r.placed == 4 and sum(placed(r).values()) == 4
