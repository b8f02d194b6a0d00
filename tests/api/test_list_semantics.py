"""Kubernetes list semantics on every kind: across namespaces, field selectors, the core list paths."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest

from drods.api import list_response
from tests.api.conftest import Api


def service(name: str, ns: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Service", "metadata": {"name": name, "namespace": ns},
            "spec": {"ports": [{"port": 80}]}}


def deployment(name: str, ns: str) -> dict[str, Any]:
    return {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": name, "namespace": ns},
            "spec": {"replicas": 1, "template": {"spec": {"containers": [{"name": "c", "image": "x"}]}}}}


def names(r: Any) -> list[tuple[str, str]]:
    assert r.status_code == 200, r.text
    return sorted((o["metadata"]["namespace"], o["metadata"]["name"]) for o in r.json()["items"])


async def seed(api: Api) -> None:
    for ns in ("team-a", "team-b"):
        for n in ("web", "db"):
            r = await api.call("POST", f"/api/v1/namespaces/{ns}/services", json=service(n, ns))
            assert r.status_code == 201, r.text
            r = await api.call("POST", f"/apis/apps/v1/namespaces/{ns}/deployments", json=deployment(n, ns))
            assert r.status_code == 201, r.text


async def test_lists_across_namespaces_on_kubernetes_own_paths(api: Api) -> None:
    await seed(api)
    everything = [("team-a", "db"), ("team-a", "web"), ("team-b", "db"), ("team-b", "web")]
    assert names(await api.call("GET", "/api/v1/services")) == everything
    assert names(await api.call("GET", "/apis/apps/v1/deployments")) == everything
    r = await api.call("GET", "/api/v1/services")
    assert r.json()["kind"] == "ServiceList" and r.json()["metadata"]["resourceVersion"].isdigit()
    assert names(await api.call("GET", "/api/v1/namespaces/team-b/services")) == everything[2:]
    # The façade keeps its paths: /api/v1/clusters is DRO-DS's, a POST-only path is still a 405.
    assert (await api.call("GET", "/api/v1/clusters")).json()["items"] == []
    r = await api.call("GET", "/api/v1/whatif")
    assert r.status_code == 405 and r.headers["Allow"] == "POST"
    assert (await api.call("GET", "/api/v1/nonsense")).status_code == 404
    r = await api.call("POST", "/api/v1/services", json=service("x", "team-a"))
    assert r.status_code == 405 and r.headers["Allow"] == "GET", (r.headers, r.text)


async def test_field_selectors_on_name_and_namespace(api: Api) -> None:
    await seed(api)
    q = "/api/v1/services?fieldSelector="
    assert names(await api.call("GET", q + "metadata.namespace=team-a")) == [("team-a", "db"), ("team-a", "web")]
    assert names(await api.call("GET", q + "metadata.namespace!=team-a,metadata.name==web")) == [("team-b", "web")]
    assert names(await api.call("GET", "/apis/apps/v1/deployments?fieldSelector=metadata.name%3Ddb")) == [
        ("team-a", "db"), ("team-b", "db")]
    r = await api.call("GET", q + "spec.type=ClusterIP")
    assert r.status_code == 400 and "field label not supported: spec.type" in r.text
    r = await api.call("GET", q + "nonsense")
    assert r.status_code == 400
    for bad in ("a===b", "=b", "a b c", "a in (b"):  # no label could have these: an error, not an empty list
        r = await api.call("GET", "/api/v1/services", params={"labelSelector": bad})
        assert r.status_code == 400 and "invalid labelSelector" in r.json()["message"], (bad, r.text)


async def test_a_delete_with_a_uid_precondition_deletes_that_object_only(api: Api) -> None:
    await seed(api)
    path = "/api/v1/namespaces/team-a/services/web"
    uid = (await api.call("GET", path)).json()["metadata"]["uid"]
    wrong = {"kind": "DeleteOptions", "apiVersion": "v1", "preconditions": {"uid": "not-" + uid}}
    r = await api.call("DELETE", path, json=wrong)
    assert r.status_code == 409 and "Precondition failed: UID in precondition" in r.json()["message"], r.text
    assert (await api.call("GET", path)).status_code == 200  # still there
    r = await api.call("DELETE", path, json={**wrong, "preconditions": {"uid": uid}})
    assert r.status_code == 200 and (await api.call("GET", path)).status_code == 404


async def test_watch_across_namespaces_with_a_field_selector(api: Api) -> None:
    await seed(api)
    rv = (await api.call("GET", "/api/v1/services")).json()["metadata"]["resourceVersion"]
    events: list[dict[str, Any]] = []

    async def watch() -> None:
        async with api.client.stream(
                "GET", "/api/v1/services",
                params={"watch": "true", "resourceVersion": rv, "fieldSelector": "metadata.namespace=team-b"},
                headers=api.auth()) as r:
            async for line in r.aiter_lines():
                if line.strip():
                    events.append(json.loads(line))
                    if len(events) == 1:
                        return

    task = asyncio.create_task(watch())
    await api.call("POST", "/api/v1/namespaces/team-a/services", json=service("cache", "team-a"))
    await api.call("POST", "/api/v1/namespaces/team-b/services", json=service("cache", "team-b"))
    await asyncio.wait_for(task, 10)
    assert [(e["type"], e["object"]["metadata"]["namespace"]) for e in events] == [("ADDED", "team-b")]


async def test_lists_in_pages_with_limit_and_continue(api: Api) -> None:
    """kubectl's chunked list: ``limit`` bounds a page, ``continue`` goes on; every page carries the
    first page's resourceVersion, so a watch from it sees what changed while the pages were read."""
    await seed(api)
    everything = [("team-a", "db"), ("team-a", "web"), ("team-b", "db"), ("team-b", "web")]
    seen: list[tuple[str, str]] = []
    revisions: set[str] = set()
    token = ""
    pages = 0
    while True:
        r = await api.call("GET", "/api/v1/services", params={"limit": "3", **({"continue": token} if token else {})})
        assert r.status_code == 200, r.text
        body = r.json()
        assert len(body["items"]) <= 3
        seen += [(o["metadata"]["namespace"], o["metadata"]["name"]) for o in body["items"]]
        revisions.add(body["metadata"]["resourceVersion"])
        pages += 1
        if pages == 1:  # written between the pages: behind the cursor, so the watch brings it
            created = await api.call("POST", "/api/v1/namespaces/team-a/services", json=service("aaa", "team-a"))
            assert created.status_code == 201
        token = body["metadata"].get("continue", "")
        if not token:
            break
    assert pages == 2 and seen == everything and len(revisions) == 1
    # a label selector and a field selector fill a page from the matching objects only
    r = await api.call("GET", "/apis/apps/v1/deployments",
                       params={"limit": "1", "fieldSelector": "metadata.name=web"})
    first = r.json()
    assert [o["metadata"]["namespace"] for o in first["items"]] == ["team-a"] and first["metadata"]["continue"]
    token = first["metadata"]["continue"]
    r = await api.call("GET", "/apis/apps/v1/deployments",
                       params={"limit": "1", "fieldSelector": "metadata.name=web", "continue": token})
    assert [o["metadata"]["namespace"] for o in r.json()["items"]] == ["team-b"]
    # the table kubectl asks for carries the token too
    r = await api.call("GET", "/api/v1/namespaces/team-b/services", params={"limit": "1"},
                       headers={"Accept": "application/json;as=Table;v=v1;g=meta.k8s.io"})
    assert r.json()["kind"] == "Table" and len(r.json()["rows"]) == 1 and r.json()["metadata"]["continue"]
    # no limit: everything, no token
    assert "continue" not in (await api.call("GET", "/api/v1/services")).json()["metadata"]
    # a page that takes the last of them says so, as kube-apiserver does: no token to an empty page
    r = await api.call("GET", "/api/v1/namespaces/team-b/services", params={"limit": "2"})
    assert len(r.json()["items"]) == 2 and "continue" not in r.json()["metadata"], r.json()["metadata"]


