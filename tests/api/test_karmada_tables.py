"""`kubectl get` of Karmada's kinds prints the columns Karmada's CRDs declare (its users read them)."""

from __future__ import annotations

from typing import Any

from drods.api.table import to_table
from drods.model.kinds import (
    FEDERATED_HPA,
    FEDERATED_RESOURCE_QUOTA,
    KARMADA_CLUSTER_PROPAGATION_POLICY,
    KARMADA_PROPAGATION_POLICY,
)

META = {"name": "x", "namespace": "default", "creationTimestamp": "2026-01-01T00:00:00Z"}


def row(kind: Any, obj: dict[str, Any]) -> dict[str, Any]:
    table = to_table(kind, [{"metadata": META, **obj}], 1)
    names = [c["name"] for c in table["columnDefinitions"]]
    return dict(zip(names, table["rows"][0]["cells"], strict=True))


def test_propagation_policies_show_conflict_resolution_and_priority() -> None:
    for kind in (KARMADA_PROPAGATION_POLICY, KARMADA_CLUSTER_PROPAGATION_POLICY):
        got = row(kind, {"spec": {"conflictResolution": "Overwrite", "priority": 5}})
        assert list(got)[:3] == ["Name", "Conflict-Resolution", "Priority"] and "Age" in got
        assert got["Conflict-Resolution"] == "Overwrite" and got["Priority"] == 5
        assert row(kind, {"spec": {}})["Conflict-Resolution"] == "Abort"  # Karmada's default


def test_federated_resource_quota_shows_overall_and_its_use() -> None:
    got = row(FEDERATED_RESOURCE_QUOTA, {"spec": {}, "status": {"overall": {"cpu": "20", "memory": "10Gi"},
                                                               "overallUsed": {"cpu": "1"}}})
    assert got["Overall"] == "map[cpu:20 memory:10Gi]" and got["Overall_Used"] == "map[cpu:1]"


def test_federated_hpa_shows_its_target_bounds_and_replicas() -> None:
    got = row(FEDERATED_HPA, {"spec": {"scaleTargetRef": {"kind": "Deployment", "name": "web"}, "minReplicas": 2,
                                       "maxReplicas": 9}, "status": {"currentReplicas": 4}})
    assert [got[k] for k in ("Reference-Kind", "Reference-Name", "MinPods", "MaxPods", "Replicas")] == [
        "Deployment", "web", 2, 9, 4]


def test_cron_federated_hpa_shows_its_target() -> None:
    from drods.model.kinds import CRON_FEDERATED_HPA

    got = row(CRON_FEDERATED_HPA, {"spec": {"scaleTargetRef": {"kind": "FederatedHPA", "name": "web"}, "rules": []}})
    assert list(got) == ["Name", "Reference-Kind", "Reference-Name", "Age"]
    assert (got["Reference-Kind"], got["Reference-Name"]) == ("FederatedHPA", "web")
