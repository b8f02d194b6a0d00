"""The object API as a user drives it: flat façade, Kubernetes paths, CAS, patch, finalizers, watch."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from typing import Any

import pytest

from drods.controllers.overrides import policy_applies
from drods.model.policy import ClusterOverridePolicySpec
from tests.api.conftest import Api

CLUSTER = {"name": "gcp-production", "endpoint": "https://k8s.gcp.example", "capabilities": ["gpu", "tls-encryption"],
           "region": "us-central1", "provider": "gcp", "labels": {"tier": "prod"}}
GV = "/apis/multicluster.io/v1alpha1"


async def test_register_get_list_delete_cluster(api: Api) -> None:
    r = await api.call("POST", "/api/v1/clusters", json=CLUSTER)
    assert r.status_code == 201, r.text
    body = r.json()
    assert body["name"] == "gcp-production" and body["capabilities"] == ["gpu", "tls-encryption"]
    assert body["resourceVersion"].isdigit()

    r = await api.call("GET", "/api/v1/clusters")
    assert [c["name"] for c in r.json()["items"]] == ["gcp-production"]
    r = await api.call("GET", "/api/v1/clusters?labelSelector=tier%3Ddev")
    assert r.json()["items"] == []

    # The same object on the Kubernetes path.
    r = await api.call("GET", f"{GV}/clusters/gcp-production")
    assert r.status_code == 200
    assert r.json()["spec"]["region"] == "us-central1" and r.json()["kind"] == "Cluster"

    r = await api.call("DELETE", "/api/v1/clusters/gcp-production")
    assert r.status_code == 200
    r = await api.call("GET", "/api/v1/clusters/gcp-production")
    assert r.status_code == 404
    assert r.json() == {"code": "CLUSTER_NOT_FOUND", "message": "Cluster 'gcp-production' not found",
                        "details": {"kind": "Cluster", "name": "gcp-production"}}


async def test_one_member_is_one_cluster(api: Api) -> None:
    """The same member (its cluster ID, which `drods cluster join` reads) registered under a second
    name is refused, naming the first, as karmadactl join refuses it; another member, a re-write of the
    same Cluster and a Cluster without an ID are taken."""
    one = {"name": "push1", "endpoint": "https://127.0.0.1:1", "id": "0c1d-kube-system-uid"}
    assert (await api.call("POST", "/api/v1/clusters", json=one)).status_code == 201
    r = await api.call("POST", "/api/v1/clusters", json={**one, "name": "dup1"})
    assert r.status_code == 409 and r.json()["code"] == "CLUSTER_ALREADY_JOINED", r.text
    assert "registered with name 'push1'" in r.json()["message"]
    assert (await api.call("GET", "/api/v1/clusters/dup1")).status_code == 404
    r = await api.call("PATCH", "/api/v1/clusters/push1", json={"labels": {"tier": "a"}},
                       headers={"content-type": "application/merge-patch+json"})
    assert r.status_code == 200, r.text
    for body in ({**one, "name": "other", "id": "another-uid"}, {"name": "no-id", "endpoint": "https://127.0.0.1:2"}):
        assert (await api.call("POST", "/api/v1/clusters", json=body)).status_code == 201


async def test_duplicate_and_invalid_change_nothing(api: Api) -> None:
    assert (await api.call("POST", "/api/v1/clusters", json=CLUSTER)).status_code == 201
    r = await api.call("POST", "/api/v1/clusters", json=CLUSTER | {"region": "elsewhere"})
    assert r.status_code == 409 and r.json()["code"] == "CLUSTER_ALREADY_EXISTS"
    r = await api.call("POST", "/api/v1/clusters", json={"name": "Bad_Name"})
    assert r.status_code == 422 and r.json()["code"] == "VALIDATION_FAILED"
    assert r.json()["details"]["fields"][0]["field"] == "name"
    r = await api.call("POST", "/api/v1/clusters", json={"name": "x", "syncMode": "Sideways"})
    assert r.status_code == 422 and r.json()["details"]["fields"][0]["field"] == "syncMode"
    r = await api.call("GET", "/api/v1/clusters")
    items = r.json()["items"]
    assert len(items) == 1 and items[0]["region"] == "us-central1"


async def test_propagation_policy_merge_patch_and_conflict(api: Api) -> None:
    body = {"name": "cross-region-policy", "resourceType": "Deployment",
            "targetClusters": ["aws-us-east", "azure-europe"]}
    assert (await api.call("POST", "/api/v1/propagationpolicies", json=body)).status_code == 201
    r = await api.call("POST", "/api/v1/propagationpolicies", json=body)
    assert r.status_code == 409
    assert r.json() == {"code": "POLICY_CONFLICT", "message": "Policy name already exists",  # the draft's example
                        "details": {"policyName": "cross-region-policy"}}

    r = await api.call("PATCH", "/api/v1/propagationpolicies/cross-region-policy",
                       headers={"content-type": "application/merge-patch+json"},
                       content=json.dumps({"targetClusters": ["gcp-asia"], "priority": 5}))
    assert r.status_code == 200, r.text
    assert r.json()["targetClusters"] == ["gcp-asia"] and r.json()["priority"] == 5
    assert r.json()["resourceType"] == "Deployment"
    # null removes a field (RFC 7386).
    r = await api.call("PATCH", "/api/v1/propagationpolicies/cross-region-policy",
                       headers={"content-type": "application/merge-patch+json"},
                       content=json.dumps({"priority": None}))
    assert "priority" not in r.json()
    # An invalid patch changes nothing.
    r = await api.call("PATCH", "/api/v1/propagationpolicies/cross-region-policy",
                       headers={"content-type": "application/merge-patch+json"},
                       content=json.dumps({"targetClusters": "not-a-list"}))
    assert r.status_code == 422
    r = await api.call("GET", f"{GV}/propagationpolicies/cross-region-policy")
    assert r.json()["spec"]["targetClusters"] == ["gcp-asia"]


async def test_stale_resource_version_is_409(api: Api) -> None:
    r = await api.call("POST", f"{GV}/clusters", json={"apiVersion": "multicluster.io/v1alpha1", "kind": "Cluster",
                                                        "metadata": {"name": "a"}, "spec": {"region": "eu"}})
    assert r.status_code == 201
    obj = r.json()
    first = dict(obj, spec={"region": "us"})
    r = await api.call("PUT", f"{GV}/clusters/a", json=first)
    assert r.status_code == 200 and r.json()["metadata"]["generation"] == 2
    stale = dict(obj, spec={"region": "asia"})  # still carries the first resourceVersion
    r = await api.call("PUT", f"{GV}/clusters/a", json=stale)
    assert r.status_code == 409 and r.json()["kind"] == "Status" and r.json()["reason"] == "Conflict"
    r = await api.call("GET", f"{GV}/clusters/a")
    assert r.json()["spec"]["region"] == "us"


async def test_yaml_body_and_placement_policies(api: Api) -> None:
    rpp = """