async def test_a_continue_token_this_server_did_not_make_is_refused(api: Api) -> None:
    for token in ("not-base64!", "eyJ2IjoxfQ"):  # the second: base64 of a document that is not a token
        r = await api.call("GET", "/api/v1/services", params={"limit": "2", "continue": token})
        assert r.status_code == 400 and r.json()["kind"] == "Status", r.text  # Kubernetes' dialect on its paths
        assert "continue key is not valid" in r.json()["message"]
        r = await api.call("GET", "/api/v1/bindings", params={"limit": "2", "continue": token})
        assert r.status_code == 400, r.text  # DRO-DS's on its own
        assert r.json()["code"] == "BAD_REQUEST" and r.json()["details"] == {"continue": token}
    r = await api.call("GET", "/api/v1/services", params={"limit": "-1"})
    assert r.status_code == 400 and "limit" in r.json()["message"]
    r = await api.call("GET", "/api/v1/bindings", params={"limit": str(10**30)})  # beyond any store's integer
    assert r.status_code == 200 and r.json()["items"] == []


async def test_the_flat_lists_page_too(api: Api) -> None:
    """``/api/v1/bindings`` and the other flat lists take the same ``limit`` and ``continue``."""
    for n in ("b1", "b2", "b3"):
        r = await api.call("POST", "/api/v1/bindings", json={
            "name": n, "resource": {"apiVersion": "apps/v1", "kind": "Deployment", "name": n}, "replicas": 1})
        assert r.status_code == 202, r.text
    for n in ("c1", "c2"):
        assert (await api.call("POST", "/api/v1/clusters", json={"name": n})).status_code == 201
    first = (await api.call("GET", "/api/v1/bindings", params={"limit": "2"})).json()
    assert [b["name"] for b in first["items"]] == ["b1", "b2"] and first["continue"]
    rest = (await api.call("GET", "/api/v1/bindings", params={"limit": "2", "continue": first["continue"]})).json()
    assert [b["name"] for b in rest["items"]] == ["b3"] and "continue" not in rest
    assert rest["resourceVersion"] == first["resourceVersion"]
    clusters = (await api.call("GET", "/api/v1/clusters", params={"limit": "1"})).json()
    assert [c["name"] for c in clusters["items"]] == ["c1"] and clusters["continue"]
    assert len((await api.call("GET", "/api/v1/bindings")).json()["items"]) == 3


