"""The search cache controller's choices: which members and kinds each ResourceRegistry selects
(names, exclusions, label and field selectors; the namespaces it keeps) and the Ready condition it
reports; and how the search API reads a Kubernetes resource path."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from drods.api.routes.search import ResourcePath
from drods.controllers.search import SearchCacheController, _Follower
from drods.errors import ApiError
from drods.machinery.informer import Informer
from drods.members.client import MemberOptions
from drods.members.search_cache import SearchCache
from drods.model.kinds import CLUSTER
from drods.model.search import ResourceRegistrySpec


def cluster(name: str, region: str, **labels: str) -> dict[str, Any]:
    return {"metadata": {"name": name, "labels": labels}, "spec": {"region": region, "provider": "aws"}}


def controller() -> SearchCacheController:
    clusters = Informer(None, CLUSTER.key_prefix(), lambda kv: kv)  # type: ignore[arg-type]
    for c in (cluster("dfw", "us-east", env="prod"), cluster("lhr", "eu-west", env="prod"),
              cluster("sin", "ap-south", env="dev")):
        clusters.cache[CLUSTER.key(c["metadata"]["name"])] = c
    registries = Informer(None, "/registry/search.karmada.io/resourceregistries/", lambda kv: kv)  # type: ignore[arg-type]
    return SearchCacheController(None, clusters, registries, SearchCache(), MemberOptions())  # type: ignore[arg-type]


def spec(target: dict[str, Any], *selectors: dict[str, str]) -> ResourceRegistrySpec:
    return ResourceRegistrySpec.model_validate({"targetCluster": target, "resourceSelectors": list(selectors)})


DEPLOY = {"apiVersion": "apps/v1", "kind": "Deployment"}


def test_target_cluster_selects_by_name_exclusion_label_and_field() -> None:
    c = controller()
    wanted = c.wanted({
        "all": spec({}, DEPLOY),
        "named": spec({"clusterNames": ["dfw", "sin"], "exclude": ["sin"]}, DEPLOY),
        "prod": spec({"labelSelector": {"matchLabels": {"env": "prod"}}}, DEPLOY),
        "not-eu": spec({"fieldSelector": {"matchExpressions": [{"key": "region", "operator": "NotIn",
                                                               "values": ["eu-west"]}]}}, DEPLOY),
    })
    assert {n: sorted(k[0] for k in w) for n, w in wanted.items()} == {
        "all": ["dfw", "lhr", "sin"], "named": ["dfw"], "prod": ["dfw", "lhr"], "not-eu": ["dfw", "sin"]}


def test_namespaces_of_one_kind_add_up_and_an_empty_one_means_all() -> None:
    c = controller()
    wanted = c.wanted({
        "two": spec({"clusterNames": ["dfw"]}, {**DEPLOY, "namespace": "a"}, {**DEPLOY, "namespace": "b"},
                    {"apiVersion": "v1", "kind": "ConfigMap", "namespace": "a"}),
        "all": spec({"clusterNames": ["dfw"]}, {**DEPLOY, "namespace": "a"}, DEPLOY),
    })
    assert wanted["two"] == {("dfw", "apps/v1", "Deployment"): frozenset({"a", "b"}),
                             ("dfw", "v1", "ConfigMap"): frozenset({"a"})}
    assert wanted["all"] == {("dfw", "apps/v1", "Deployment"): frozenset()}


async def test_the_ready_condition_names_what_is_not_cached_and_why() -> None:
    c = controller()
    assert c.condition({})["reason"] == "NoClusterSelected"
    done = asyncio.get_running_loop().create_future()
    done.set_result(None)
    c.followers[("dfw", "apps/v1", "Deployment")] = _Follower(done, frozenset(), problem=None)  # type: ignore[arg-type]
    c.followers[("sin", "apps/v1", "Deployment")] = _Follower(
        done, frozenset(), problem="pull mode: the cluster's agent pulls its work")  # type: ignore[arg-type]
    one = {("dfw", "apps/v1", "Deployment"): frozenset[str]()}
    assert c.condition(one)["status"] == "True"
    both = {**one, ("sin", "apps/v1", "Deployment"): frozenset[str]()}
    cond = c.condition(both)
    assert (cond["status"], cond["reason"]) == ("False", "NotCached")
    assert cond["message"] == "Deployment (apps/v1) in sin: pull mode: the cluster's agent pulls its work"


async def test_only_the_replica_leading_search_cache_writes_the_status() -> None:
    """Every API replica keeps a cache; the registries' Ready is written through the fenced
    registry of the one leading ``search-cache``, and by nobody once its term ends."""
    from drods.controllers.search import SearchStatusTerm

    class Writer:
        def __init__(self) -> None:
            self.patches: list[tuple[str, Any]] = []

        async def patch(self, _kind: Any, name: str, body: Any, *_: Any, **__: Any) -> None:
            self.patches.append((name, body))

    c = controller()
    wants = c.wanted({"all": spec({"clusterNames": ["dfw"]}, DEPLOY)})["all"]
    await c._report("all", wants)  # a replica that does not lead: nothing written
    writer = Writer()
    term = asyncio.create_task(SearchStatusTerm(c, writer).run())  # type: ignore[arg-type]
    await asyncio.sleep(0)
    assert c.writer is writer
    await c._report("all", wants)
    assert [(n, b["status"]["conditions"][0]["type"]) for n, b in writer.patches] == [("all", "Ready")]
    term.cancel()
    with pytest.raises(asyncio.CancelledError):
        await term
    assert c.writer is None  # the term ended (lease lost): this replica writes nothing more
    await c._report("all", wants)
    assert len(writer.patches) == 1


async def test_every_api_replica_runs_a_search_cache_and_the_controllers_process_none(tmp_path: Any) -> None:
    from drods.assembly import APISERVER, CONTROLLERS, assemble
    from drods.store.sqlite import SqliteStore

    for components, expected in ((APISERVER, True), (CONTROLLERS, False)):
        store = SqliteStore(str(tmp_path / f"{expected}.db"))
        plane = assemble(store, tmp_path, components)
        assert ("search-cache-replica" in plane.manager.names) is expected
        assert ("search-cache" in plane.manager.names) is expected
        await plane.context.store.close()


def test_a_registry_must_select_something_and_names_no_unknown_field() -> None:
    with pytest.raises(ValueError, match="resourceSelectors"):
        ResourceRegistrySpec.model_validate({"resourceSelectors": []})
    with pytest.raises(ValueError, match="backendStore"):
        ResourceRegistrySpec.model_validate({"resourceSelectors": [DEPLOY], "backendStore": {"mysql": {}}})


def test_resource_paths_as_kubernetes_writes_them() -> None:
    assert ResourcePath.parse("apis/apps/v1/deployments") == ResourcePath("apps", "v1", "deployments")
    assert ResourcePath.parse("apis/apps/v1/namespaces/shop/deployments/web") == ResourcePath(
        "apps", "v1", "deployments", "shop", "web")
    assert ResourcePath.parse("api/v1/namespaces") == ResourcePath("", "v1", "namespaces")
    assert ResourcePath.parse("api/v1/namespaces/shop") == ResourcePath("", "v1", "namespaces", None, "shop")
    assert ResourcePath.parse("api/v1/namespaces/shop/pods") == ResourcePath("", "v1", "pods", "shop")
    for bad in ("apis/apps", "version", "api/v1/namespaces/shop/pods/web/log"):
        with pytest.raises(ApiError):
            ResourcePath.parse(bad)