apiVersion: multicluster.io/v1alpha1
kind: ResourcePlacementPolicy
metadata: {name: web-placement}
spec:
  resourceSelector: {apiVersion: apps/v1, kind: Deployment, name: web, namespace: default}
  targetClusters:
  - {selectorType: name, values: [a, b]}
  - {selectorType: label, values: ["tier=prod"]}
  placement:
    replicaScheduling: {replicaSchedulingType: Divided, weightPreference: {dynamicWeight: WaterLevel}}
"""
    r = await api.call("POST", f"{GV}/resourceplacementpolicies", content=rpp,
                       headers={"content-type": "application/yaml"})
    assert r.status_code == 201, r.text
    cop = {"apiVersion": "multicluster.io/v1alpha1", "kind": "ClusterOverridePolicy", "metadata": {"name": "gpu"},
           "spec": {"overrides": [{"clusterSelector": {"names": ["a"]}, "fieldPatches": [
               {"path": "spec.template.spec.containers[0].resources.limits", "value": {"nvidia.com/gpu": 2}}]}]}}
    r = await api.call("POST", f"{GV}/clusteroverridepolicies", json=cop)
    assert r.status_code == 201, r.text
    # The draft's form (one resourceSelector) and Karmada's (resourceSelectors) are both accepted.
    web = {"apiVersion": "apps/v1", "kind": "Deployment", "name": "web", "namespace": "default"}
    for name, form in (("draft", {"resourceSelector": web}), ("karmada", {"resourceSelectors": [web]})):
        r = await api.call("POST", f"{GV}/clusteroverridepolicies",
                           json=dict(cop, metadata={"name": name}, spec={**cop["spec"], **form}))
        assert r.status_code == 201, r.text
        spec = ClusterOverridePolicySpec.model_validate(r.json()["spec"])
        other = {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "api", "namespace": "default"}}
        assert policy_applies(spec, {**other, "metadata": {"name": "web", "namespace": "default"}})
        assert not policy_applies(spec, other)
    r = await api.call("GET", f"{GV}/resourceplacementpolicies")
    assert [o["metadata"]["name"] for o in r.json()["items"]] == ["web-placement"]
    bad = dict(cop, metadata={"name": "bad"}, spec={"overrides": [{"clusterSelector": {"names": ["a"]},
                                                                   "fieldPatches": [{"value": 1}]}]})
    r = await api.call("POST", f"{GV}/clusteroverridepolicies", json=bad)
    assert r.status_code == 422
    assert r.json()["details"]["causes"][0]["field"] == "spec.overrides[0].fieldPatches[0].path"
    r = await api.call("DELETE", f"{GV}/resourceplacementpolicies/web-placement")
    assert r.status_code == 200
    assert (await api.call("GET", f"{GV}/resourceplacementpolicies/web-placement")).status_code == 404


async def test_credentials_encrypted_at_rest_and_redacted(api: Api) -> None:
    secret = "kubeconfig-with-a-very-secret-token"
    r = await api.call("POST", "/api/v1/clusters", json={"name": "c", "credentials": {"kubeconfig": secret}})
    assert r.status_code == 201 and secret not in r.text
    assert r.json()["credentials"] == {"kubeconfig": "***redacted***"}
    ctx = api.app.state.ctx  # type: ignore[attr-defined]
    raw = await ctx.store.get("/registry/multicluster.io/clusters/c")
    assert secret.encode() not in raw.value
    # A merge patch that leaves credentials alone keeps them (redaction is not written back).
    r = await api.call("PATCH", "/api/v1/clusters/c", headers={"content-type": "application/merge-patch+json"},
                       content=json.dumps({"region": "eu"}))
    assert r.status_code == 200
    full = await ctx.registry.get(ctx.registry_kind("Cluster") if hasattr(ctx, "registry_kind") else _cluster(),
                                  "c", reveal=True)
    assert full["spec"]["credentials"]["kubeconfig"] == secret


def _cluster():  # type: ignore[no-untyped-def]
    from drods.model.kinds import CLUSTER

    return CLUSTER


async def test_finalizers_hold_deletion_until_removed(api: Api) -> None:
    obj = {"apiVersion": "multicluster.io/v1alpha1", "kind": "Cluster",
           "metadata": {"name": "f", "finalizers": ["drods.io/cleanup"]}, "spec": {}}
    assert (await api.call("POST", f"{GV}/clusters", json=obj)).status_code == 201
    r = await api.call("DELETE", f"{GV}/clusters/f")
    assert r.status_code == 202 and r.json()["metadata"]["deletionTimestamp"]
    assert (await api.call("GET", f"{GV}/clusters/f")).status_code == 200
    r = await api.call("PATCH", f"{GV}/clusters/f", headers={"content-type": "application/merge-patch+json"},
                       content=json.dumps({"metadata": {"finalizers": None}}))
    assert r.status_code == 200, r.text
    assert (await api.call("GET", f"{GV}/clusters/f")).status_code == 404


async def test_watch_streams_changes_from_resource_version(api: Api) -> None:
    r = await api.call("POST", f"{GV}/clusters", json={"metadata": {"name": "w1"}, "spec": {}})
    rv = int(r.json()["metadata"]["resourceVersion"])
    events: list[dict] = []

    async def follow() -> None:
        async with api.client.stream("GET", f"{GV}/clusters?watch=true&resourceVersion={rv}",
                                     headers=api.auth("viewer")) as resp:
            assert resp.status_code == 200
            async for line in resp.aiter_lines():
                if line:
                    events.append(json.loads(line))
                if len(events) == 3:
                    return

    task = asyncio.create_task(follow())
    await api.call("POST", f"{GV}/clusters", json={"metadata": {"name": "w2"}, "spec": {}})
    await api.call("PATCH", f"{GV}/clusters/w1", headers={"content-type": "application/merge-patch+json"},
                   content=json.dumps({"spec": {"region": "eu"}}))
    await api.call("DELETE", f"{GV}/clusters/w2")
    await asyncio.wait_for(task, 10)
    assert [(e["type"], e["object"]["metadata"]["name"]) for e in events] == [
        ("ADDED", "w2"), ("MODIFIED", "w1"), ("DELETED", "w2")]
    assert events[1]["object"]["spec"]["region"] == "eu"


async def test_sync_batch_all_or_nothing(api: Api) -> None:
    objs = [{"apiVersion": "multicluster.io/v1alpha1", "kind": "PropagationPolicy", "metadata": {"name": f"p{i}"},
             "spec": {"resourceType": "Deployment"}} for i in range(1000)]
    r = await api.call("POST", "/api/v1/sync/batch", json={"objects": objs})
    assert r.status_code == 200, r.text
    assert r.json()["count"] == 1000 and all(i["created"] for i in r.json()["items"])
    r = await api.call("GET", "/api/v1/propagationpolicies")
    assert len(r.json()["items"]) == 1000

    too_many = objs + [dict(objs[0], metadata={"name": "extra"})]
    r = await api.call("POST", "/api/v1/sync/batch", json={"objects": too_many})
    assert r.status_code == 413 and r.json()["code"] == "BATCH_TOO_LARGE"

    changed = [dict(o, spec={"resourceType": "StatefulSet"}) for o in objs[:10]]
    changed[5] = dict(changed[5], spec={"resourceType": "StatefulSet", "priority": "high"})
    r = await api.call("POST", "/api/v1/sync/batch", json={"objects": changed})
    assert r.status_code == 422 and r.json()["details"]["index"] == 5 and r.json()["details"]["name"] == "p5"
    r = await api.call("GET", f"{GV}/propagationpolicies/p0")
    assert r.json()["spec"]["resourceType"] == "Deployment"  # nothing written


async def test_domain_configs_put_and_get(api: Api) -> None:
    r = await api.call("GET", "/api/v1/sync/configs", params={"cluster": "edge-1"}, role="viewer")
    assert r.status_code == 404 and r.json()["code"] == "CONFIG_NOT_FOUND"
    r = await api.call("PUT", "/api/v1/sync/configs", json={"cluster": "edge-1", "configs": {"maxPods": 40}})
    assert r.status_code == 200, r.text
    r = await api.call("PUT", "/api/v1/sync/configs", json={"configs": {"region": "eu"}})
    assert r.status_code == 200
    r = await api.call("GET", "/api/v1/sync/configs", params={"cluster": "edge-1"}, role="operator")
    assert r.status_code == 200 and r.json()["configs"] == {"maxPods": 40}
    assert (await api.call("GET", "/api/v1/sync/configs", role="operator")).json()["configs"] == {"region": "eu"}
    # a viewer sees which settings there are, not their values (they may be credentials)
    r = await api.call("GET", "/api/v1/sync/configs", params={"cluster": "edge-1"}, role="viewer")
    assert r.status_code == 200 and r.json()["configs"] == {"maxPods": "***"} and r.json()["redacted"] is True
    r = await api.call("PUT", "/api/v1/sync/configs", json={"cluster": "../x", "configs": {}})
    assert r.status_code == 422
    assert (await api.call("PUT", "/api/v1/sync/configs", json={"configs": {}}, role="viewer")).status_code == 403


async def test_metrics_report_stored_and_extra_fields_kept(api: Api) -> None:
    await api.call("POST", "/api/v1/clusters", json={"name": "a", "syncMode": "Pull"})
    report = {"cluster": "a", "timestamp": "2099-01-01T00:00:00Z", "cpuCapacity": 64, "cpuUsage": 50.0,
              "memoryCapacity": 256, "memoryAvailable": 64, "pods": 120, "networkIn": 100, "networkOut": 50,
              "largestNodeFree": {"cpu": 4, "memory": 16, "gpu": 0}, "rackTemperature": 31.5}
    r = await api.call("PUT", "/api/v1/metrics", role="agent-a", json=report)
    assert r.status_code == 200, r.text
    assert r.json()["clockSkewClamped"] is True  # a timestamp in the future is clamped and flagged
    assert abs(r.json()["waterLevel"] - 0.75) < 1e-9
    r = await api.call("GET", "/api/v1/clusters/a")
    status = r.json()["status"]["resources"]
    assert status["cpu"] == {"capacity": 64.0, "used": 32.0}
    ctx = api.app.state.ctx  # type: ignore[attr-defined]
    stored = json.loads((await ctx.store.get("/status/clusters/a")).value)
    assert stored["report"]["rackTemperature"] == 31.5

    r = await api.call("PUT", "/api/v1/metrics", role="agent-a", json=report | {"cluster": "b"})
    assert r.status_code == 403 and r.json()["code"] == "FORBIDDEN"
    r = await api.call("PUT", "/api/v1/metrics", json=report | {"cluster": "nope"})
    assert r.status_code == 404 and r.json()["code"] == "CLUSTER_NOT_FOUND"
    r = await api.call("PUT", "/api/v1/metrics", json=report | {"cpuUsage": 140})
    assert r.status_code == 422 and r.json()["details"]["fields"][0]["field"] == "cpuUsage"


async def test_merge_patches_without_resource_version_are_reapplied_after_losing_a_race(api: Api) -> None:
    """As the Kubernetes API server does: concurrent patches that name no resourceVersion all land;
    one that names a stale resourceVersion is a conflict."""
    dep = {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "race", "namespace": "default"},
           "spec": {"replicas": 1, "selector": {"matchLabels": {"app": "race"}},
                    "template": {"metadata": {"labels": {"app": "race"}},
                                 "spec": {"containers": [{"name": "c", "image": "nginx"}]}}}}
    path = "/apis/apps/v1/namespaces/default/deployments"
    assert (await api.call("POST", path, json=dep)).status_code == 201
    merge = {"content-type": "application/merge-patch+json"}
    rs = await asyncio.gather(*(api.call("PATCH", f"{path}/race", headers=merge,
                                         json={"metadata": {"labels": {f"k{i}": "v"}}}) for i in range(6)))
    assert [r.status_code for r in rs] == [200] * 6, [r.text for r in rs if r.status_code != 200]
    labels = (await api.call("GET", f"{path}/race")).json()["metadata"]["labels"]
    assert {f"k{i}" for i in range(6)} <= set(labels)
    r = await api.call("PATCH", f"{path}/race", headers=merge,
                       json={"metadata": {"resourceVersion": "1", "labels": {"late": "v"}}})
    assert r.status_code == 409
    assert "late" not in (await api.call("GET", f"{path}/race")).json()["metadata"]["labels"]
    strategic = {"content-type": "application/strategic-merge-patch+json"}
    rs = await asyncio.gather(*(api.call("PATCH", f"{path}/race", headers=strategic,
                                         json={"metadata": {"annotations": {f"s{i}": "v"}}}) for i in range(6)))
    assert [r.status_code for r in rs] == [200] * 6, [r.text for r in rs if r.status_code != 200]
    assert {f"s{i}" for i in range(6)} <= set((await api.call("GET", f"{path}/race")).json()["metadata"]["annotations"])
    r = await api.call("PATCH", f"{path}/race", headers=strategic,
                       json={"metadata": {"resourceVersion": "1", "labels": {"late": "v"}}})
    assert r.status_code == 409


async def test_a_flat_patch_lands_while_the_status_changes(api: Api) -> None:
    """``drods cluster cordon`` sends a flat merge patch with no revision; heartbeats rewriting the
    cluster's status at the same moment are no reason to refuse it."""
    from drods.model.kinds import CLUSTER
    from drods.store.cas import read_modify_write

    r = await api.call("POST", "/api/v1/clusters", json={"name": "busy", "credentials": {"kubeconfig": "k"}})
    assert r.status_code == 201
    registry = api.app.state.ctx.registry  # type: ignore[attr-defined]

    async def heartbeats() -> None:
        for i in range(30):
            await read_modify_write(lambda _, i=i: registry.update_status(CLUSTER, "busy", {"heartbeat": i}))
            await asyncio.sleep(0.005)

    patches = [api.call("PATCH", "/api/v1/clusters/busy", json={"labels": {f"k{i}": "v"}}) for i in range(8)]
    *rs, _ = await asyncio.gather(*patches, heartbeats())
    assert [r.status_code for r in rs] == [200] * 8, [r.text for r in rs if r.status_code != 200]
    labels = (await api.call("GET", "/api/v1/clusters/busy")).json()["labels"]
    assert {f"k{i}" for i in range(8)} <= set(labels)  # every patch landed, none lost


