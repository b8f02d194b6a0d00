"""MultiClusterService and MultiClusterIngress decisions as pure functions: which clusters provide and
consume, what each consumer receives, and where an ingress is routed."""

from __future__ import annotations

from typing import Any

from drods.model.keys import endpoints_key
from drods.steering.delivery import load_balancer
from drods.steering.endpoints import Target
from drods.steering.multicluster_ingress import routed_clusters
from drods.steering.multicluster_service import (
    exposure,
    load_balancer_condition_of,
    mcs_targets,
    plan,
    serving_providers,
)

CLUSTERS = ["east", "north", "west"]
SERVICE = {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "web", "namespace": "shop"},
           "spec": {"selector": {"app": "web"}, "ports": [{"name": "http", "port": 80}]}}


def mcs(**spec: Any) -> dict[str, Any]:
    return {"metadata": {"name": "web", "namespace": "shop"}, "spec": {"types": ["CrossCluster"], **spec}}


def doc(cluster: str, *ips: str, reachable: bool = True) -> dict[str, Any]:
    return {"cluster": cluster, "reachable": reachable,
            "endpoints": [{"addresses": [ip], "ready": True} for ip in ips],
            "ports": [{"name": "http", "port": 8080, "protocol": "TCP"}, {"name": "admin", "port": 9090,
                                                                          "protocol": "TCP"}]}


def test_empty_lists_mean_every_cluster_and_every_spelling_of_the_lists_is_read() -> None:
    e = exposure(mcs(), CLUSTERS)
    assert e is not None and e.providers == e.consumers == tuple(CLUSTERS)
    e = exposure(mcs(providerClusters=[{"name": "east"}], serviceConsumptionClusters=["west", "gone"]), CLUSTERS)
    assert e is not None and (e.providers, e.consumers, e.unknown) == (("east",), ("west",), ("gone",))
    e = exposure(mcs(range={"clusterNames": ["north"]}), CLUSTERS)
    assert e is not None and e.providers == e.consumers == ("north",)
    assert mcs_targets([mcs(providerClusters=[{"name": "east"}])], CLUSTERS) == {Target("east", "shop", "web")}
    assert mcs_targets([mcs(types=["LoadBalancer"], providerClusters=[{"name": "west"}])],
                       CLUSTERS) == {Target("west", "shop", "web")}  # its providers' health is read


def test_each_consumer_but_the_provider_itself_gets_the_providers_endpoints() -> None:
    e = exposure(mcs(ports=[{"name": "http", "port": 80}]), CLUSTERS)
    assert e is not None
    docs = {endpoints_key("east", "shop", "web"): doc("east", "10.0.0.1"),
            endpoints_key("west", "shop", "web"): doc("west", "10.1.0.1", reachable=False)}
    p = plan(e, SERVICE, docs)
    bindings = {o["metadata"]["name"]: o["spec"]["targetClusters"] for k, o in p.writes if k.kind == "Binding"}
    assert bindings == {"mcs-shop-web": CLUSTERS, "mcs-shop-web-eps-east": ["north", "west"],
                        "mcs-shop-web-eps-west": ["east", "north"]}
    slices = {o["metadata"]["name"]: o for k, o in p.writes if k.kind == "EndpointSlice"}
    east = slices["imported-east-web"]
    assert east["metadata"]["labels"]["kubernetes.io/service-name"] == "web"
    assert east["ports"] == [{"name": "http", "port": 8080, "protocol": "TCP"}]  # only the exposed port
    assert east["endpoints"][0]["conditions"]["ready"] is True
    assert slices["imported-west-web"]["endpoints"][0]["conditions"]["ready"] is False  # west unreachable
    assert dict((t, ok) for t, ok, *_ in p.conditions) == {"ServiceApplied": True, "EndpointSliceDispatched": False}


def test_without_its_service_nothing_is_written() -> None:
    e = exposure(mcs(), CLUSTERS)
    assert e is not None
    p = plan(e, None, {})
    assert p.writes == [] and p.conditions[0][:3] == ("ServiceApplied", False, "ServiceNotFound")


def test_a_load_balancer_goes_to_the_providers_as_type_load_balancer_and_lists_the_healthy_ones() -> None:
    lb = exposure(mcs(types=["LoadBalancer"], providerClusters=[{"name": "east"}, {"name": "west"}],
                      consumerClusters=[{"name": "north"}]), CLUSTERS)
    assert lb is not None and lb.load_balancer and not lb.cross_cluster
    p = plan(lb, SERVICE, {})
    kinds = {k.kind: o for k, o in p.writes}
    assert set(kinds) == {"OverridePolicy", "Binding"}  # no endpoint slices: not CrossCluster
    assert kinds["Binding"]["spec"]["targetClusters"] == ["east", "west"]  # consumers only with CrossCluster
    rule = kinds["OverridePolicy"]["spec"]["overrideRules"][0]
    assert rule["targetCluster"] == {"clusterNames": ["east", "west"]}
    assert rule["overriders"]["plaintext"] == [{"path": "/spec/type", "operator": "add", "value": "LoadBalancer"}]
    assert kinds["OverridePolicy"]["spec"]["resourceSelectors"] == [{"apiVersion": "v1", "kind": "Service",
                                                                     "name": "web"}]
    docs = {endpoints_key("east", "shop", "web"): doc("east", "10.0.0.1"),
            endpoints_key("west", "shop", "web"): doc("west", "10.1.0.1", reachable=False)}
    assert serving_providers(lb, docs, frozenset()) == ["east"]
    assert serving_providers(lb, docs, frozenset({"east"})) == []  # TrafficControl takes it away
    assert load_balancer_condition_of(["east"], {"ingress": [{"ip": "1.2.3.4"}]})[:3] == (
        "LoadBalancerReady", True, "LoadBalancerReady")
    assert load_balancer_condition_of(["east"], {})[2] == "Provisioning"
    assert load_balancer_condition_of([], {})[2] == "NoHealthyProvider"
    both = exposure(mcs(types=["CrossCluster", "LoadBalancer"], providerClusters=[{"name": "east"}]), CLUSTERS)
    assert both is not None
    bindings = {o["metadata"]["name"]: o["spec"]["targetClusters"]
                for k, o in plan(both, SERVICE, docs).writes if k.kind == "Binding"}
    assert bindings == {"mcs-shop-web": CLUSTERS, "mcs-shop-web-eps-east": ["north", "west"]}


def test_an_ingress_goes_where_a_backend_is_healthy_and_reports_every_address() -> None:
    entries = [{"name": "front", "namespace": "shop", "clusters": [{"cluster": "east", "healthy": True},
                                                                   {"cluster": "west", "healthy": False}]},
               {"name": "api", "namespace": "shop", "clusters": [{"cluster": "north", "healthy": True}]},
               {"name": "other", "namespace": "shop", "clusters": [{"cluster": "west", "healthy": True}]}]
    assert routed_clusters(["front", "api"], entries) == ["east", "north"]
    lb = load_balancer([{"loadBalancer": {"ingress": [{"ip": "1.2.3.4"}]}},
                        {"loadBalancer": {"ingress": [{"ip": "1.2.3.4"}, {"hostname": "lb.example.com"}]}}, {}])
    assert lb == {"ingress": [{"hostname": "lb.example.com"}, {"ip": "1.2.3.4"}]}
    assert load_balancer([]) == {}
