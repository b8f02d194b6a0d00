"""Server-side dry run (``?dryRun=All``) on every write path: validated and answered, nothing stored or audited."""

from __future__ import annotations

from typing import Any

from drods.model.keys import AUDIT_PREFIX
from tests.api.conftest import Api

GV = "/apis/multicluster.io/v1alpha1"
DEPLOY = "/apis/apps/v1/namespaces/default/deployments"
DRY = {"dryRun": "All"}


def deployment(name: str, replicas: int = 2, image: str = "nginx:1") -> dict[str, Any]:
    return {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": name},
            "spec": {"replicas": replicas, "selector": {"matchLabels": {"app": name}},
                     "template": {"metadata": {"labels": {"app": name}},
                                  "spec": {"containers": [{"name": "c", "image": image}]}}}}


async def snapshot(api: Api) -> dict[str, bytes]:
    """Every stored key but the audit journal (checked on its own)."""
    kvs, _ = await api.app.state.ctx.store.range("/")  # type: ignore[attr-defined]
    return {kv.key: kv.value for kv in kvs if not kv.key.startswith(AUDIT_PREFIX)}


async def audited_paths(api: Api) -> list[str]:
    r = await api.call("GET", "/api/v1/audit")
    return [e["path"] for e in r.json()["items"]]


async def test_kubernetes_paths_validate_and_answer_but_store_nothing(api: Api) -> None:
    assert (await api.call("POST", DEPLOY, json=deployment("live"))).status_code == 201
    before, audit_before = await snapshot(api), await audited_paths(api)

    r = await api.call("POST", DEPLOY, params=DRY, json=deployment("new"))
    assert r.status_code == 201, r.text
    meta = r.json()["metadata"]
    assert meta["namespace"] == "default" and meta["uid"] and meta["creationTimestamp"] and meta["generation"] == 1
    assert "resourceVersion" not in meta
    # Validation and conflicts are the real ones.
    r = await api.call("POST", DEPLOY, params=DRY, json=deployment("Bad_Name"))
    assert r.status_code == 422 and "Bad_Name" in r.text
    r = await api.call("POST", DEPLOY, params=DRY, json=deployment("live"))
    assert r.status_code == 409

    # Update, merge patch, strategic merge, server-side apply and delete: the answer is what would be.
    live = (await api.call("GET", f"{DEPLOY}/live")).json()
    r = await api.call("PUT", f"{DEPLOY}/live", params=DRY, json=deployment("live", replicas=5))
    assert r.status_code == 200 and r.json()["spec"]["replicas"] == 5 and r.json()["metadata"]["generation"] == 2
    assert r.json()["metadata"]["resourceVersion"] == live["metadata"]["resourceVersion"]
    r = await api.call("PATCH", f"{DEPLOY}/live", params=DRY, json={"spec": {"replicas": 7}},
                       headers={"Content-Type": "application/merge-patch+json"})
    assert r.status_code == 200 and r.json()["spec"]["replicas"] == 7
    r = await api.call("PATCH", f"{DEPLOY}/live", params=DRY,
                       json={"spec": {"template": {"spec": {"containers": [{"name": "c", "image": "nginx:2"}]}}}},
                       headers={"Content-Type": "application/strategic-merge-patch+json"})
    assert r.status_code == 200 and r.json()["spec"]["template"]["spec"]["containers"][0]["image"] == "nginx:2"
    r = await api.call("PATCH", f"{DEPLOY}/fresh", params={**DRY, "fieldManager": "t"},
                       content=b"apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: fresh}\nspec: {replicas: 1}\n",
                       headers={"Content-Type": "application/apply-patch+yaml"})
    assert r.status_code == 201 and r.json()["metadata"]["name"] == "fresh"
    r = await api.call("DELETE", f"{DEPLOY}/live", params=DRY)
    assert r.status_code == 200
    r = await api.call("DELETE", f"{DEPLOY}/ghost", params=DRY)
    assert r.status_code == 404

    assert await snapshot(api) == before
    assert await audited_paths(api) == audit_before
    assert (await api.call("GET", f"{DEPLOY}/live")).json()["spec"]["replicas"] == 2


async def test_an_unknown_dry_run_value_is_refused_before_anything_happens(api: Api) -> None:
    r = await api.call("POST", DEPLOY, params={"dryRun": "Some"}, json=deployment("x"))
    assert r.status_code == 400 and "unsupported dryRun value" in r.json()["message"]
    r = await api.call("POST", "/api/v1/clusters", params={"dryRun": "yes"}, json={"name": "c1"})
    assert r.status_code == 400
    assert (await api.call("GET", f"{DEPLOY}/x")).status_code == 404
    assert (await api.call("GET", "/api/v1/clusters/c1")).status_code == 404


async def test_flat_paths_bindings_and_batch_sync_honour_dry_run(api: Api) -> None:
    policy = {"name": "pp", "resourceType": "Deployment", "targetClusters": ["a"]}
    assert (await api.call("POST", "/api/v1/propagationpolicies", json=policy)).status_code == 201
    before, audit_before = await snapshot(api), await audited_paths(api)

    r = await api.call("POST", "/api/v1/clusters", params=DRY, json={"name": "c1", "region": "eu"})
    assert r.status_code == 201 and r.json()["region"] == "eu" and r.json()["uid"]
    r = await api.call("POST", "/api/v1/clusters", params=DRY, json={"name": "c1", "syncMode": "Sideways"})
    assert r.status_code == 422 and r.json()["details"]["fields"][0]["field"] == "syncMode"
    r = await api.call("POST", "/api/v1/propagationpolicies", params=DRY, json=policy)
    assert r.status_code == 409 and r.json()["code"] == "POLICY_CONFLICT"
    r = await api.call("PATCH", "/api/v1/propagationpolicies/pp", params=DRY, json={"targetClusters": ["b"]})
    assert r.status_code == 200 and r.json()["targetClusters"] == ["b"]
    r = await api.call("DELETE", "/api/v1/propagationpolicies/pp", params=DRY)
    assert r.status_code == 200

    r = await api.call("POST", "/api/v1/bindings", params=DRY,
                       json={"name": "b1", "resource": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "w"},
                             "replicas": 3})
    assert r.status_code == 202, r.text

    objs = [{"apiVersion": "multicluster.io/v1alpha1", "kind": "PropagationPolicy", "metadata": {"name": n},
             "spec": {"resourceType": "Deployment"}} for n in ("pp", "p2")]
    r = await api.call("POST", "/api/v1/sync/batch", params=DRY, json={"objects": objs})
    assert r.status_code == 200 and r.json()["dryRun"] is True
    assert [(i["name"], i["created"]) for i in r.json()["items"]] == [("pp", False), ("p2", True)]
    bad = [*objs, {**objs[0], "metadata": {"name": "p3"}, "spec": {"priority": "high"}}]
    r = await api.call("POST", "/api/v1/sync/batch", params=DRY, json={"objects": bad})
    assert r.status_code == 422 and r.json()["details"]["index"] == 2
    r = await api.call("PUT", "/api/v1/sync/configs", params=DRY, json={"configs": {"a": 1}})
    assert r.status_code == 200 and r.json()["dryRun"] is True

    assert await snapshot(api) == before
    assert await audited_paths(api) == audit_before