async def test_a_watch_with_a_label_selector_sees_objects_leave_and_enter_it(api: Api) -> None:
    """As a Kubernetes API server's watch cache: an object relabelled out of the selector is DELETED (its
    content before the change, at the change's resourceVersion), one relabelled into it ADDED."""
    path = "/api/v1/namespaces/team-a/services"
    await api.call("POST", path, json={**service("web", "team-a"),
                                       "metadata": {"name": "web", "namespace": "team-a", "labels": {"tier": "a"}}})
    rv = (await api.call("GET", path)).json()["metadata"]["resourceVersion"]
    events: list[dict[str, Any]] = []

    async def watch() -> None:
        async with api.client.stream("GET", path, params={"watch": "true", "resourceVersion": rv,
                                                          "labelSelector": "tier=a"}, headers=api.auth()) as r:
            async for line in r.aiter_lines():
                if line.strip():
                    events.append(json.loads(line))
                    if len(events) == 4:
                        return

    task = asyncio.create_task(watch())
    versions = []
    for labels in ({"tier": "b"}, {"tier": "b", "x": "1"}, {"tier": "a"}, {"tier": "a", "x": "2"}):
        r = await api.call("PATCH", f"{path}/web", json={"metadata": {"labels": labels}},
                           headers={"Content-Type": "application/strategic-merge-patch+json"})
        assert r.status_code == 200, r.text
        versions.append(r.json()["metadata"]["resourceVersion"])
    r = await api.call("DELETE", f"{path}/web")
    assert r.status_code == 200, r.text
    await asyncio.wait_for(task, 10)
    seen = [(e["type"], e["object"]["metadata"]["labels"], e["object"]["metadata"]["resourceVersion"]) for e in events]
    assert seen[:3] == [("DELETED", {"tier": "a"}, versions[0]),  # left: what it was, at the change
                        ("ADDED", {"tier": "a", "x": "1"}, versions[2]),  # back in (the merge kept x)
                        ("MODIFIED", {"tier": "a", "x": "2"}, versions[3])]
    assert seen[3][:2] == ("DELETED", {"tier": "a", "x": "2"})


async def test_a_list_is_rendered_an_object_at_a_time_and_reads_as_one_document(
        api: Api, monkeypatch: pytest.MonkeyPatch) -> None:
    """A list without a selector is sent in chunks (`drods.api.list_response`), each object decoded
    as it is rendered: the answer is still one list whose objects are those a GET returns, in key
    order, whole or in pages, with a chunk's worth of objects exactly, one more, or none."""
    monkeypatch.setattr(list_response, "CHUNK", 3)
    empty = await api.call("GET", "/api/v1/configmaps")
    assert empty.status_code == 200 and empty.json()["items"] == [] and empty.json()["kind"] == "ConfigMapList"
    names = [f"cm-{i:02d}" for i in range(10)]
    made = 0
    for count in (9, 10):  # three chunks exactly; then a last one of one object
        for n in names[made:count]:
            r = await api.call("POST", "/api/v1/namespaces/default/configmaps",
                               json={"apiVersion": "v1", "kind": "ConfigMap",
                                     "metadata": {"name": n, "namespace": "default"}, "data": {"n": n}})
            assert r.status_code == 201, r.text
        made = count
        r = await api.call("GET", "/api/v1/configmaps")
        assert r.status_code == 200 and "content-length" not in r.headers  # streamed
        body = json.loads(r.content)
        assert [o["metadata"]["name"] for o in body["items"]] == names[:count]
        one = (await api.call("GET", "/api/v1/namespaces/default/configmaps/cm-04")).json()
        assert body["items"][4] == one and one["metadata"]["resourceVersion"].isdigit()
        assert body["metadata"]["resourceVersion"].isdigit() and "continue" not in body["metadata"]
    paged: list[str] = []
    token = ""
    while True:
        r = await api.call("GET", "/api/v1/configmaps", params={"limit": "4", **({"continue": token} if token else {})})
        page = r.json()
        assert len(page["items"]) <= 4
        paged += [o["metadata"]["name"] for o in page["items"]]
        token = page["metadata"].get("continue", "")
        if not token:
            break
    assert paged == names


@pytest.mark.parametrize("rv, says", [("99999999999999999999999", "Too large resource version"),
                                      ("12abc", "resourceVersion must be an integer")])
async def test_a_watch_from_a_revision_no_store_holds_is_a_bad_request(api: Api, rv: str, says: str) -> None:
    """A 23-digit resourceVersion overflowed SQLite's INTEGER: a 500 in the log, an empty 200 to the client."""
    for path in ("/api/v1/namespaces/default/configmaps", "/apis/multicluster.io/v1alpha1/bindings"):
        r = await api.call("GET", path, params={"watch": "1", "resourceVersion": rv, "timeoutSeconds": "1"})
        assert r.status_code == 400 and r.json()["kind"] == "Status" and says in r.json()["message"], r.text