async def test_a_status_write_carries_the_controllers_spec_change_in_the_same_revision(api: Api) -> None:
    """A cluster's not-ready taint goes with its Ready condition: one revision, one watch event with both
    (where there were two writes, and a watcher saw the cluster Ready a write before it could use it); the
    generation moves as for any spec change, and not for a spec as it was."""
    from drods.model.kinds import CLUSTER

    r = await api.call("POST", "/api/v1/clusters", json={"name": "one", "credentials": {"kubeconfig": "k"}})
    assert r.status_code == 201
    registry = api.app.state.ctx.registry  # type: ignore[attr-defined]
    obj = await registry.get(CLUSTER, "one")
    rv, gen = int(obj["metadata"]["resourceVersion"]), obj["metadata"]["generation"]
    taint = {"key": "cluster.multicluster.io/not-ready", "effect": "NoExecute", "timeAdded": "2026-12-07T00:00:00Z"}
    ready = {"conditions": [{"type": "Ready", "status": "False", "reason": "ClusterNotReachable"}]}
    events = registry.watch(CLUSTER, resource_version=rv)
    written = await registry.update_status(CLUSTER, "one", ready, resource_version=rv,
                                           spec={**obj["spec"], "taints": [taint]})
    kind, seen = await asyncio.wait_for(anext(events), 10)
    assert kind == "MODIFIED" and seen["metadata"]["resourceVersion"] == written["metadata"]["resourceVersion"]
    assert seen["spec"]["taints"] == [taint] and seen["status"] == ready
    assert seen["metadata"]["generation"] == gen + 1
    again = await registry.update_status(CLUSTER, "one", {**ready, "heartbeat": 1}, spec=seen["spec"])
    assert again["metadata"]["generation"] == gen + 1
    await events.aclose()


