"""Every write route, called with ``?dryRun=All``, changes nothing and records no change: it either
simulates (2xx, what it would do) or refuses (400 DRY_RUN_UNSUPPORTED). Generated from the routes the
app serves: a new write route without a case here fails the test."""

from __future__ import annotations

import json
from typing import Any

from drods.api.access import DryRun, rule_for
from drods.model.keys import LEASES_PREFIX
from drods.model.kinds import BINDING, by_kind
from tests.api.conftest import Api
from tests.api.served_routes import MUTATING, served_routes

DRY = {"dryRun": "All"}
HOOK = {"command": {"image": "busybox", "command": ["sh", "-c", "true"]}}
MC = "/apis/multicluster.io/v1alpha1"
DEPLOY = "/apis/apps/v1/namespaces/default/deployments"
CM = "/api/v1/namespaces/default/configmaps"
PV = "/api/v1/persistentvolumes"
MERGE = {"Content-Type": "application/merge-patch+json"}
# Keys that change by themselves as time passes, not by a request: leader and liveness leases.
CHANGE_BY_THEMSELVES = (LEASES_PREFIX,)


def _deployment(name: str, replicas: int = 2) -> dict[str, Any]:
    return {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": name, "namespace": "default"},
            "spec": {"replicas": replicas, "selector": {"matchLabels": {"app": name}},
                     "template": {"metadata": {"labels": {"app": name}},
                                  "spec": {"containers": [{"name": "c", "image": "nginx"}]}}}}


_BINDING = {"name": "b2", "resource": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "w"}, "replicas": 3}
_EVENT = {"cluster": "a", "type": "NodeNotReady", "severity": "warning", "message": "n1"}
_METRICS = {"cluster": "a", "timestamp": "2026-01-01T00:00:00Z"}
def _volume(name: str) -> dict[str, object]:
    return {"apiVersion": "v1", "kind": "PersistentVolume", "metadata": {"name": name},
            "spec": {"capacity": {"storage": "1Gi"}, "accessModes": ["ReadWriteOnce"], "hostPath": {"path": "/d"}}}


_WORKLOAD = {"apiVersion": "apps/v1", "kind": "Deployment", "name": "live", "namespace": "default"}
_POD_BINDING = {"apiVersion": "v1", "kind": "Binding", "metadata": {"name": "idle"},
                "target": {"apiVersion": "v1", "kind": "Node", "name": "node-1"}}

