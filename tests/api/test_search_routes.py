"""The search API over a filled search cache: lists and gets at Karmada's search and proxy paths,
authorised as reads of the cached kind (a namespaced token: its namespaces; Secret data: not for a
viewer), refused clearly where it cannot answer."""

from __future__ import annotations

import json

from drods.api.auth import Role
from drods.members.search_cache import CachedKind, SearchCache
from tests.api.conftest import Api

CACHE = "/apis/search.karmada.io/v1alpha1/search/cache"
PROXY = "/apis/search.karmada.io/v1alpha1/proxying/karmada/proxy"
SECRETS = CachedKind("aws-dfw", "v1", "Secret", "secrets", True)
WIDGETS = CachedKind("aws-dfw", "example.com/v1", "Widget", "widgets", True)


async def _filled(api: Api) -> SearchCache:
    cache: SearchCache = api.app.state.ctx.search  # type: ignore[attr-defined]
    assert cache.active  # every process serving the API runs its own search cache
    for kind in (SECRETS, WIDGETS):
        cache.scope(kind, ())
    cache.replace(SECRETS, [{"metadata": {"name": "db", "namespace": ns}, "data": {"pw": "c2VjcmV0"}}
                            for ns in ("default", "shop")])
    cache.replace(WIDGETS, [{"metadata": {"name": "w", "namespace": "default"}, "spec": {"size": 2}}])
    return cache


async def test_reads_are_authorised_as_reads_of_the_cached_kind(api: Api) -> None:
    await _filled(api)
    everything = await api.call("GET", f"{CACHE}/api/v1/secrets")
    assert everything.status_code == 200 and everything.json()["kind"] == "SecretList"
    assert [(o["metadata"]["namespace"], o["data"]) for o in everything.json()["items"]] == [
        ("default", {"pw": "c2VjcmV0"}), ("shop", {"pw": "c2VjcmV0"})]
    viewer = (await api.call("GET", f"{CACHE}/api/v1/namespaces/shop/secrets/db", role="viewer")).json()
    assert "data" not in viewer and viewer["metadata"]["name"] == "db"  # no read-secrets: no data
    ctx = api.app.state.ctx  # type: ignore[attr-defined]
    tenant = {"Authorization": f"Bearer {ctx.tokens.issue(Role.VIEWER, subject='t', namespaces=['default'])}"}
    own = await api.client.get(f"{CACHE}/api/v1/namespaces/default/secrets", headers=tenant)
    assert own.status_code == 200 and len(own.json()["items"]) == 1
    for path in (f"{CACHE}/api/v1/namespaces/shop/secrets", f"{CACHE}/api/v1/secrets"):
        refused = await api.client.get(path, headers=tenant)
        assert refused.status_code == 403 and refused.json()["kind"] == "Status", path


async def test_a_kind_only_members_serve_is_found_and_the_proxy_prints_tables(api: Api) -> None:
    await _filled(api)
    widgets = (await api.call("GET", f"{CACHE}/apis/example.com/v1/widgets")).json()
    assert widgets["kind"] == "WidgetList" and widgets["items"][0]["spec"] == {"size": 2}
    for selector, found in (("spec.size=2", 1), ("spec.size!=2", 0), ("metadata.namespace=shop", 0)):
        got = (await api.call("GET", f"{CACHE}/apis/example.com/v1/widgets?fieldSelector={selector}")).json()
        assert len(got["items"]) == found, selector
    table = await api.call("GET", f"{PROXY}/api/v1/namespaces/default/secrets",
                           headers={"Accept": "application/json;as=Table;v=v1;g=meta.k8s.io"})
    assert table.json()["kind"] == "Table" and [r["cells"][0] for r in table.json()["rows"]] == ["db"]
    discovery = (await api.call("GET", f"{PROXY}/apis/apps/v1")).json()
    assert discovery["kind"] == "APIResourceList" and "deployments" in {r["name"] for r in discovery["resources"]}
    assert (await api.call("GET", f"{PROXY}/api")).json()["versions"] == ["v1"]


async def test_what_the_cache_cannot_answer_is_a_clear_error(api: Api) -> None:
    cache = await _filled(api)
    unknown = await api.call("GET", f"{CACHE}/apis/nowhere.io/v1/things")
    assert unknown.status_code == 404 and unknown.json()["reason"] == "NotFound"
    missing = await api.call("GET", f"{CACHE}/api/v1/namespaces/default/secrets/nope")
    assert missing.status_code == 404
    bad_version = await api.call("GET", f"{CACHE}/api/v1/secrets?watch=true&resourceVersion=abc")
    assert bad_version.status_code == 400 and "resourceVersion" in bad_version.json()["message"]
    write = await api.call("DELETE", f"{CACHE}/api/v1/namespaces/default/secrets/db")
    assert write.status_code == 405
    cache.active = False  # stopped (or not started yet)
    starting = await api.call("GET", f"{CACHE}/api/v1/secrets")
    assert starting.status_code == 503 and "search cache has not started" in starting.json()["message"]
    assert starting.json()["kind"] == "Status" and starting.json()["reason"] == "ServiceUnavailable"


async def test_a_watch_resumes_from_the_lists_version(api: Api) -> None:
    cache = await _filled(api)
    listed = (await api.call("GET", f"{CACHE}/api/v1/namespaces/default/secrets")).json()
    since = listed["metadata"]["resourceVersion"]
    assert since == str(cache.revision) and listed["items"][0]["metadata"]["resourceVersion"] == "1"
    cache.apply(SECRETS, "ADDED", {"metadata": {"name": "new", "namespace": "default", "resourceVersion": "5"},
                                   "data": {"k": "dg=="}})
    cache.apply(SECRETS, "ADDED", {"metadata": {"name": "other", "namespace": "shop", "resourceVersion": "6"}})
    cache.apply(SECRETS, "DELETED", {"metadata": {"name": "db", "namespace": "default"}})
    watched = await api.call("GET", f"{CACHE}/api/v1/namespaces/default/secrets?watch=true"
                                    f"&resourceVersion={since}&timeoutSeconds=1", role="viewer")
    events = [json.loads(line) for line in watched.text.splitlines()]
    assert [(e["type"], e["object"]["metadata"]["name"]) for e in events] == [("ADDED", "new"), ("DELETED", "db")]
    assert "data" not in events[0]["object"]  # a viewer: no Secret data in events either
    assert events[0]["object"]["metadata"]["annotations"]["resource.karmada.io/cached-from-cluster"] == "aws-dfw"
    gone = await api.call("GET", f"{PROXY}/api/v1/secrets?watch=true&resourceVersion=999&timeoutSeconds=1")
    assert json.loads(gone.text)["object"] == {  # as kube-apiserver sends it: client-go decodes a v1 Status
        "kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure", "reason": "Expired", "code": 410,
        "message": json.loads(gone.text)["object"]["message"]}
