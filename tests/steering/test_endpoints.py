"""F8 units: endpoints collected from members (EndpointSlices, else Endpoints), listed per provider
with their health, and the derived EndpointSlices consumers receive."""

from __future__ import annotations

import json
from typing import Any

import pytest

from drods.members.client import MemberError, MemberUnavailable
from drods.model.keys import ENDPOINTS_PREFIX, endpoints_key
from drods.steering.directory import derived_slices, directory_entries, slice_binding
from drods.steering.endpoints import EndpointCollector, Target, from_endpoints, from_slices
from drods.store import Store

SERVICE = {"metadata": {"name": "web", "namespace": "default"},
           "spec": {"selector": {"app": "web"}, "ports": [{"name": "http", "port": 80}]}}
TEMPLATE = {"kind": "Deployment", "metadata": {"name": "web", "namespace": "default"},
            "spec": {"template": {"metadata": {"labels": {"app": "web"}}}}}
EXPORT = {"metadata": {"name": "web", "namespace": "default"}}


def binding(*clusters: str) -> dict[str, Any]:
    ref = {"apiVersion": "apps/v1", "kind": "Deployment", "name": "web", "namespace": "default"}
    return {"metadata": {"name": "deployment-default-web"}, "spec": {"resource": ref},
            "status": {"placement": [{"cluster": c, "replicas": 1} for c in clusters],
                       "clusters": [{"cluster": c, "readyReplicas": 1} for c in clusters]}}


def cluster(name: str, ready: str = "True") -> dict[str, Any]:
    return {"metadata": {"name": name}, "status": {"conditions": [{"type": "Ready", "status": ready}]}}


def doc(c: str, *ips: str, reachable: bool = True, ready: bool = True) -> dict[str, Any]:
    return {"cluster": c, "namespace": "default", "name": "web", "reachable": reachable,
            "endpoints": [{"addresses": [ip], "ready": ready} for ip in ips],
            "ports": [{"name": "http", "port": 8080, "protocol": "TCP"}], "observedAt": "2026-01-01T00:00:00.000Z"}


def entries(clusters: dict[str, dict[str, Any]], docs: list[dict[str, Any]], *placed: str) -> list[dict[str, Any]]:
    return directory_entries([EXPORT], {("default", "web"): SERVICE}, [binding(*placed)],
                             {("Deployment", "default", "web"): TEMPLATE}, clusters,
                             {endpoints_key(d["cluster"], "default", "web"): d for d in docs})


def test_the_directory_lists_each_providers_endpoints_ready_only_while_its_cluster_is() -> None:
    docs = [doc("east", "10.0.0.1", "10.0.0.2"), doc("south", "10.1.0.1")]
    e = entries({"east": cluster("east"), "south": cluster("south", "False")}, docs, "east", "south")[0]
    rows = {r["cluster"]: r for r in e["clusters"]}
    assert rows["east"]["readyEndpoints"] == 2 and rows["east"]["healthy"]
    assert rows["east"]["endpointPorts"] == [{"name": "http", "port": 8080, "protocol": "TCP"}]
    # south is NotReady: its endpoints stay listed, not ready.
    assert rows["south"]["endpoints"] == [{"addresses": ["10.1.0.1"], "ready": False}]
    assert rows["south"]["readyEndpoints"] == 0 and not rows["south"]["healthy"]
    # Consumers get one slice per provider, labelled with its source cluster; south's not ready.
    slices = {s["metadata"]["labels"]["multicluster.kubernetes.io/source-cluster"]: s for s in derived_slices(e)}
    assert set(slices) == {"east", "south"}
    east = slices["east"]
    assert east["metadata"]["name"] == "derived-web-east"
    assert east["metadata"]["labels"]["kubernetes.io/service-name"] == "derived-web"
    assert [ep["addresses"][0] for ep in east["endpoints"]] == ["10.0.0.1", "10.0.0.2"]
    assert all(ep["conditions"]["ready"] for ep in east["endpoints"]) and east["addressType"] == "IPv4"
    assert east["ports"] == [{"name": "http", "port": 8080, "protocol": "TCP"}]
    assert not any(ep["conditions"]["ready"] for ep in slices["south"]["endpoints"])
    b = slice_binding(e, east, ["east", "north", "south"])
    assert b["spec"]["resource"] == {"apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice",
                                     "namespace": "default", "name": "derived-web-east"}
    assert b["spec"]["targetClusters"] == ["east", "north", "south"]