# (method, route) → (path, json body or None, headers); writes the table says it honours must answer 2xx.
CASES: dict[tuple[str, str], tuple[str, Any, dict[str, str]]] = {
    ("POST", "/api/v1/clusters"): ("/api/v1/clusters", {"name": "c2"}, {}),
    ("PATCH", "/api/v1/clusters/{name}"): ("/api/v1/clusters/a", {"region": "eu"}, {}),
    ("DELETE", "/api/v1/clusters/{name}"): ("/api/v1/clusters/a", None, {}),
    ("POST", "/api/v1/clusters/{name}/drain"): ("/api/v1/clusters/a/drain", {"reason": "upgrade"}, {}),
    ("POST", "/api/v1/propagationpolicies"): ("/api/v1/propagationpolicies",
                                              {"name": "p2", "resourceType": "Deployment"}, {}),
    ("PATCH", "/api/v1/propagationpolicies/{name}"): ("/api/v1/propagationpolicies/pp",
                                                      {"targetClusters": ["b"]}, {}),
    ("DELETE", "/api/v1/propagationpolicies/{name}"): ("/api/v1/propagationpolicies/pp", None, {}),
    ("POST", "/api/v1/metrics/events"): ("/api/v1/metrics/events", _EVENT, {}),
    ("PUT", "/api/v1/metrics"): ("/api/v1/metrics", _METRICS, {}),
    ("PUT", "/api/v1/monitor/subscriptions/{name}"): ("/api/v1/monitor/subscriptions/s1",
                                                      {"maxAgeSeconds": 5}, {}),
    ("PUT", "/api/v1/monitor/subscriptions"): ("/api/v1/monitor/subscriptions", {"name": "s1"}, {}),
    ("DELETE", "/api/v1/monitor/subscriptions/{name}"): ("/api/v1/monitor/subscriptions/s1", None, {}),
    ("PUT", "/api/v1/sync/configs"): ("/api/v1/sync/configs", {"configs": {"a": 1}}, {}),
    ("POST", "/api/v1/sync/batch"): ("/api/v1/sync/batch", {"objects": [
        {"apiVersion": "multicluster.io/v1alpha1", "kind": "PropagationPolicy", "metadata": {"name": "p3"},
         "spec": {"resourceType": "Deployment"}}]}, {}),
    ("POST", "/api/v1/bindings"): ("/api/v1/bindings", _BINDING, {}),
    ("PATCH", "/api/v1/bindings/{binding_id}"): ("/api/v1/bindings/web", {"replicas": 5}, {}),
    ("DELETE", "/api/v1/bindings/{binding_id}"): ("/api/v1/bindings/web", None, {}),
    ("PUT", "/api/v1/agent/works/{name}/status"): ("/api/v1/agent/works/w1/status?cluster=a", {"applied": True}, {}),
    ("POST", "/api/v1/agent/autonomy"): ("/api/v1/agent/autonomy?cluster=a", {"decisions": []}, {}),
    ("POST", "/api/v1/whatif"): ("/api/v1/whatif", {"binding": {"resource": _WORKLOAD, "replicas": 2}}, {}),
    # questions, not writes: who am I, may I
    ("POST", "/apis/authentication.k8s.io/v1/selfsubjectreviews"): (
        "/apis/authentication.k8s.io/v1/selfsubjectreviews", {"apiVersion": "authentication.k8s.io/v1"}, {}),
    ("POST", "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews"): (
        "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews",
        {"spec": {"resourceAttributes": {"verb": "create", "group": "apps", "resource": "deployments"}}}, {}),
    ("POST", "/apis/authorization.k8s.io/v1/selfsubjectrulesreviews"): (
        "/apis/authorization.k8s.io/v1/selfsubjectrulesreviews", {"spec": {"namespace": "default"}}, {}),
    ("PUT", "/api/v1/feedback"): ("/api/v1/feedback", {"workload": _WORKLOAD, "metrics": {"errorRate": 0.1},
                                                       "timestamp": "2026-01-01T00:00:00Z"}, {}),
    ("PUT", "/api/v1/network/status"): ("/api/v1/network/status", {"measurements": []}, {}),
    ("PUT", "/api/v1/traffic"): ("/api/v1/traffic", {"edges": []}, {}),
    ("PUT", "/api/v1/datasets/access"): ("/api/v1/datasets/access", {"reads": []}, {}),
    # the Kubernetes paths
    ("POST", "/apis/{group}/{version}/{plural}"): (f"{MC}/clusters", {
        "apiVersion": "multicluster.io/v1alpha1", "kind": "Cluster", "metadata": {"name": "c3"}, "spec": {}}, {}),
    ("PUT", "/apis/{group}/{version}/{plural}/{name}"): (f"{MC}/clusters/a", "live", {}),
    ("PATCH", "/apis/{group}/{version}/{plural}/{name}"): (f"{MC}/clusters/a", {"metadata": {"labels": {"x": "y"}}},
                                                           MERGE),
    ("DELETE", "/apis/{group}/{version}/{plural}/{name}"): (f"{MC}/clusters/a", None, {}),
    ("PUT", "/apis/{group}/{version}/{plural}/{name}/{sub}"): (f"{MC}/clusters/a/status", "live", {}),
    ("PATCH", "/apis/{group}/{version}/{plural}/{name}/{sub}"): (f"{MC}/clusters/a/status",
                                                                 {"status": {"conditions": []}}, MERGE),
    # six segments: also a namespaced collection, /apis/{group}/{version}/namespaces/{ns}/{plural}
    ("POST", "/apis/{group}/{version}/{plural}/{name}/{sub}"): (DEPLOY, _deployment("new"), {}),
    ("PUT", "/apis/{group}/{version}/namespaces/{ns}/{plural}/{name}"): (f"{DEPLOY}/live", "live", {}),
    ("PATCH", "/apis/{group}/{version}/namespaces/{ns}/{plural}/{name}"): (f"{DEPLOY}/live",
                                                                           {"spec": {"replicas": 7}}, MERGE),
    ("DELETE", "/apis/{group}/{version}/namespaces/{ns}/{plural}/{name}"): (f"{DEPLOY}/live", None, {}),
    ("PUT", "/apis/{group}/{version}/namespaces/{ns}/{plural}/{name}/{sub}"): (f"{DEPLOY}/live/status", "live", {}),
    ("PATCH", "/apis/{group}/{version}/namespaces/{ns}/{plural}/{name}/{sub}"): (
        f"{DEPLOY}/live/status", {"status": {"replicas": 1}}, MERGE),
    ("POST", "/api/v1/namespaces"): ("/api/v1/namespaces", {"metadata": {"name": "ns2"}}, {}),
    ("PUT", "/api/v1/namespaces/{name}"): ("/api/v1/namespaces/team", "live", {}),
    ("PATCH", "/api/v1/namespaces/{name}"): ("/api/v1/namespaces/team", {"metadata": {"labels": {"x": "y"}}},
                                             MERGE),
    ("DELETE", "/api/v1/namespaces/{name}"): ("/api/v1/namespaces/team", None, {}),
    ("PUT", "/api/v1/namespaces/{name}/{sub}"): ("/api/v1/namespaces/team/status", "live", {}),
    ("PATCH", "/api/v1/namespaces/{name}/{sub}"): ("/api/v1/namespaces/team/status",
                                                   {"status": {"phase": "Active"}}, MERGE),
    ("POST", "/api/v1/namespaces/{ns}/{plural}"): (CM, {"metadata": {"name": "cm2"}, "data": {"k": "v"}}, {}),
    ("POST", "/api/v1/namespaces/{ns}/bindings"): ("/api/v1/namespaces/default/bindings", _POD_BINDING, {}),
    ("POST", "/api/v1/namespaces/{ns}/pods/{name}/binding"): ("/api/v1/namespaces/default/pods/idle/binding",
                                                               _POD_BINDING, {}),
    ("PUT", "/api/v1/namespaces/{ns}/{plural}/{name}"): (f"{CM}/cm", "live", {}),
    ("PATCH", "/api/v1/namespaces/{ns}/{plural}/{name}"): (f"{CM}/cm", {"data": {"k": "w"}}, MERGE),
    ("DELETE", "/api/v1/namespaces/{ns}/{plural}/{name}"): (f"{CM}/cm", None, {}),
    ("PUT", "/api/v1/namespaces/{ns}/{plural}/{name}/{sub}"): (f"{CM}/cm/status", "live", {}),
    ("PATCH", "/api/v1/namespaces/{ns}/{plural}/{name}/{sub}"): (f"{CM}/cm/status", {"data": {"k": "w"}}, MERGE),
    # cluster-scoped core kinds
    ("POST", "/api/v1/{plural}"): (PV, _volume("pv2"), {}),
    ("PUT", "/api/v1/{plural}/{name}"): (f"{PV}/pv", "live", {}),
    ("PATCH", "/api/v1/{plural}/{name}"): (f"{PV}/pv", {"spec": {"capacity": {"storage": "2Gi"}}}, MERGE),
    ("DELETE", "/api/v1/{plural}/{name}"): (f"{PV}/pv", None, {}),
    ("PUT", "/api/v1/{plural}/{name}/{sub}"): (f"{PV}/pv/status", "live", {}),
    ("PATCH", "/api/v1/{plural}/{name}/{sub}"): (f"{PV}/pv/status", {"status": {"phase": "Bound"}}, MERGE),
}