async def test_a_sync_batch_lands_while_the_status_changes(api: Api) -> None:
    """``POST /api/v1/sync/batch`` names no revision: an upsert racing status writes on the same
    objects (a controller's, between the batch's read and its write) is planned again, not refused."""
    from drods.model.kinds import CLUSTER
    from drods.store.cas import read_modify_write

    for name in ("a", "b"):
        r = await api.call("POST", "/api/v1/clusters", json={"name": name, "credentials": {"kubeconfig": "k"}})
        assert r.status_code == 201
    registry = api.app.state.ctx.registry  # type: ignore[attr-defined]

    async def heartbeats() -> None:
        for i in range(30):
            for name in ("a", "b"):
                await read_modify_write(lambda _, i=i, n=name: registry.update_status(CLUSTER, n, {"heartbeat": i}))
            await asyncio.sleep(0.002)

    def batch(i: int) -> dict[str, Any]:
        return {"objects": [{"apiVersion": "multicluster.io/v1alpha1", "kind": "Cluster",
                             "metadata": {"name": n, "labels": {"round": str(i)}},
                             "spec": {"credentials": {"kubeconfig": "k"}}} for n in ("a", "b")]}

    async def batches() -> list[Any]:  # one client, as a sync tool is: each batch after the last answer
        return [await api.call("POST", "/api/v1/sync/batch", json=batch(i)) for i in range(8)]

    rs, _ = await asyncio.gather(batches(), heartbeats())
    assert [r.status_code for r in rs] == [200] * 8, [r.text for r in rs if r.status_code != 200]
    held, _ = await registry.list(CLUSTER)
    assert all(c["status"].get("heartbeat") is not None for c in held)  # the status writes were kept too