def test_an_unreachable_or_deleted_provider_has_its_endpoints_marked_not_ready_and_a_gone_one_none() -> None:
    docs = [doc("east", "10.0.0.1", reachable=False), doc("gone", "10.9.0.1")]
    e = entries({"east": cluster("east")}, docs, "east", "gone")[0]
    rows = {r["cluster"]: r for r in e["clusters"]}
    assert rows["east"]["readyEndpoints"] == 0 and rows["gone"]["readyEndpoints"] == 0  # no Cluster object: gone
    # east's member was not reached: not healthy, though its cluster is still Ready and reported a ready replica
    assert rows["east"]["clusterReady"] and rows["east"]["readyReplicas"] == 1 and not rows["east"]["healthy"]
    # reached, and none of its endpoints ready: not healthy either
    e = entries({"east": cluster("east")}, [doc("east", "10.0.0.1", ready=False)], "east")[0]
    assert not e["clusters"][0]["healthy"]
    # No longer placed there: no row, so no slice.
    e = entries({"east": cluster("east")}, docs, "east")[0]
    assert [r["cluster"] for r in e["clusters"]] == ["east"]
    assert [s["metadata"]["name"] for s in derived_slices(e)] == ["derived-web-east"]
    # Not collected yet: the row has no endpoints and no slice is derived for it.
    e = entries({"east": cluster("east")}, [], "east")[0]
    assert "endpoints" not in e["clusters"][0] and derived_slices(e) == []


def test_endpoints_read_from_slices_and_from_v1_endpoints() -> None:
    eps, ports = from_slices([{"addressType": "IPv4", "endpoints": [
        {"addresses": ["10.0.0.2"], "conditions": {"ready": False}, "nodeName": "n1", "targetRef": {"name": "p2"}},
        {"addresses": ["10.0.0.1"], "conditions": {}}], "ports": [{"name": "http", "port": 8080}]},
        {"addressType": "FQDN", "endpoints": [{"addresses": ["example.com"]}]}])
    assert eps == [{"addresses": ["10.0.0.1"], "ready": True},
                   {"addresses": ["10.0.0.2"], "ready": False, "nodeName": "n1", "pod": "p2"}]
    assert ports == [{"name": "http", "port": 8080, "protocol": "TCP"}]
    eps, ports = from_endpoints({"subsets": [{"addresses": [{"ip": "10.0.0.3"}],
                                              "notReadyAddresses": [{"ip": "10.0.0.4"}],
                                              "ports": [{"port": 53, "protocol": "UDP"}]}]})
    assert eps == [{"addresses": ["10.0.0.3"], "ready": True}, {"addresses": ["10.0.0.4"], "ready": False}]
    assert ports == [{"name": "", "port": 53, "protocol": "UDP"}]


class FakeMember:
    def __init__(self) -> None:
        self.slices: list[dict[str, Any]] | None = []
        self.endpoints: dict[str, Any] | None = None
        self.down = False

    async def list_objects(self, api_version: str, kind: str, namespace: str | None = None,
                           label_selector: str | None = None) -> list[dict[str, Any]]:
        if self.down:
            raise MemberUnavailable("east", "connection refused")
        assert label_selector == "kubernetes.io/service-name=web" and namespace == "default"
        if self.slices is None:
            raise MemberError("east", 404, "NotFound", "the cluster does not serve this kind")
        return self.slices

    async def get(self, api_version: str, kind: str, name: str, namespace: str | None = None) -> Any:
        return self.endpoints


class FakeClients:
    def __init__(self, member: FakeMember) -> None:
        self.member = member

    async def get(self, name: str) -> tuple[Any, str | None]:
        return (self.member, None) if name == "east" else (None, "pull mode")


@pytest.mark.parametrize("store_factory", ["sqlite"], indirect=True)
async def test_the_collector_writes_what_changed_keeps_the_last_when_unreachable_and_forgets_the_unwanted(
        store: Store) -> None:
    member = FakeMember()
    wanted = {Target("east", "default", "web"), Target("pulled", "default", "web")}
    woken: list[int] = []
    col = EndpointCollector(store, FakeClients(member), lambda: wanted, lambda: woken.append(1),  # type: ignore[arg-type]
                            clock=lambda: 1000.0)
    key = endpoints_key("east", "default", "web")

    async def stored() -> dict[str, Any] | None:
        kv = await store.get(key)
        return json.loads(kv.value) if kv is not None else None

    member.slices = [{"addressType": "IPv4", "endpoints": [{"addresses": ["10.0.0.1"], "conditions": {"ready": True}}],
                      "ports": [{"name": "http", "port": 8080, "protocol": "TCP"}]}]
    assert await col.poll_once() == 1 and woken == [1]
    got = await stored()
    assert got is not None and got["source"] == "EndpointSlice" and got["reachable"]
    assert got["endpoints"] == [{"addresses": ["10.0.0.1"], "ready": True}]
    assert await col.poll_once() == 0 and woken == [1]  # nothing changed: nothing written, nobody woken
    member.down = True
    assert await col.poll_once() == 1
    got = await stored()
    assert got is not None and got["reachable"] is False and got["endpoints"][0]["addresses"] == ["10.0.0.1"]
    member.down, member.slices = False, None  # a cluster without EndpointSlices: its v1 Endpoints
    member.endpoints = {"subsets": [{"addresses": [{"ip": "10.0.0.7"}], "ports": [{"port": 8080}]}]}
    assert await col.poll_once() == 1
    got = await stored()
    assert got is not None and got["source"] == "Endpoints" and got["endpoints"][0]["addresses"] == ["10.0.0.7"]
    wanted.clear()
    assert await col.poll_once() == 1 and await stored() is None
    kvs, _ = await store.range(ENDPOINTS_PREFIX)
    assert kvs == []