async def _seed(api: Api) -> None:
    """A fleet for the writes to act on: cluster a with a Deployment's binding and a StatefulSet's
    (with a migration hook) placed there, a policy, a namespace, a Deployment and a ConfigMap."""
    assert (await api.call("POST", "/api/v1/clusters", json={"name": "a"})).status_code == 201
    assert (await api.call("POST", "/api/v1/propagationpolicies",
                           json={"name": "pp", "resourceType": "Deployment"})).status_code == 201
    assert (await api.call("POST", DEPLOY, json=_deployment("live"))).status_code == 201
    assert (await api.call("POST", "/api/v1/namespaces", json={"metadata": {"name": "team"}})).status_code == 201
    assert (await api.call("POST", CM, json={"metadata": {"name": "cm"}, "data": {"k": "v"}})).status_code == 201
    assert (await api.call("POST", PV, json=_volume("pv"))).status_code == 201
    assert (await api.call("POST", "/api/v1/namespaces/default/pods", json={
        "metadata": {"name": "idle"}, "spec": {"containers": [{"name": "c", "image": "nginx"}]}})).status_code == 201
    registry = api.app.state.ctx.registry  # type: ignore[attr-defined]
    sts = by_kind("apps/v1", "StatefulSet")
    assert sts is not None
    await registry.create(sts, {"metadata": {"name": "db", "namespace": "default",
                                             "annotations": {"multicluster.io/migration-hook": json.dumps(HOOK)}},
                                "spec": {"replicas": 2, "serviceName": "db", "selector": {"matchLabels": {"app": "db"}},
                                         "template": {"metadata": {"labels": {"app": "db"}},
                                                      "spec": {"containers": [{"name": "db", "image": "pg"}]}}}})
    for name, kind in (("web", "Deployment"), ("db", "StatefulSet")):
        ref = {"apiVersion": "apps/v1", "kind": kind, "name": name, "namespace": "default"}
        await registry.create(BINDING, {"metadata": {"name": name}, "spec": {"resource": ref, "replicas": 2}})
        await registry.update_status(BINDING, name, {"placement": [{"cluster": "a", "replicas": 2}]})


