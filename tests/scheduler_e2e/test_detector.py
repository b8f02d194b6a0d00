"""Resource detector: a workload plus a matching policy gets a Binding, kept in step, removed with it."""

from __future__ import annotations

from typing import Any

from drods.model.kinds import BINDING
from tests.scheduler_e2e.conftest import Plane, eventually, placement

DEPLOYMENTS = "/apis/apps/v1/namespaces/default/deployments"
RPP = "/apis/multicluster.io/v1alpha1/resourceplacementpolicies"


def deployment(name: str, replicas: int, labels: dict[str, str] | None = None) -> dict[str, Any]:
    container = {"name": "app", "image": "nginx", "resources": {"requests": {"cpu": "500m", "memory": "256Mi"}}}
    sidecar = {"name": "proxy", "image": "envoy", "resources": {"limits": {"cpu": "250m", "memory": "0.25Gi"}}}
    init = {"name": "migrate", "image": "tool", "resources": {"requests": {"cpu": "1", "memory": "64Mi"}}}
    return {"apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": name, "namespace": "default", "labels": labels or {}},
            "spec": {"replicas": replicas, "selector": {"matchLabels": {"app": name}},
                     "template": {"metadata": {"labels": {"app": name}},
                                  "spec": {"containers": [container, sidecar], "initContainers": [init]}}}}


async def test_deployment_with_placement_policy_gets_a_binding(plane: Plane) -> None:
    await plane.cluster("east", 30, {"tier": "prod"}, region="us-east")
    await plane.cluster("west", 60, {"tier": "prod"}, region="us-west")
    await plane.cluster("lab", 5, {"tier": "dev"})
    await plane.seen("east", "west", "lab")

    r = await plane.call("POST", DEPLOYMENTS, json=deployment("web", 6))
    assert r.status_code == 201, r.text
    r = await plane.call("POST", RPP, json={
        "apiVersion": "multicluster.io/v1alpha1", "kind": "ResourcePlacementPolicy",
        "metadata": {"name": "web-placement"},
        "spec": {"resourceSelector": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "web",
                                      "namespace": "default"},
                 "targetClusters": [{"selectorType": "name", "values": ["east", "west"]},
                                    {"selectorType": "label", "values": ["tier=prod"]}],
                 "priority": 5,
                 "placement": {"replicaScheduling": {"replicaSchedulingType": "Divided",
                                                     "replicaDivisionPreference": "Weighted",
                                                     "weightPreference": {"dynamicWeight": "WaterLevel"}}}}})
    assert r.status_code == 201, r.text

    st = await plane.decided("deployment-default-web")
    got = placement(st)
    assert sum(got.values()) == 6 and set(got) <= {"east", "west"} and got["east"] >= got.get("west", 0)
    r = await plane.call("GET", "/api/v1/bindings/deployment-default-web")
    b = r.json()
    assert b["resource"] == {"apiVersion": "apps/v1", "kind": "Deployment", "name": "web", "namespace": "default",
                             "uid": b["resource"]["uid"]}
    # containers 500m + 250m (limit only) = 0.75 cores, 256Mi + 0.25Gi = 0.5 GiB; the 1-core init container wins cpu
    assert b["resources"] == {"cpu": 1.0, "memory": 0.5} and b["priority"] == 5 and b["replicas"] == 6
    assert b["targetClusters"] == ["east", "west"]
    assert b["placement"]["clusterAffinity"]["labelSelector"]["matchLabels"] == {"tier": "prod"}
    assert b["policyRef"] == {"apiVersion": "multicluster.io/v1alpha1", "kind": "ResourcePlacementPolicy",
                              "name": "web-placement"}
    assert b["labels"]["multicluster.io/managed-by"] == "resource-detector"

    # Scale the workload: the binding follows, and the scheduler only adds replicas.
    r = await plane.call("PATCH", f"{DEPLOYMENTS}/web", json={"spec": {"replicas": 9}},
                         headers={"content-type": "application/merge-patch+json"})
    assert r.status_code == 200, r.text

    async def scaled() -> dict[str, Any] | None:
        s = await plane.status("deployment-default-web")
        return s if s["requested"] == 9 and s["scheduledGeneration"] == s["generation"] else None

    st = await eventually(scaled, what="the binding to follow the scale")
    up = placement(st)
    assert sum(up.values()) == 9 and all(up.get(c, 0) >= n for c, n in got.items())

    # At the same priority a more specific policy wins over a broad one (Karmada's order: explicit
    # priority first, then the selector); deleting it falls back to the broad one.
    r = await plane.call("POST", "/api/v1/propagationpolicies", json={
        "name": "all-deployments", "resourceType": "Deployment", "targetClusters": ["lab"], "priority": 5})
    assert r.status_code == 201, r.text
    r = await plane.call("POST", DEPLOYMENTS, json=deployment("batch", 2))
    assert r.status_code == 201

    async def lab_placed() -> bool:
        s = await plane.try_status("deployment-default-batch")
        return s is not None and s["phase"] == "Scheduled" and placement(s) == {"lab": 2}

    await eventually(lab_placed, what="batch placed by the broad policy")
    b = (await plane.call("GET", "/api/v1/bindings/deployment-default-web")).json()
    assert b["policyRef"]["name"] == "web-placement"  # name match beats kind-only at equal priority

    # Deleting the workload deletes its binding; deleting the policy deletes the bindings it made.
    r = await plane.call("DELETE", f"{DEPLOYMENTS}/web")
    assert r.status_code == 200

    async def gone(name: str) -> bool:
        return await plane.ctx.registry.try_get(BINDING, name) is None

    await eventually(lambda: gone("deployment-default-web"), what="the web binding to go")
    r = await plane.call("DELETE", "/api/v1/propagationpolicies/all-deployments")
    assert r.status_code == 200
    await eventually(lambda: gone("deployment-default-batch"), what="the batch binding to go")


async def test_cluster_scoped_workload_binding_is_kept_and_removed(plane: Plane) -> None:
    """A ClusterRole has no namespace: its Binding is ``clusterrole--NAME``, found again on every pass and
    deleted with it."""
    await plane.cluster("east", 30, {"tier": "prod"}, region="us-east")
    await plane.seen("east")
    roles = "/apis/rbac.authorization.k8s.io/v1/clusterroles"
    r = await plane.call("POST", roles, json={
        "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole", "metadata": {"name": "reader"},
        "rules": [{"apiGroups": [""], "resources": ["pods"], "verbs": ["get", "list"]}]})
    assert r.status_code == 201, r.text
    r = await plane.call("POST", RPP, json={
        "apiVersion": "multicluster.io/v1alpha1", "kind": "ResourcePlacementPolicy",
        "metadata": {"name": "roles"},
        "spec": {"resourceSelector": {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
                                      "name": "reader"},
                 "targetClusters": [{"selectorType": "name", "values": ["east"]}]}})
    assert r.status_code == 201, r.text

    async def bound() -> bool:
        return await plane.ctx.registry.try_get(BINDING, "clusterrole--reader") is not None

    await eventually(bound, what="the ClusterRole's binding")
    r = await plane.call("DELETE", f"{roles}/reader")
    assert r.status_code == 200, r.text

    async def gone() -> bool:
        return await plane.ctx.registry.try_get(BINDING, "clusterrole--reader") is None

    await eventually(gone, what="the ClusterRole's binding to go with it")