async def test_a_scan_yields_what_a_list_does_decoding_as_it_goes(api: Api) -> None:
    """`ObjectRegistry.scan`: the passes over every Binding (descheduler, evacuation, drain) read
    the objects one at a time instead of holding every decoded document."""
    from drods.model.kinds import CLUSTER

    for name in ("a", "b", "c"):
        r = await api.call("POST", "/api/v1/clusters", json={"name": name, "credentials": {"kubeconfig": "s3cret"}})
        assert r.status_code == 201
    registry = api.app.state.ctx.registry  # type: ignore[attr-defined]
    listed, _ = await registry.list(CLUSTER)
    scanned = await registry.scan(CLUSTER)
    first = next(scanned)
    assert first == listed[0] and first["spec"]["credentials"] == {"kubeconfig": "***redacted***"}
    assert [first, *scanned] == listed
    revealed = [o["spec"]["credentials"]["kubeconfig"] for o in await registry.scan(CLUSTER, reveal=True)]
    assert revealed == ["s3cret"] * 3


async def test_concurrent_server_side_applies_of_a_missing_object_all_land(api: Api) -> None:
    """Two controllers applying the same missing Namespace at once (two Works of one namespace): one
    creates it, the others apply over it, as the Kubernetes API server does; none gets a 409."""
    def ns(i: int) -> dict[str, Any]:
        return {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "raced", "labels": {f"by-{i}": "yes"}}}

    rs = await asyncio.gather(*(api.call("PATCH", f"/api/v1/namespaces/raced?fieldManager=m{i}",
                                         headers={"content-type": "application/apply-patch+yaml"}, json=ns(i))
                                for i in range(6)))
    assert sorted(r.status_code for r in rs) == [200] * 5 + [201], [r.text for r in rs]
    got = (await api.call("GET", "/api/v1/namespaces/raced")).json()
    assert {f"by-{i}" for i in range(6)} <= set(got["metadata"]["labels"])
    assert {e["manager"] for e in got["metadata"]["managedFields"]} >= {f"m{i}" for i in range(6)}


async def test_server_side_apply_removes_what_a_manager_no_longer_applies(api: Api) -> None:
    """As the Kubernetes API server does: a field the manager applied before and leaves out now is
    removed; one another manager applied stays; managedFields says who applied what."""
    path = "/api/v1/namespaces/default/services/web"
    apply_ = {"content-type": "application/apply-patch+yaml"}

    def svc(**spec: Any) -> dict[str, Any]:
        return {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "web", "labels": {"tier": "front"}},
                "spec": {"selector": {"app": "web"}, "ports": [{"port": 80}], **spec}}

    r = await api.call("PATCH", f"{path}?fieldManager=drods", headers=apply_, json=svc(type="LoadBalancer"))
    assert r.status_code == 201, r.text
    other = {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "web", "annotations": {"team": "a"}},
             "spec": {"sessionAffinity": "ClientIP"}}
    assert (await api.call("PATCH", f"{path}?fieldManager=ops", headers=apply_, json=other)).status_code == 200
    plain = svc()
    plain["metadata"]["labels"] = {}
    r = await api.call("PATCH", f"{path}?fieldManager=drods", headers=apply_, json=plain)
    assert r.status_code == 200, r.text
    got = r.json()
    assert "type" not in got["spec"] and "tier" not in (got["metadata"].get("labels") or {})
    assert got["spec"]["sessionAffinity"] == "ClientIP" and got["metadata"]["annotations"] == {"team": "a"}
    managers = {e["manager"]: e["fieldsV1"] for e in got["metadata"]["managedFields"]}
    assert set(managers) == {"drods", "ops"} and "f:type" not in managers["drods"]["f:spec"]
    assert managers["ops"] == {"f:metadata": {"f:annotations": {"f:team": {}}}, "f:spec": {"f:sessionAffinity": {}}}


async def test_server_side_apply_conflicts_with_another_managers_field_unless_forced(api: Api) -> None:
    """As the Kubernetes API server does: a field another manager applied with another value is a 409
    naming the field and the manager; the same value is shared; ``force`` takes the field over."""
    path = "/apis/apps/v1/namespaces/default/deployments/ssa"
    apply_ = {"content-type": "application/apply-patch+yaml"}

    def dep(**spec: Any) -> dict[str, Any]:
        return {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "ssa"}, "spec": spec}

    template = {"metadata": {"labels": {"app": "ssa"}}, "spec": {"containers": [{"name": "c", "image": "x"}]}}
    body = dep(replicas=2, selector={"matchLabels": {"app": "ssa"}}, template=template)
    assert (await api.call("PATCH", f"{path}?fieldManager=alice", headers=apply_, json=body)).status_code == 201
    r = await api.call("PATCH", f"{path}?fieldManager=bob", headers=apply_, json=dep(replicas=5))
    assert r.status_code == 409 and r.json()["reason"] == "Conflict", r.text
    assert 'conflict with "alice": .spec.replicas' in r.json()["message"]
    assert r.json()["details"]["causes"] == [
        {"reason": "FieldManagerConflict", "message": 'conflict with "alice"', "field": ".spec.replicas"}]
    assert (await api.call("GET", path)).json()["spec"]["replicas"] == 2  # nothing changed
    r = await api.call("PATCH", f"{path}?fieldManager=bob", headers=apply_, json=dep(replicas=2))
    assert r.status_code == 200, r.text  # the same value: shared
    r = await api.call("PATCH", f"{path}?fieldManager=carol&force=true", headers=apply_, json=dep(replicas=5))
    assert r.status_code == 200 and r.json()["spec"]["replicas"] == 5, r.text
    owners = {e["manager"]: e["fieldsV1"] for e in r.json()["metadata"]["managedFields"]}
    assert "f:replicas" not in owners["alice"]["f:spec"] and "f:replicas" in owners["carol"]["f:spec"]
    assert "bob" not in owners  # its one field went to carol
    r = await api.call("PATCH", path, headers=apply_, json=dep(replicas=1))  # no fieldManager
    assert r.status_code == 422 and "fieldManager is required" in r.json()["message"], r.text