async def _snapshot(api: Api) -> dict[str, bytes]:
    kvs, _ = await api.app.state.ctx.store.range("/")  # type: ignore[attr-defined]
    return {kv.key: kv.value for kv in kvs if not kv.key.startswith(CHANGE_BY_THEMSELVES)}


async def test_every_write_route_simulates_or_refuses_a_dry_run(api: Api) -> None:
    writes = {r for r in served_routes(api.app) if r[0] in MUTATING}
    assert writes == set(CASES), f"write routes without a dry-run case: {sorted(writes - set(CASES))}"
    await _seed(api)
    before = await _snapshot(api)

    for (method, route), (path, body, headers) in CASES.items():
        if body == "live":  # a replace: the object as it is now
            body = (await api.call("GET", path.removesuffix("/status"))).json()
        r = await api.call(method, path, params=DRY, json=body, headers=headers)
        rule = rule_for(method, route)
        assert rule is not None
        if rule.dry_run is DryRun.REFUSED:
            assert r.status_code == 400, (method, route, r.text)
            assert r.json()["code"] == "DRY_RUN_UNSUPPORTED", (method, route, r.text)
        else:
            assert r.status_code < 300, (method, route, r.status_code, r.text)

    after = await _snapshot(api)
    changed = sorted(k for k in before.keys() | after.keys() if before.get(k) != after.get(k))
    assert not changed, f"a dry run changed {changed}"  # no object, no audit record, nothing


async def test_a_dry_run_drain_answers_the_plan_of_moves(api: Api) -> None:
    await _seed(api)
    before = await _snapshot(api)
    r = await api.call("POST", "/api/v1/clusters/a/drain", params=DRY, json={"reason": "upgrade"})
    assert r.status_code == 200, r.text
    plan = r.json()
    assert plan["dryRun"] is True and plan["cordoned"] is False
    assert plan["rescheduled"] == ["web"] and plan["migrationPlans"] == ["default/db"] and plan["replicas"] == 4
    r = await api.call("POST", "/api/v1/clusters/nowhere/drain", params=DRY, json={})
    assert r.status_code == 404 and set(r.json()) == {"code", "message", "details"}
    assert await _snapshot(api) == before
    r = await api.call("POST", "/api/v1/clusters/a/drain", role="viewer", params=DRY, json={})
    assert r.status_code == 403
    after = await _snapshot(api)  # a refused dry run is someone trying: its refusal audited, nothing else
    assert [k.split("/")[1] for k in set(after) - set(before)] == ["audit"] and \
        {k: v for k, v in after.items() if k in before} == before

    # the same request without dryRun does what the plan said
    r = await api.call("POST", "/api/v1/clusters/a/drain", json={"reason": "upgrade"})
    assert r.status_code == 200 and r.json()["rescheduled"] == ["web"]
    assert [p.split("/")[1].startswith("db-from-a-") for p in r.json()["migrationPlans"]] == [True]


async def test_a_refused_dry_run_is_refused_after_authentication(api: Api) -> None:
    r = await api.client.put("/api/v1/traffic", params=DRY, json={"edges": []})
    assert r.status_code == 401
    r = await api.call("PUT", "/api/v1/traffic", role="viewer", params=DRY, json={"edges": []})
    assert r.status_code == 403 and r.json()["code"] == "FORBIDDEN"
