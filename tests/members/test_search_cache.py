"""The search cache: what a list and a member's watch events leave in it, the namespaces a
registry's scope keeps, and what a query finds (annotated with the member it came from)."""

from __future__ import annotations

from typing import Any

import pytest

from drods.members.search_cache import CachedKind, Expired, Query, SearchCache
from drods.model.search import CACHED_FROM_CLUSTER
from drods.model.selector import parse_selector

DFW = CachedKind("aws-dfw", "apps/v1", "Deployment", "deployments", True)
LHR = CachedKind("azure-lhr", "apps/v1", "Deployment", "deployments", True)
LHR_CM = CachedKind("azure-lhr", "v1", "ConfigMap", "configmaps", True)


def deploy(name: str, namespace: str = "default", rv: str = "7", **labels: str) -> dict[str, Any]:
    return {"metadata": {"name": name, "namespace": namespace, "labels": labels, "resourceVersion": rv},
            "spec": {"replicas": 1}}


def names(items: list[dict[str, Any]]) -> list[tuple[str, str]]:
    return [(o["metadata"]["name"], o["metadata"]["annotations"][CACHED_FROM_CLUSTER]) for o in items]


def test_a_list_then_watch_events_keep_what_the_member_has() -> None:
    cache = SearchCache()
    cache.scope(DFW, ())
    cache.replace(DFW, [deploy("web", app="web"), deploy("api", namespace="shop")])
    got = cache.find(Query("apps", "v1", "deployments"))
    assert names(got) == [("web", "aws-dfw"), ("api", "aws-dfw")]  # by namespace: default before shop
    assert got[0]["apiVersion"] == "apps/v1" and got[0]["kind"] == "Deployment"  # a list's items carry neither
    cache.apply(DFW, "ADDED", deploy("batch"))
    cache.apply(DFW, "MODIFIED", {**deploy("web", rv="8", app="web"), "spec": {"replicas": 3}})
    cache.apply(DFW, "DELETED", deploy("api", namespace="shop"))
    cache.apply(DFW, "BOOKMARK", {"metadata": {"resourceVersion": "9"}})
    got = cache.find(Query("apps", "v1", "deployments"))
    assert names(got) == [("batch", "aws-dfw"), ("web", "aws-dfw")]
    assert got[1]["spec"]["replicas"] == 3
    cache.replace(DFW, [deploy("web", rv="9")])  # a relist is the whole truth
    assert names(cache.find(Query("apps", "v1", "deployments"))) == [("web", "aws-dfw")]
    assert cache.find(Query("apps", "v1", "deployments"))[0]["spec"]["replicas"] == 1


def test_queries_by_namespace_name_selector_and_member() -> None:
    cache = SearchCache()
    for kind in (DFW, LHR, LHR_CM):
        cache.scope(kind, ())
    cache.replace(DFW, [deploy("web", app="web"), deploy("api", namespace="shop", app="api")])
    cache.replace(LHR, [deploy("web", app="web")])
    cache.replace(LHR_CM, [deploy("web")])
    assert names(cache.find(Query("apps", "v1", "deployments", name="web"))) == [("web", "aws-dfw"),
                                                                                  ("web", "azure-lhr")]
    assert names(cache.find(Query("apps", "v1", "deployments", namespace="shop"))) == [("api", "aws-dfw")]
    assert names(cache.find(Query("apps", "v1", "deployments", selector=parse_selector("app in (api)")))) == [
        ("api", "aws-dfw")]
    assert names(cache.find(Query("", "v1", "configmaps"))) == [("web", "azure-lhr")]
    assert cache.find(Query("apps", "v1beta1", "deployments")) == []
    assert cache.serves("", "v1", "configmaps") == LHR_CM and cache.serves("", "v1", "secrets") is None


def test_the_scope_keeps_only_the_selected_namespaces_and_a_drop_empties_the_kind() -> None:
    cache = SearchCache()
    cache.scope(DFW, ("shop",))
    cache.replace(DFW, [deploy("web"), deploy("api", namespace="shop")])
    cache.apply(DFW, "ADDED", deploy("other", namespace="elsewhere"))
    assert names(cache.find(Query("apps", "v1", "deployments"))) == [("api", "aws-dfw")]
    cache.scope(DFW, ("default",))  # narrowed: what is now out of scope leaves at once
    assert cache.find(Query("apps", "v1", "deployments")) == []
    cache.apply(DFW, "ADDED", deploy("web"))
    assert names(cache.find(Query("apps", "v1", "deployments"))) == [("web", "aws-dfw")]
    cache.drop(DFW)
    cache.apply(DFW, "ADDED", deploy("late"))  # an event of a dropped kind's watch still running: ignored
    assert cache.find(Query("apps", "v1", "deployments")) == [] and cache.kinds() == []


def test_the_cached_copy_is_not_the_members_object() -> None:
    cache = SearchCache()
    cache.scope(DFW, ())
    original = deploy("web")
    cache.replace(DFW, [original])
    assert "annotations" not in original["metadata"] and "kind" not in original


async def test_a_watch_resumes_from_a_revision_and_sees_every_change_after_it() -> None:
    cache = SearchCache()
    cache.scope(DFW, ())
    cache.replace(DFW, [deploy("web"), deploy("api")])
    listed_at = cache.revision
    assert {o["metadata"]["resourceVersion"] for o in cache.find(Query("apps", "v1", "deployments"))} == {"1", "2"}
    cache.replace(DFW, [deploy("web"), deploy("api")])  # a relist of what is unchanged: no change
    assert cache.revision == listed_at
    sub = cache.subscribe(listed_at)
    cache.apply(DFW, "MODIFIED", deploy("web", rv="8"))
    cache.replace(DFW, [deploy("web", rv="8")])  # the relist misses api: it was deleted meanwhile
    cache.scope(LHR, ())
    cache.replace(LHR, [deploy("web")])
    cache.drop(LHR)
    seen = [(e.type, e.object["metadata"]["name"], e.kind.cluster, e.revision) for e in
            [await sub.next() for _ in range(4)]]
    assert seen == [("MODIFIED", "web", "aws-dfw", 3), ("DELETED", "api", "aws-dfw", 4),
                    ("ADDED", "web", "azure-lhr", 5), ("DELETED", "web", "azure-lhr", 6)]
    late = cache.subscribe(4)  # resumes from an event's version: the changes after it
    assert [(await late.next()).revision for _ in range(2)] == [5, 6]
    everything = cache.subscribe(None)  # no version: what is there now, as ADDED
    first = await everything.next()
    assert (first.type, first.object["metadata"]["name"]) == ("ADDED", "web")
    with pytest.raises(Expired):
        cache.subscribe(cache.revision + 5)
    cache.clear()  # the term ended: watches end and must list again
    with pytest.raises(Expired):
        await sub.next()
