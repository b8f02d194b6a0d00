"""kube-apiserver's two core resources that are not stored objects: ``componentstatuses`` (the control
plane's parts, healthy while a process holds each leader lease) and the create-only ``Binding`` that
assigns a Pod to a node (``pods/{name}/binding`` and ``bindings``)."""

from __future__ import annotations

from drods.model.keys import lease_key
from tests.api.conftest import Api

PODS = "/api/v1/namespaces/default/pods"
TABLE = {"Accept": "application/json;as=Table;v=v1;g=meta.k8s.io,application/json"}


def binding(pod: str, node: str) -> dict[str, object]:
    return {"apiVersion": "v1", "kind": "Binding", "metadata": {"name": pod},
            "target": {"apiVersion": "v1", "kind": "Node", "name": node}}


async def test_component_statuses_follow_the_leader_leases(api: Api) -> None:
    store = api.app.state.ctx.store  # type: ignore[attr-defined]
    lease = await store.grant_lease(30)
    await store.put(lease_key("scheduler"), b"sched-1", lease=lease.id)
    r = await api.call("GET", "/api/v1/componentstatuses", role="viewer")
    assert r.status_code == 200, r.text
    got = {i["metadata"]["name"]: i["conditions"][0] for i in r.json()["items"]}
    assert r.json()["kind"] == "ComponentStatusList"
    assert got["store"]["status"] == "True" and got["scheduler"] == {
        "type": "Healthy", "status": "True", "message": "led by sched-1"}
    assert got["member-controllers"]["status"] == "False" and "leader lease" in got["member-controllers"]["error"]
    table = (await api.call("GET", "/api/v1/componentstatuses", headers=TABLE)).json()
    assert [c["name"] for c in table["columnDefinitions"]] == ["Name", "Status", "Message", "Error"]
    rows = {row["cells"][0]: row["cells"][1:] for row in table["rows"]}
    assert rows["scheduler"] == ["Healthy", "led by sched-1", ""]
    assert rows["member-controllers"][0] == "Unhealthy"
    one = await api.call("GET", "/api/v1/componentstatuses/scheduler")
    assert one.status_code == 200 and one.json()["conditions"][0]["status"] == "True"
    missing = await api.call("GET", "/api/v1/componentstatuses/nope")
    assert missing.status_code == 404 and {"code", "message", "details"} <= set(missing.json())
    core = (await api.call("GET", "/api/v1")).json()["resources"]
    names = {res["name"]: res for res in core}
    assert names["componentstatuses"]["shortNames"] == ["cs"] and names["componentstatuses"]["verbs"] == [
        "get", "list"]
    assert names["pods/binding"]["verbs"] == ["create"] and names["pods/binding"]["kind"] == "Binding"
    assert "bindings" not in names  # it would take `kubectl get bindings` from bindings.multicluster.io


async def test_a_pod_is_bound_to_a_node_once(api: Api) -> None:
    for name in ("web-0", "web-1"):
        r = await api.call("POST", PODS, json={"metadata": {"name": name},
                                               "spec": {"containers": [{"name": "c", "image": "nginx"}]}})
        assert r.status_code == 201, r.text
    r = await api.call("POST", f"{PODS}/web-0/binding?dryRun=All", json=binding("web-0", "node-a"))
    assert r.status_code == 201 and not (await api.call("GET", f"{PODS}/web-0")).json()["spec"].get("nodeName")
    r = await api.call("POST", f"{PODS}/web-0/binding", json=binding("web-0", "node-a"))
    assert r.status_code == 201 and r.json()["status"] == "Success", r.text
    assert (await api.call("GET", f"{PODS}/web-0")).json()["spec"]["nodeName"] == "node-a"
    again = await api.call("POST", f"{PODS}/web-0/binding", json=binding("web-0", "node-b"))
    assert again.status_code == 409 and "already assigned to node \"node-a\"" in again.json()["message"]
    r = await api.call("POST", "/api/v1/namespaces/default/bindings", json=binding("web-1", "node-b"))
    assert r.status_code == 201, r.text
    assert (await api.call("GET", f"{PODS}/web-1")).json()["spec"]["nodeName"] == "node-b"
    # bad input: a clear error, nothing changes
    for path, body in ((f"{PODS}/web-1/binding", {"target": {"name": "x"}, "spec": {}}),
                       ("/api/v1/namespaces/default/bindings", {"target": {"name": "x"}}),
                       (f"{PODS}/web-1/binding", binding("web-0", "x")),
                       (f"{PODS}/web-1/binding", {"metadata": {"name": "web-1"},
                                                  "target": {"kind": "Pod", "name": "x"}})):
        r = await api.call("POST", path, json=body)
        assert r.status_code == 400 and {"code", "message", "details"} <= set(r.json()), r.text
    assert (await api.call("GET", f"{PODS}/web-1")).json()["spec"]["nodeName"] == "node-b"
    assert (await api.call("POST", f"{PODS}/nope/binding", json=binding("nope", "x"))).status_code == 404
    denied = await api.call("POST", f"{PODS}/web-1/binding", role="viewer", json=binding("web-1", "x"))
    assert denied.status_code == 403