async def test_a_secrets_string_data_is_stored_as_data_as_kubernetes_does(api: Api) -> None:
    path = "/api/v1/namespaces/default/secrets"
    body = {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "s"},
            "data": {"a": "YQ==", "b": "b2xk"}, "stringData": {"b": "new", "c": "sé"}}
    got = (await api.call("POST", path, json=body)).json()
    assert got["data"] == {"a": "YQ==", "b": "bmV3", "c": "c8Op"} and "stringData" not in got
    assert got["type"] == "Opaque"  # defaulted
    r = await api.call("PATCH", f"{path}/s", json={"stringData": {"a": "z"}},
                       headers={"content-type": "application/merge-patch+json"})
    assert r.status_code == 200 and r.json()["data"]["a"] == "eg==" and "stringData" not in r.json(), r.text
    r = await api.call("POST", path, json={**body, "metadata": {"name": "bad"}, "stringData": {"n": 1}})
    assert r.status_code == 422 and r.json()["details"]["causes"][0]["field"] == "stringData.n", r.text
    assert (await api.call("GET", f"{path}/bad")).status_code == 404


async def test_a_body_past_the_limit_is_a_413_on_every_route_sent_whole_or_streamed(api: Api) -> None:
    limit = api.app.state.ctx.api.maxBodyBytes  # type: ignore[attr-defined]
    big = json.dumps({"name": "big", "labels": {"a": "x" * (limit + 10)}}).encode()

    async def streamed() -> AsyncIterator[bytes]:  # no Content-Length: counted as it arrives
        for i in range(0, len(big), 1 << 20):
            yield big[i:i + (1 << 20)]

    for path in ("/api/v1/clusters", "/api/v1/namespaces/default/configmaps"):
        for content in (big, streamed()):
            r = await api.call("POST", path, content=content, headers={"content-type": "application/json"})
            assert r.status_code == 413 and len(r.content) < 1000, (path, r.text[:300])
            assert "exceeds" in r.json()["message"], r.text
    assert (await api.call("GET", "/api/v1/clusters/big")).status_code == 404


async def test_a_store_that_does_not_answer_is_a_503_to_retry_not_an_internal_error(
        api: Api, monkeypatch: pytest.MonkeyPatch) -> None:
    from drods.store import Unavailable

    store = api.app.state.ctx.store  # type: ignore[attr-defined]

    async def away(*_: object, **__: object) -> None:
        raise Unavailable("etcd unreachable at 127.0.0.1:2379: deadline exceeded")

    monkeypatch.setattr(store, "range", away)
    monkeypatch.setattr(store, "get", away)
    for path in ("/api/v1/clusters", "/api/v1/namespaces/default/configmaps"):
        r = await api.call("GET", path)
        assert r.status_code == 503 and r.headers["retry-after"] == "5", r.text
        body = r.json()
        code = body.get("code") if path.startswith("/api/v1/clusters") else body.get("reason")
        assert code in ("STORE_UNAVAILABLE", "ServiceUnavailable") and "etcd unreachable" in body["message"], body

    async def no_revision() -> int:
        raise Unavailable("etcd unreachable at 127.0.0.1:2379: deadline exceeded")

    monkeypatch.setattr(store, "current_revision", no_revision)
    r = await api.client.get("/readyz")  # a load balancer's probe is told when to look again too
    assert r.status_code == 503 and r.headers.get("retry-after") == "5", (r.text, dict(r.headers))


async def test_a_create_with_generate_name_is_named_from_it(api: Api) -> None:
    path = "/apis/batch/v1/namespaces/default/jobs"
    job = {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"generateName": "backup-"},
           "spec": {"template": {"spec": {"restartPolicy": "Never", "containers": [{"name": "c", "image": "x"}]}}}}
    made = [(await api.call("POST", path, json=job)).json()["metadata"]["name"] for _ in range(2)]
    assert all(n.startswith("backup-") and len(n) == len("backup-") + 5 for n in made) and made[0] != made[1], made
    assert (await api.call("GET", f"{path}/{made[0]}")).status_code == 200
    r = await api.call("POST", path, json={**job, "metadata": {}})
    assert r.status_code == 422 and "metadata.name is required" in r.json()["message"], r.text


