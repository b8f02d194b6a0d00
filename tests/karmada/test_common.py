"""Karmada ``pkg/scheduler/core/common_test.go`` (stored version 0b93e8d9): TestSelectClusters
(the three plain cases are in test_select_clusters.py), TestAssignReplicas, and the
multi-component tests.
"""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import ValidationError

from drods.model.binding import BindingSpec
from tests.karmada.harness import DYNAMIC, differs, fleet, placed, schedule

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


@pytest.mark.parametrize("name", [
    "select clusters with overflow affinities",
    "Overflow: primary group has enough capacity, no overflow needed",
    "Overflow: primary group capacity exhausted, remaining replicas overflow to next tier",
    "Overflow: all tiers exhausted, scheduling fails",
    "Overflow: AvailableReplicas greater than AllocatableReplicas due to previously assigned replicas",
])
def test_overflow_affinities_not_supported_yet(name: str) -> None:
    """``clusterAffinities[].overflowAffinities`` (Karmada 1.18) is refused with a field error,
    never silently ignored; it belongs to the placement work (issue 14)."""
    differs("D7")
    with pytest.raises(ValidationError, match="overflowAffinities"):
        BindingSpec.model_validate({"replicas": 5, "placement": OVERFLOW})


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
