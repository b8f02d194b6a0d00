"""Karmada ``pkg/util/helper/binding_test.go`` (stored version 058cf3eb): the Dispenser.

``Test_dispenser_AllocateByWeight`` gives new replicas to clusters holding ``initialAssignment``
by weight; ``TestDispenseReplicasByTargetClusters`` spreads ``sum`` replicas in proportion to an
existing target list. Both are static weights in DRO-DS.
"""

from __future__ import annotations

import pytest

from tests.karmada.harness import differs, fleet, placed, schedule, static

W123 = {"A": 1, "B": 2, "C": 3}
INIT123 = {"A": 1, "B": 2, "C": 3}


def allocate(new: int, weights: dict[str, int], initial: dict[str, int] | None = None) -> dict[str, int]:
    snap = fleet(dict.fromkeys(sorted(set(weights) | set(initial or {}))))
    return placed(schedule(snap, new + sum((initial or {}).values()), rs=static(weights), current=initial))


@pytest.mark.parametrize(("name", "new", "weights", "initial", "want"), [
    ("Scale up 6 replicas", 6, W123, INIT123, {"A": 2, "B": 4, "C": 6}),
    ("Scale up 3 replicas", 3, W123, INIT123, {"A": 2, "B": 3, "C": 4}),
    ("Scale up 2 replicas", 2, W123, INIT123, {"A": 1, "B": 3, "C": 4}),
    ("HA scenario with weight 2:1: assign 1 replica", 1, {"A": 2, "B": 1}, None, {"A": 1}),
    ("HA scenario with weight 2:1: assign 2 replicas", 2, {"A": 2, "B": 1}, None, {"A": 1, "B": 1}),
    ("HA scenario with weight 2:1: assign 3 replicas", 3, {"A": 2, "B": 1}, None, {"A": 2, "B": 1}),
    ("brand new assign 5 replicas", 5, {"A": 170, "B": 110, "C": 60}, None, {"A": 2, "B": 2, "C": 1}),
    ("brand new assign 6 replicas", 6, {"A": 170, "B": 110, "C": 60}, None, {"A": 3, "B": 2, "C": 1}),
    ("brand new assign 5 replicas with even uuid", 5, {"A": 1, "B": 1}, None, {"A": 3, "B": 2}),
])
def test_allocate_by_weight(name: str, new: int, weights: dict[str, int], initial: dict[str, int] | None,
                            want: dict[str, int]) -> None:
    assert allocate(new, weights, initial) == want


def test_allocate_by_weight_odd_uuid_goes_by_name() -> None:
    """Karmada: an odd workload UID reverses the tie order (A 2, B 3). DRO-DS has no UID-seeded
    tie-break: the remainder goes by name whatever the workload."""
    differs("D6")
    assert allocate(5, {"A": 1, "B": 1}) == {"A": 3, "B": 2}


@pytest.mark.parametrize(("name", "clusters", "total", "wants"), [
    ("1 cluster, 5 replicas, 10 sum", {"member1": 5}, 10, [{"member1": 10}]),
    ("3 cluster, 1:1:1, 12 sum", {"member1": 5, "member2": 5, "member3": 5}, 12,
     [{"member1": 4, "member2": 4, "member3": 4}]),
    ("3 cluster, 1:1:1, 10 sum", {"member1": 5, "member2": 5, "member3": 5}, 10,
     [{"member1": 4, "member2": 3, "member3": 3}, {"member1": 3, "member2": 4, "member3": 3},
      {"member1": 3, "member2": 3, "member3": 4}]),
    ("3 cluster, 1:2:3, 13 sum", {"member1": 1, "member2": 2, "member3": 3}, 13,
     [{"member1": 2, "member2": 4, "member3": 7}]),
])
def test_dispense_replicas_by_target_clusters(name: str, clusters: dict[str, int], total: int,
                                              wants: list[dict[str, int]]) -> None:
    assert allocate(total, clusters) in wants


def test_dispense_replicas_by_target_clusters_empty() -> None:
    r = schedule(fleet({}), 10, rs=static({"member1": 1}))
    assert r.phase == "Unschedulable" and r.placement == []
