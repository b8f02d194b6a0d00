"""The placement inputs added for issue 14's second part, through the API of one real control plane:
a Karmada policy with ``overflowAffinities`` (F6), a policy's ``datasets`` on a StatefulSet kept
whole (F3, F4), access reports making a Dataset hot and the cache planner's CachePlan (F4), and a
measured network pair (C2 status) deciding a latency need (F1)."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest

from drods.assembly import Component
from drods.controllers.cache_copy import copy_run
from drods.controllers.cache_planner import CachePlannerSettings
from drods.model.kinds import BINDING
from drods.store import Store
from drods.store.cas import read_modify_write
from tests.scheduler_e2e.conftest import Plane, eventually, placement, serve

KPP = "/apis/policy.karmada.io/v1alpha1/namespaces/default/propagationpolicies"
DATASETS = "/apis/multicluster.io/v1alpha1/namespaces/default/datasets"
PLANS = "/apis/multicluster.io/v1alpha1/namespaces/default/cacheplans"


def workload(kind: str, name: str, replicas: int) -> dict[str, Any]:
    box = {"name": "app", "image": "nginx", "resources": {"requests": {"cpu": "1", "memory": "256Mi"}}}
    return {"apiVersion": "apps/v1", "kind": kind, "metadata": {"name": name, "namespace": "default"},
            "spec": {"replicas": replicas, "selector": {"matchLabels": {"app": name}},
                     "template": {"metadata": {"labels": {"app": name}}, "spec": {"containers": [box]}}}}


@pytest.fixture
async def plane(store_factory: Callable[[], Store], tmp_path: Path) -> AsyncIterator[Plane]:
    store = store_factory()
    await store.delete_prefix("/")
    async with serve(store, tmp_path / "data", components=frozenset({Component.CACHE_PLANNER}),
                     datasets=CachePlannerSettings(hotGiBPerHour=50, intervalSeconds=0.2)) as p:
        yield p


@pytest.mark.parametrize("store_factory", ["sqlite"], indirect=True)
async def test_overflow_stateful_datasets_cache_plans_and_measured_latency(plane: Plane) -> None:
    # 64 cores at 80 %: three 1-core replicas fit on idc under the 85 % limit
    await plane.cluster("idc", 80, {"site": "idc"})
    await plane.cluster("cloud", 10)
    await plane.cluster("spare", 5)
    await plane.seen("idc", "cloud", "spare")

    # F6: the primary group first up to its limit, then the overflow; spare (emptiest) is in no group
    r = await plane.call("POST", KPP, json={
        "apiVersion": "policy.karmada.io/v1alpha1", "kind": "PropagationPolicy", "metadata": {"name": "burst"},
        "spec": {"resourceSelectors": [{"apiVersion": "apps/v1", "kind": "Deployment", "name": "burst"}],
                 "placement": {"clusterAffinities": [{"affinityName": "on-prem",
                                                      "labelSelector": {"matchLabels": {"site": "idc"}},
                                                      "overflowAffinities": [{"affinityName": "public-cloud",
                                                                              "clusterNames": ["cloud"]}]}],
                               "replicaScheduling": {"replicaSchedulingType": "Divided",
                                                     "replicaDivisionPreference": "Weighted",
                                                     "weightPreference": {"dynamicWeight": "AvailableReplicas"}}}}})
    assert r.status_code == 201, r.text
    r = await plane.call("POST", "/apis/apps/v1/namespaces/default/deployments", json=workload("Deployment",
                                                                                               "burst", 6))
    assert r.status_code == 201, r.text
    st = await plane.decided("deployment-default-burst")
    assert placement(st) == {"idc": 3, "cloud": 3}
    # the term the placement came from, where a Karmada team reads it
    rb = (await plane.call("GET", "/apis/multicluster.io/v1alpha1/bindings/deployment-default-burst")).json()
    assert rb["status"]["schedulerObservingAffinityName"] == "on-prem", rb["status"]
    r = await plane.call("PATCH", "/apis/apps/v1/namespaces/default/deployments/burst",
                         json={"spec": {"replicas": 4}}, headers={"content-type": "application/merge-patch+json"})
    assert r.status_code == 200, r.text

    async def shrunk() -> dict[str, Any] | None:
        s = await plane.status("deployment-default-burst")
        return s if s["requested"] == 4 and s["scheduledGeneration"] == s["generation"] else None

    assert placement(await eventually(shrunk, what="the scale-down")) == {"idc": 3, "cloud": 1}
    bad = await plane.call("POST", KPP, json={
        "apiVersion": "policy.karmada.io/v1alpha1", "kind": "PropagationPolicy", "metadata": {"name": "bad"},
        "spec": {"resourceSelectors": [{"kind": "Deployment"}], "placement": {"clusterAffinities": [
            {"affinityName": "a", "clusterNames": ["idc"], "overflowAffinities": [{"affinityName": "b"}]}]}}})
    assert bad.status_code == 422 and "overflowAffinities" in bad.text

    # F3 + F4: the policy's datasets reach the Binding; the StatefulSet stays whole, beside its data
    r = await plane.call("POST", DATASETS, json={
        "apiVersion": "multicluster.io/v1alpha1", "kind": "Dataset", "metadata": {"name": "logs"},
        "spec": {"sizeGiB": 500, "locations": [{"cluster": "cloud", "kind": "Primary"}]}})
    assert r.status_code == 201, r.text
    r = await plane.call("POST", "/api/v1/propagationpolicies", json={
        "name": "stateful", "resourceType": "StatefulSet", "datasets": [{"name": "logs", "readGiBPerHour": 80}]})
    assert r.status_code == 201, r.text
    r = await plane.call("POST", "/apis/apps/v1/namespaces/default/statefulsets",
                         json=workload("StatefulSet", "db", 3))
    assert r.status_code == 201, r.text
    st = await plane.decided("statefulset-default-db")
    assert placement(st) == {"cloud": 3}
    b = (await plane.call("GET", "/api/v1/bindings/statefulset-default-db")).json()
    assert b["datasets"] == [{"name": "logs", "readGiBPerHour": 80.0}]

    # F4: reads from spare make logs hot there → a CachePlan; approved → a Cache copy on spare
    bad = await plane.call("PUT", "/api/v1/datasets/access", json={"reads": [
        {"dataset": {"name": "logs"}, "cluster": "spare", "readGiBPerHour": -1}]})
    assert bad.status_code == 422 and "readGiBPerHour" in bad.text
    unknown = await plane.call("PUT", "/api/v1/datasets/access", json={"reads": [
        {"dataset": {"name": "logs"}, "cluster": "spare", "readGiBPerHour": 1},
        {"dataset": {"name": "nope"}, "cluster": "mars", "readGiBPerHour": 3}]})
    assert unknown.status_code == 422, unknown.text
    assert [(f["field"], f["message"]) for f in unknown.json()["details"]["fields"]] == [
        ("reads[1].dataset", "no Dataset default/nope"), ("reads[1].cluster", "no cluster 'mars' is registered")]
    hot = (await plane.call("GET", "/api/v1/datasets/access", role="viewer")).json()
    assert hot["datasets"] == {}  # nothing of the refused report was recorded
    r = await plane.call("PUT", "/api/v1/datasets/access", json={"reads": [
        {"dataset": {"name": "logs"}, "cluster": "spare", "readGiBPerHour": 400}]})
    assert r.status_code == 200 and r.json() == {"accepted": 1, "entries": 1}, r.text
    hot = (await plane.call("GET", "/api/v1/datasets/access", role="viewer")).json()
    assert hot["datasets"]["default/logs"]["byCluster"]["spare"] == pytest.approx(400, rel=1e-3)

    async def proposed() -> dict[str, Any] | None:
        r = await plane.call("GET", f"{PLANS}/logs-spare")
        return r.json() if r.status_code == 200 and (r.json().get("status") or {}).get("phase") else None

    plan = await eventually(proposed, what="a cache plan for logs on spare")
    assert plan["spec"]["sourceCluster"] == "cloud" and "400.0 GiB/h of logs read on spare" in plan["spec"]["reason"]
    r = await plane.call("PATCH", f"{PLANS}/logs-spare", json={"spec": {"approved": True}},
                         headers={"content-type": "application/merge-patch+json"})
    assert r.status_code == 200, r.text
    snap = plane.scheduler.cache.snap

    async def copying() -> dict[str, Any] | None:
        got = (await plane.call("GET", f"{PLANS}/logs-spare")).json()
        return got if (got.get("status") or {}).get("phase") == "Copying" else None

    plan = await eventually(copying, what="the copy Job started")
    assert set(snap.datasets.get("default/logs", ())) == {"cloud"}  # no location before the copy verifies
    # these clusters are status reports, not members: the copy Job's completion is written as a member's would be
    _, copy_binding = copy_run(plan)

    async def started() -> bool:  # Copying is recorded before the copy's claim, Job and Binding are made
        return await plane.ctx.registry.try_get(BINDING, copy_binding) is not None

    await eventually(started, what="the copy Job's Binding")
    report = {"bytes": 2**30, "seconds": 8.0, "bytesPerSecond": 2**27, "checksum": "c1", "sourceChecksum": "c1"}
    # as a member's report would be: retried when the scheduler's own status write comes first
    await read_modify_write(lambda _: plane.ctx.registry.update_status(BINDING, copy_binding, {"clusters": [
        {"cluster": "spare", "complete": True, "report": report}]}))

    async def cached() -> bool:
        return set(snap.datasets.get("default/logs", ())) == {"cloud", "spare"}

    await eventually(cached, within_s=40.0, what="the Cache copy to reach the scheduler")

    async def ready() -> bool:  # the planner marks the plan Ready, then adds the location
        return bool((await plane.call("GET", f"{PLANS}/logs-spare")).json()["status"]["phase"] == "Ready")

    await eventually(ready, what="the plan marked Ready")

    # F1 / C2: a measured FRA → spare delay lets a latency need be met on spare only
    r = await plane.call("PUT", "/api/v1/network/status", json={"measurements": [
        {"from": "FRA", "to": "spare", "delayMs": 4.0, "bandwidthMbps": 10000}]})
    assert r.status_code == 200, r.text

    async def measured() -> bool:
        arr = snap.latency_array("FRA")
        return arr is not None and arr[snap.index["spare"]] == 4.0

    await eventually(measured, what="the scheduler to see the measured pair")
    st = await plane.place({"name": "edge", "replicas": 2, "resources": {"cpu": 0.5, "memory": 1},
                            "network": {"identifier": "FRA", "maxLatencyMs": 20}})
    assert placement(st) == {"spare": 2}
