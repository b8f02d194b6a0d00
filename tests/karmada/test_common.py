"""Karmada ``pkg/scheduler/core/common_test.go`` (stored version 0b93e8d9): TestSelectClusters
(the three plain cases are in test_select_clusters.py), TestAssignReplicas, and the
multi-component tests.
"""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import ValidationError

from drods.model.binding import BindingSpec, TargetCluster
from drods.scheduler import ScheduleResult, Task
from tests.karmada.harness import DYNAMIC, differs, fleet, placed, schedule, scheduler

OVERFLOW: dict[str, Any] = {
    "replicaScheduling": {"replicaSchedulingType": "Divided", "replicaDivisionPreference": "Weighted",
                          "weightPreference": {"dynamicWeight": "AvailableReplicas"}},
    "clusterAffinities": [{"affinityName": "affinity1", "clusterNames": ["member1"],
                           "overflowAffinities": [{"affinityName": "overflow", "clusterNames": ["member2"]}]}],
}


def test_assign_replicas_to_single_cluster() -> None:
    r = schedule(fleet({"member1": None}), 3, rs=DYNAMIC)
    assert placed(r) == {"member1": 3}


def test_no_clusters_available() -> None:
    r = schedule(fleet({}), 1)
    assert r.phase == "Unschedulable" and r.message.startswith("0/0 clusters available")


def test_zero_replicas_lists_no_cluster() -> None:
    """Karmada returns both clusters with no replicas; DRO-DS's placement lists only clusters that
    run replicas, so a zero-replica binding is scheduled with an empty placement."""
    differs("D14")
    r = schedule(fleet({"member1": None, "member2": None}), 0)
    assert r.phase == "Scheduled" and r.placement == []


def test_unsupported_replica_scheduling_strategy_is_rejected() -> None:
    with pytest.raises(ValidationError, match="replicaSchedulingType"):
        BindingSpec.model_validate({"replicas": 3, "placement": {"replicaScheduling": {
            "replicaSchedulingType": "UnsupportedType", "replicaDivisionPreference": "UnsupportedPreference"}}})


def overflow(avail: dict[str, int | None], replicas: int, current: dict[str, int] | None = None,
             **placement: Any) -> ScheduleResult:
    """The stored cases' binding; member2 (overflow) scores higher than member1 (primary)."""
    spec = BindingSpec.model_validate({"replicas": replicas, "resources": {"cpu": 0, "memory": 0},
                                       "placement": {**OVERFLOW, **placement}})
    cur = [TargetCluster(cluster=c, replicas=k) for c, k in (current or {}).items()]
    return scheduler({"member1": 10, "member2": 20}).schedule(Task(spec, name="default/app", current=cur),
                                                              fleet(avail))


def test_select_clusters_with_overflow_affinities() -> None:
    """maxGroups 1 picks the primary group's cluster although the overflow cluster scores higher."""
    one = [{"spreadByField": "cluster", "maxGroups": 1, "minGroups": 1}]
    r = overflow({"member1": 10, "member2": 10}, 5, spreadConstraints=one)
    assert placed(r) == {"member1": 5}


@pytest.mark.parametrize(("name", "avail", "replicas", "current", "want"), [
    ("Overflow: primary group has enough capacity, no overflow needed", (10, 10), 5, None, {"member1": 5}),
    ("Overflow: primary group capacity exhausted, remaining replicas overflow to next tier", (2, 10), 5, None,
     {"member1": 2, "member2": 3}),
    ("Overflow: AvailableReplicas greater than AllocatableReplicas due to previously assigned replicas",
     (2, 10), 8, {"member1": 3}, {"member1": 5, "member2": 3}),
])
def test_overflow_affinities(name: str, avail: tuple[int, int], replicas: int, current: dict[str, int] | None,
                             want: dict[str, int]) -> None:
    assert placed(overflow({"member1": avail[0], "member2": avail[1]}, replicas, current)) == want


def test_overflow_all_tiers_exhausted_places_what_fits() -> None:
    """Karmada fails ("Clusters available replicas are not enough"); DRO-DS places what fits (D1)."""
    differs("D1")
    r = overflow({"member1": 2, "member2": 2}, 10)
    assert placed(r) == {"member1": 2, "member2": 2} and r.partial


def test_overflow_needs_divided_dynamic_weight() -> None:
    """Karmada's webhook refuses overflowAffinities outside Divided with a dynamic weight; so does
    DRO-DS, except that DRO-DS's water-level division counts as a dynamic weight (D7)."""
    differs("D7")
    for rs in (None, {"replicaSchedulingType": "Duplicated"},
               {"replicaSchedulingType": "Divided", "replicaDivisionPreference": "Aggregated"},
               {"replicaSchedulingType": "Divided", "replicaDivisionPreference": "Weighted", "weightPreference": {
                   "staticWeightList": [{"targetCluster": {"clusterNames": ["member1"]}, "weight": 1}]}}):
        with pytest.raises(ValidationError, match="overflowAffinities"):
            BindingSpec.model_validate({"replicas": 5, "placement": {**OVERFLOW, "replicaScheduling": rs}})
    wl = {**OVERFLOW, "replicaScheduling": {"replicaSchedulingType": "Divided",
                                            "weightPreference": {"dynamicWeight": "WaterLevel"}}}
    assert BindingSpec.model_validate({"replicas": 5, "placement": wl}).placement.clusterAffinities[0] \
        .overflowAffinities[0].affinityName == "overflow"


@pytest.mark.parametrize("name", [
    "TestSelectClustersForComponentScaleRequiresCapacity/available-0",
    "TestSelectClustersForComponentScaleRequiresCapacity/available-1",
    "multi-component workload writes complete result",
    "feature disabled keeps legacy result",
    "unsupported placement keeps legacy result",
    "ordered cluster affinities stay outside component result protocol",
])
def test_multi_component_workloads_not_supported(name: str) -> None:
    """Karmada's MultiplePodTemplatesScheduling (``spec.components``) has no DRO-DS counterpart:
    a binding with components is refused with a field error."""
    differs("D8")
    with pytest.raises(ValidationError, match="components"):
        BindingSpec.model_validate({"components": [{"name": "jobmanager", "replicas": 1},
                                                   {"name": "taskmanager", "replicas": 4}]})


def test_ordinary_workload_keeps_scalar_result() -> None:
    rs = DYNAMIC.model_copy(update={"weightPreference": None})
    r = schedule(fleet({"member1": None}), 3, rs=rs)
    assert placed(r) == {"member1": 3}