async def test_a_built_in_kinds_unknown_or_misshapen_fields_are_refused_as_strict_validation_does(api: Api) -> None:
    """kubectl skips its own validation because the server says it validates fields; a typo such as
    ``spec.replica`` must then be refused by name, on create, update and patch, and nothing written."""
    path = "/apis/apps/v1/namespaces/default/deployments"
    good = {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web"},
            "spec": {"replicas": 2, "selector": {"matchLabels": {"app": "web"}},
                     "template": {"metadata": {"labels": {"app": "web"}},
                                  "spec": {"containers": [{"name": "web", "image": "nginx:1.27",
                                                           "ports": [{"containerPort": 80}],
                                                           "resources": {"requests": {"cpu": 1, "memory": "1Gi"}}}]}}}}
    typo = json.loads(json.dumps(good))
    typo["metadata"]["name"] = "typo"
    typo["spec"]["replica"] = 3
    typo["spec"]["template"]["spec"]["containers"][0]["ports"] = {"containerPort": 80}
    r = await api.call("POST", path, json=typo)
    assert r.status_code == 422, r.text
    causes = [(c["field"], c["message"]) for c in r.json()["details"]["causes"]]
    assert causes == [("spec.template.spec.containers[0].ports", "must be a list, not a mapping"),
                      ("spec.replica", "unknown field")], causes
    assert "spec.replica: unknown field" in r.json()["message"], r.text
    assert (await api.call("GET", f"{path}/typo")).status_code == 404
    r = await api.call("POST", path, json={**good, "spec": {**good["spec"], "replicas": 2}, "extra": 1})
    assert r.status_code == 422 and r.json()["details"]["causes"][0]["field"] == "extra", r.text
    # a well-formed object, then a PUT and a merge patch that each add an unknown field
    assert (await api.call("POST", path, json=good)).status_code == 201
    r = await api.call("PUT", f"{path}/web", json={**good, "spec": {**good["spec"], "paused": True, "replicaz": 4}})
    assert r.status_code == 422 and r.json()["details"]["causes"][0]["field"] == "spec.replicaz", r.text
    r = await api.call("PATCH", f"{path}/web", json={"spec": {"template": {"spec": {"nodeSelektor": {"a": "b"}}}}},
                       headers={"content-type": "application/merge-patch+json"})
    assert r.status_code == 422, r.text
    assert r.json()["details"]["causes"][0]["field"] == "spec.template.spec.nodeSelektor", r.text
    got = (await api.call("GET", f"{path}/web")).json()
    assert "paused" not in got["spec"] and "nodeSelektor" not in got["spec"]["template"]["spec"], got
    # another group's kind is checked by its own schema; a ConfigMap's data values must be strings' shape
    r = await api.call("POST", "/api/v1/namespaces/default/configmaps",
                       json={"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"},
                             "data": {"k": {"x": 1}}})
    assert r.status_code == 422 and r.json()["details"]["causes"][0]["field"] == "data.k", r.text
    # ... and strings: Karmada's override guide writes `data: {example: 1}`, which kube-apiserver refuses
    r = await api.call("POST", "/api/v1/namespaces/default/configmaps",
                       json={"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"},
                             "data": {"example": 1, "ok": "yes"}})
    assert r.status_code == 422, r.text
    assert [(c["field"], c["message"]) for c in r.json()["details"]["causes"]] == [
        ("data.example", "must be a string, not a number")]
    r = await api.call("POST", "/api/v1/namespaces/default/secrets",
                       json={"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "s"}, "stringData": {"n": 2}})
    assert r.status_code == 422 and r.json()["details"]["causes"][0]["field"] == "stringData.n", r.text


@pytest.mark.parametrize("overriders, field", [
    ({"plaintext": [{"operator": "replace", "path": "/kind", "value": "ClusterRoleBinding"}]},
     "spec.overrideRules[0].overriders.plaintext[0].path"),
    ({"plaintext": [{"operator": "replace", "path": "/metadata/namespace", "value": "kube-system"}]},
     "spec.overrideRules[0].overriders.plaintext[0].path"),
    ({"plaintext": [{"operator": "add", "path": "/metadata", "value": {"name": "x"}}]},
     "spec.overrideRules[0].overriders.plaintext[0].path"),
])
async def test_an_override_of_what_the_copy_is_is_refused(api: Api, overriders: dict[str, Any], field: str) -> None:
    """A tenant's OverridePolicy turned its ConfigMap into a cluster-admin ClusterRoleBinding on a member,
    or wrote over another team's Deployment: the copy's apiVersion, kind, name and namespace are not
    an override's to change (the engine refuses the result as well)."""
    body = {"apiVersion": "policy.karmada.io/v1alpha1", "kind": "OverridePolicy",
            "metadata": {"name": "esc", "namespace": "team-a"},
            "spec": {"resourceSelectors": [{"apiVersion": "v1", "kind": "ConfigMap", "name": "esc"}],
                     "overrideRules": [{"targetCluster": {"clusterNames": ["m1"]}, "overriders": overriders}]}}
    r = await api.call("POST", "/apis/policy.karmada.io/v1alpha1/namespaces/team-a/overridepolicies", json=body)
    assert r.status_code == 422, r.text
    cause = r.json()["details"]["causes"][0]
    assert cause["field"] == field and "may not change the object's apiVersion, kind, name or namespace" in \
        cause["message"], cause
    r = await api.call("GET", "/apis/policy.karmada.io/v1alpha1/namespaces/team-a/overridepolicies")
    assert r.json()["items"] == []
    cop = {"apiVersion": "multicluster.io/v1alpha1", "kind": "ClusterOverridePolicy", "metadata": {"name": "rename"},
           "spec": {"overrides": [{"clusterSelector": {"names": ["a"]},
                                   "fieldPatches": [{"path": "metadata[name]", "value": "web"}]}]}}
    r = await api.call("POST", f"{GV}/clusteroverridepolicies", json=cop)
    assert r.status_code == 422 and r.json()["details"]["causes"][0]["field"] == \
        "spec.overrides[0].fieldPatches[0].path", r.text


@pytest.mark.parametrize("path, message", [
    ("/metadata/~6namespace", "has a ~ that is not ~0 (for ~) or ~1 (for /)"),
    ("/metadata/name/", "an empty segment"),
    ("/metadata//namespace", "an empty segment"),
])
async def test_a_malformed_override_pointer_is_refused_when_written(api: Api, path: str, message: str) -> None:
    """Stored, these failed at every sync ("Found invalid escape ~6") and held the copy back."""
    body = {"apiVersion": "policy.karmada.io/v1alpha1", "kind": "OverridePolicy",
            "metadata": {"name": "bad-path", "namespace": "team-a"},
            "spec": {"overrideRules": [{"overriders": {
                "plaintext": [{"operator": "replace", "path": path, "value": "x"}],
                "fieldOverrider": [{"fieldPath": "/data/a~1b", "yaml": [{"subPath": "/x", "operator": "remove"}]}]}}]}}
    r = await api.call("POST", "/apis/policy.karmada.io/v1alpha1/namespaces/team-a/overridepolicies", json=body)
    assert r.status_code == 422, r.text
    cause = r.json()["details"]["causes"][0]
    assert cause["field"] == "spec.overrideRules[0].overriders.plaintext[0].path" and message in cause["message"], \
        cause
    r = await api.call("GET", "/apis/policy.karmada.io/v1alpha1/namespaces/team-a/overridepolicies")
    assert r.json()["items"] == []


async def test_a_refusal_says_which_object_as_kube_apiserver_does(api: Api) -> None:
    """``kubectl -n team-b scale deploy web`` with a team-a token printed "no objects passed to scale":
    a Forbidden Status without the object's name and resource reads to kubectl as no object at all."""
    from drods.api.auth import Role

    ctx = api.app.state.ctx  # type: ignore[attr-defined]
    api.tokens["team-a"] = ctx.tokens.issue(Role.OPERATOR, subject="team-a", namespaces=["team-a"])
    r = await api.call("GET", "/apis/apps/v1/namespaces/team-b/deployments/web/scale", role="team-a")
    assert r.status_code == 403, r.text
    status = r.json()
    assert status["reason"] == "Forbidden" and status["details"] == {"name": "web", "group": "apps",
                                                                     "kind": "deployments"}, status
    assert status["message"].startswith('deployments.apps "web" is forbidden: '), status
    r = await api.call("GET", "/api/v1/namespaces/team-b/configmaps", role="team-a")  # a collection: no name
    assert r.status_code == 403 and r.json()["message"].startswith("configmaps is forbidden: "), r.text


async def test_an_invalid_objects_status_message_names_its_causes(api: Api) -> None:
    """kubectl prints the Status message when it cannot build its own line: "invalid FederatedHPA spec"
    said nothing of why."""
    fhpa = {"apiVersion": "autoscaling.karmada.io/v1alpha1", "kind": "FederatedHPA",
            "metadata": {"name": "web", "namespace": "shop"},
            "spec": {"scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "web"},
                     "minReplicas": 0, "maxReplicas": 10}}
    r = await api.call("POST", "/apis/autoscaling.karmada.io/v1alpha1/namespaces/shop/federatedhpas", json=fhpa)
    assert r.status_code == 422, r.text
    status = r.json()
    assert status["reason"] == "Invalid" and "spec.minReplicas" in status["message"], status
    assert status["message"].count("is invalid") <= 1, status


async def test_fields_kubernetes_keeps_fixed_are_refused_on_update(api: Api) -> None:
    """A StatefulSet's volumeClaimTemplates (or a Deployment's selector) changed here would be refused by
    every member it goes to, its Works failing one by one: refused here first, in kube-apiserver's words,
    while the fields Kubernetes lets change still change."""
    sts = {"apiVersion": "apps/v1", "kind": "StatefulSet", "metadata": {"name": "db", "namespace": "default"},
           "spec": {"replicas": 2, "serviceName": "db", "selector": {"matchLabels": {"app": "db"}},
                    "template": {"metadata": {"labels": {"app": "db"}},
                                 "spec": {"containers": [{"name": "db", "image": "postgres:16"}]}},
                    "volumeClaimTemplates": [{"metadata": {"name": "data"}, "spec": {
                        "accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}}}]}}
    path = "/apis/apps/v1/namespaces/default/statefulsets"
    assert (await api.call("POST", path, json=sts)).status_code == 201
    current = (await api.call("GET", f"{path}/db")).json()
    grown = json.loads(json.dumps(current))
    grown["spec"]["volumeClaimTemplates"][0]["spec"]["resources"]["requests"]["storage"] = "20Gi"
    r = await api.call("PUT", f"{path}/db", json=grown)
    assert r.status_code == 422, r.text
    assert r.json()["message"].startswith('StatefulSet.apps "db" is invalid: spec: Forbidden: updates to statefulset '
                                          "spec for fields other than 'replicas'"), r.json()["message"]
    r = await api.call("PATCH", f"{path}/db", json={"spec": {"serviceName": "other"}},
                       headers={"content-type": "application/merge-patch+json"})
    assert r.status_code == 422, r.text
    # what Kubernetes lets change does, and a default written out is no change
    r = await api.call("PATCH", f"{path}/db", json={"spec": {"replicas": 3, "podManagementPolicy": "OrderedReady",
                                                             "template": {"spec": {"containers": [
                                                                 {"name": "db", "image": "postgres:17"}]}}}},
                       headers={"content-type": "application/merge-patch+json"})
    assert r.status_code == 200, r.text
    stored = (await api.call("GET", f"{path}/db")).json()["spec"]
    assert stored["volumeClaimTemplates"][0]["spec"]["resources"]["requests"]["storage"] == "1Gi"
    assert stored["replicas"] == 3 and stored["serviceName"] == "db"

    deploy = {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web", "namespace": "default"},
              "spec": {"replicas": 1, "selector": {"matchLabels": {"app": "web"}},
                       "template": {"metadata": {"labels": {"app": "web", "tier": "x"}},
                                    "spec": {"containers": [{"name": "c", "image": "nginx"}]}}}}
    deploys = "/apis/apps/v1/namespaces/default/deployments"
    assert (await api.call("POST", deploys, json=deploy)).status_code == 201
    r = await api.call("PATCH", f"{deploys}/web", json={"spec": {"selector": {"matchLabels": {"tier": "x"}}}},
                       headers={"content-type": "application/merge-patch+json"})
    assert r.status_code == 422 and "spec.selector: field is immutable" in r.json()["message"], r.text


async def test_a_service_registration_steers_a_workload_of_its_own_namespace_only(api: Api) -> None:
    """A team-a operator registered a service naming default's workload: its placement feedback then drew
    that workload to a cluster its own policy does not name. The reference is of the registration's
    namespace, as every namespaced reference is; another one is refused and nothing is stored."""
    from drods.api.auth import Role

    ctx = api.app.state.ctx  # type: ignore[attr-defined]
    api.tokens["team-a"] = ctx.tokens.issue(Role.OPERATOR, subject="team-a", namespaces=["team-a"])
    path = "/apis/multicluster.io/v1alpha1/namespaces/team-a/serviceregistrations"

    def registration(name: str, **workload: str) -> dict[str, object]:
        return {"apiVersion": "multicluster.io/v1alpha1", "kind": "ServiceRegistration",
                "metadata": {"name": name, "namespace": "team-a"},
                "spec": {"serviceId": f"{name}.example", "clientSites": ["SIN"],
                         "workload": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "video", **workload}}}

    r = await api.call("POST", path, json=registration("steal", namespace="default"), role="team-a")
    assert r.status_code == 422, r.text
    status = r.json()
    assert status["reason"] == "Invalid" and "its own namespace (team-a), not of default" in status["message"], status
    assert (await api.call("GET", f"{path}/steal", role="team-a")).status_code == 404
    for name, workload in (("own", {"namespace": "team-a"}), ("implied", {})):
        r = await api.call("POST", path, json=registration(name, **workload), role="team-a")
        assert r.status_code == 201, r.text
