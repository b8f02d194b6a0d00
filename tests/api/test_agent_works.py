"""M2 / SEC1: the ``Work`` kind and the pull-mode agent's routes — a cluster-agent token sees and
reports only its own cluster's Works, and nothing else; its writes are audited."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest

from drods.model.meta import check_name
from drods.model.work import WorkStatus, label_value, work_labels, work_name
from tests.api.conftest import Api

WORKS = "/apis/multicluster.io/v1alpha1/works"


def work(binding: str, cluster: str, replicas: int = 1) -> dict[str, Any]:
    manifest = {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web", "namespace": "default"},
                "spec": {"replicas": replicas}}
    return {"apiVersion": "multicluster.io/v1alpha1", "kind": "Work",
            "metadata": {"name": work_name(binding, cluster), "labels": work_labels(binding, cluster)},
            "spec": {"cluster": cluster, "binding": binding, "manifests": [manifest], "hash": f"h{replicas}"}}


def status(h: str) -> dict[str, Any]:
    return {"observedHash": h, "applied": True, "message": "",
            "manifests": [{"apiVersion": "apps/v1", "kind": "Deployment", "namespace": "default", "name": "web",
                           "status": {"readyReplicas": 1}, "generation": 1, "manifestHash": "m"}]}


def test_work_names_are_deterministic_valid_and_distinct() -> None:
    assert work_name("deployment-default-web", "edge-1") == work_name("deployment-default-web", "edge-1")
    assert work_name("deployment-default-web", "edge-1").startswith("deployment-default-web.edge-1-")
    assert work_name("a.b", "c") != work_name("a", "b.c")  # dots in both names cannot collide
    long = work_name("b" * 253, "c" * 200)
    assert len(long) <= 253 and check_name(long) == long
    assert len(label_value("x" * 100)) <= 63 and label_value("short") == "short"


def test_work_status_is_strict() -> None:
    assert WorkStatus.model_validate(status("h1")).applied is True
    with pytest.raises(ValueError):
        WorkStatus.model_validate({"observedHash": "h", "applied": "yes"})
    with pytest.raises(ValueError):
        WorkStatus.model_validate({"observedHash": "h", "surprise": 1})


async def test_works_are_selected_by_the_binding_and_cluster_they_are_for(api: Api) -> None:
    """A long Binding name is hashed in the Works' label: ``spec.binding`` selects them by the name itself
    (what the dashboard's topology and ``kubectl get works --field-selector`` use)."""
    long = "deployment-default-" + "w" * 60
    for binding, cluster in ((long, "a"), (long, "b"), ("short", "a")):
        assert (await api.call("POST", WORKS, json=work(binding, cluster))).status_code == 201
    def pairs(r: Any) -> list[tuple[str, str]]:
        assert r.status_code == 200, r.text
        return sorted((o["spec"]["binding"], o["spec"]["cluster"]) for o in r.json()["items"])
    assert pairs(await api.call("GET", WORKS, params={"fieldSelector": f"spec.binding={long}"}, role="viewer")) == [
        (long, "a"), (long, "b")]
    assert pairs(await api.call("GET", WORKS, params={"fieldSelector": "spec.cluster=a,spec.binding!=short"})) == [
        (long, "a")]
    r = await api.call("GET", WORKS, params={"fieldSelector": "spec.manifests=x"})
    assert r.status_code == 400 and "spec.binding" in r.json()["message"], r.text
    # other kinds keep Kubernetes' own set
    r = await api.call("GET", "/api/v1/services", params={"fieldSelector": "spec.binding=x"})
    assert r.status_code == 400


async def test_works_are_served_on_the_kubernetes_paths_with_a_strict_spec(api: Api) -> None:
    r = await api.call("POST", WORKS, json=work("b1", "a"))
    assert r.status_code == 201, r.text
    bad = work("b2", "a")
    bad["spec"]["replica"] = 3
    r = await api.call("POST", WORKS, json=bad)
    assert r.status_code == 422 and "spec.replica" in r.text
    r = await api.call("GET", WORKS, role="viewer")
    assert [o["spec"]["binding"] for o in r.json()["items"]] == ["b1"]
    # kubectl get works: which cluster, which binding, how many manifests, applied yet
    table = (await api.call("GET", WORKS, role="viewer",
                            headers={"Accept": "application/json;as=Table;v=v1;g=meta.k8s.io"})).json()
    names = [c["name"] for c in table["columnDefinitions"]]
    assert names == ["Name", "Cluster", "Binding", "Manifests", "Applied", "Age"]
    assert table["rows"][0]["cells"][1:5] == ["a", "b1", 1, "Pending"]


async def test_an_agent_lists_and_reports_only_its_own_clusters_works(api: Api) -> None:
    mine, other = work("b1", "a"), work("b1", "b")
    for w in (mine, other):
        assert (await api.call("POST", WORKS, json=w)).status_code == 201
    r = await api.call("GET", "/api/v1/agent/works", role="agent-a")
    assert r.status_code == 200, r.text
    assert [o["spec"]["cluster"] for o in r.json()["items"]] == ["a"]
    assert r.json()["metadata"]["resourceVersion"].isdigit()
    # another cluster, by query or by name: refused
    r = await api.call("GET", "/api/v1/agent/works?cluster=b", role="agent-a")
    assert r.status_code == 403 and r.json()["code"] == "FORBIDDEN"
    r = await api.call("PUT", f"/api/v1/agent/works/{other['metadata']['name']}/status", role="agent-a",
                       json=status("h1"))
    assert r.status_code == 403
    # nothing else: not the Kubernetes paths, not other roles on the agent routes
    assert (await api.call("GET", WORKS, role="agent-a")).status_code == 403
    assert (await api.call("PUT", f"{WORKS}/{mine['metadata']['name']}/status", role="agent-a",
                           json={**mine, "status": status("h1")})).status_code == 403
    assert (await api.call("GET", "/api/v1/agent/works?cluster=a", role="viewer")).status_code == 403
    assert (await api.call("GET", "/api/v1/agent/works?cluster=a", role="operator")).status_code == 403
    # its own Work's status: validated, stored, audited
    name = mine["metadata"]["name"]
    r = await api.call("PUT", f"/api/v1/agent/works/{name}/status", role="agent-a", json={"applied": "yes"})
    assert r.status_code == 422
    r = await api.call("PUT", f"/api/v1/agent/works/{name}/status", role="agent-a", json=status("h1"))
    assert r.status_code == 200, r.text
    stored = (await api.call("GET", f"{WORKS}/{name}")).json()
    assert stored["status"]["observedHash"] == "h1" and stored["status"]["manifests"][0]["status"] == \
        {"readyReplicas": 1}
    assert stored["spec"] == mine["spec"]  # a status write never touches the spec
    assert (await api.call("GET", "/api/v1/agent/works/nope/status", role="agent-a")).status_code == 405
    r = await api.call("PUT", "/api/v1/agent/works/nope/status", role="agent-a", json=status("h1"))
    assert r.status_code == 404
    audit = (await api.call("GET", "/api/v1/audit")).json()["items"]
    rows = {(e["subject"], e["verb"], e["path"], e["result"]) for e in audit}
    assert ("agent-a", "PUT", f"/api/v1/agent/works/{name}/status", 200) in rows
    assert ("agent-a", "PUT", f"/api/v1/agent/works/{other['metadata']['name']}/status", 403) in rows


async def test_an_agent_watches_its_own_clusters_works(api: Api) -> None:
    r = await api.call("GET", "/api/v1/agent/works", role="agent-a")
    rv = r.json()["metadata"]["resourceVersion"]
    seen: list[tuple[str, str]] = []

    async def watch() -> None:
        async with api.client.stream("GET", f"/api/v1/agent/works?watch=true&resourceVersion={rv}",
                                     headers=api.auth("agent-a")) as resp:
            assert resp.status_code == 200
            async for line in resp.aiter_lines():
                ev = json.loads(line)
                seen.append((ev["type"], ev["object"]["spec"]["cluster"]))
                if ev["type"] == "DELETED":
                    return

    task = asyncio.create_task(watch())
    await asyncio.sleep(0.2)
    await api.call("POST", WORKS, json=work("b1", "b"))  # another cluster's: not delivered
    await api.call("POST", WORKS, json=work("b1", "a"))
    await api.call("DELETE", f"{WORKS}/{work_name('b1', 'a')}")
    await asyncio.wait_for(task, 10)
    assert seen == [("ADDED", "a"), ("DELETED", "a")]
