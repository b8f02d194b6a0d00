"""The sim's pure parts: flags, placement, workload plans, usage."""

from __future__ import annotations

from typing import Any

import pytest

from drods.model.quantity import GIB
from drods.sim import workloads as W
from drods.sim.config import NodePool, SimConfig, UsageModel, parse_cpu, parse_memory
from drods.sim.nodes import build_nodes, preload_pods
from drods.sim.placer import place, rooms
from drods.sim.resources import pod_requests
from drods.sim.usage import pod_usage


def test_flags() -> None:
    assert parse_cpu("7500m") == 7.5 and parse_memory("32") == 32 * GIB and parse_memory("64G") == 64 * 10**9
    pool = NodePool.parse("count=2,cpu=16,memory=64Gi,gpus=4,gpu-model=A100,zone=z1")
    assert (pool.count, pool.cpu, pool.memory, pool.gpus, pool.zone) == (2, 16.0, 64 * GIB, 4, "z1")
    assert pool.type_name == "sim-16c64g-4xa100"
    for bad in ("cpu=4", "count=1,cpu=4,memory=1Gi,color=red", "cpu4"):
        with pytest.raises(ValueError):
            NodePool.parse(bad)
    with pytest.raises(ValueError):
        SimConfig("x", [NodePool(1, 4, GIB)], preload=1.0)


def cfg(**kw: Any) -> SimConfig:
    return SimConfig("c", [NodePool(2, 4.0, 8 * GIB), NodePool(1, 8.0, 16 * GIB, gpus=2, gpu_model="T4", zone="b")],
                     region="r", zone="a", provider="gcp", city="NYC", **kw)


def test_nodes_and_preload() -> None:
    nodes = build_nodes(cfg(reserved_cpu=0.5))
    assert [n["metadata"]["name"] for n in nodes] == ["c-node-0", "c-node-1", "c-node-2"]
    gpu_node = nodes[2]
    assert gpu_node["status"]["capacity"]["nvidia.com/gpu"] == "2"
    assert gpu_node["status"]["allocatable"]["cpu"] == "7500m"
    assert gpu_node["metadata"]["labels"]["topology.kubernetes.io/zone"] == "b"
    assert nodes[0]["metadata"]["labels"]["multicluster.io/city"] == "NYC"
    pre = preload_pods(cfg(preload=0.5), nodes)
    assert [pod_requests(p).cpu for p in pre] == [1.75, 1.75, 3.75]


def pod(name: str, cpu: str, **spec: Any) -> dict[str, Any]:
    return {"metadata": {"name": name}, "spec": {"containers": [{"resources": {"requests": {"cpu": cpu}}}], **spec},
            "status": {"phase": "Pending"}}


def test_placer_filters_and_reasons() -> None:
    nodes = build_nodes(cfg())
    nodes[0]["spec"]["taints"] = [{"key": "dedicated", "value": "db", "effect": "NoSchedule"}]
    nodes[1]["spec"]["unschedulable"] = True
    room = rooms(nodes, [])
    assert place(pod("a", "1"), room) == ("c-node-2", "")
    assert place(pod("b", "1", tolerations=[{"key": "dedicated", "operator": "Exists"}]), room)[0] == "c-node-0"
    node, reason = place(pod("c", "100"), room)
    assert node is None
    assert reason == ("0/3 nodes are available: 1 Insufficient cpu, 1 node(s) had untolerated taint(s), "
                      "1 node(s) were unschedulable.")
    affinity = {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
        {"matchExpressions": [{"key": "topology.kubernetes.io/zone", "operator": "In", "values": ["b"]}]}]}}}
    assert place(pod("d", "1", affinity=affinity), room)[0] == "c-node-2"
    assert place(pod("e", "1", nodeSelector={"nvidia.com/gpu.product": "H100"}), room)[0] is None


def deployment(replicas: int, image: str = "v1", **strategy: Any) -> dict[str, Any]:
    return {"apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": "web", "namespace": "default", "uid": "u1", "generation": 1},
            "spec": {"replicas": replicas, "strategy": strategy,
                     "template": {"metadata": {"labels": {"app": "web"}}, "spec": {"containers": [{"image": image}]}}}}


def ready(p: dict[str, Any]) -> dict[str, Any]:
    return {**p, "spec": {**p["spec"], "nodeName": "n"},
            "status": {"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]}}


def test_deployment_rollout_keeps_old_pods_until_new_ones_are_ready() -> None:
    plan = W.plan_deployment(deployment(4), [], "now")
    assert len(plan.create) == 4 and plan.status and plan.status["replicas"] == 0
    old = [ready(p) for p in plan.create]
    plan = W.plan_deployment(deployment(4, "v2"), old, "now")
    assert len(plan.create) == 4 and len(plan.delete) == 1  # 25% may be unavailable
    new = [ready(p) for p in plan.create[:2]]
    plan = W.plan_deployment(deployment(4, "v2"), old + new, "now")
    assert len(plan.delete) == 3  # 2 new ready: keep 4 - 2 - 1 old
    plan = W.plan_deployment(deployment(4, "v2", type="Recreate"), old, "now")
    assert len(plan.delete) == 4
    plan = W.plan_deployment(deployment(1), old, "now")
    assert len(plan.delete) == 3 and plan.status and plan.status["replicas"] == 1


def test_statefulset_is_ordered_by_default() -> None:
    sts = {**deployment(3), "kind": "StatefulSet"}
    plan = W.plan_statefulset(sts, [], "now")
    assert [p["metadata"]["name"] for p in plan.create] == ["web-0"]
    plan = W.plan_statefulset(sts, [ready(plan.create[0])], "now")
    assert [p["metadata"]["name"] for p in plan.create] == ["web-1"]
    sts["spec"]["podManagementPolicy"] = "Parallel"
    assert len(W.plan_statefulset(sts, [], "now").create) == 3


def test_usage_follows_requests_and_curve() -> None:
    p = ready(pod("u", "2"))
    p["metadata"]["uid"] = "x"
    assert pod_usage(p, 0, UsageModel(cpu=0.5)).cpu == 1.0
    p["metadata"]["annotations"] = {"sim.drods.io/cpu-utilisation": "0.8"}
    assert pod_usage(p, 0, UsageModel()).cpu == pytest.approx(1.6)
    wave = [pod_usage(p, t, UsageModel(amplitude=0.2, period=100)).cpu for t in range(0, 100, 5)]
    assert min(wave) == pytest.approx(1.2, abs=0.05) and max(wave) == pytest.approx(2.0, abs=0.05)
    assert pod_usage({**p, "status": {"phase": "Pending"}}, 0, UsageModel()).cpu == 0


def test_workload_demand_is_shared_by_its_running_pods() -> None:
    from drods.sim.usage import LoadTable, pod_key

    def owned(name: str, owner: str, phase: str = "Running") -> dict[str, Any]:
        p = ready(pod(name, "1"))
        p["metadata"].update(uid=name, namespace="default",
                             ownerReferences=[{"kind": "Deployment", "name": owner, "uid": owner}])
        p["status"]["phase"] = phase
        return p

    pods = [owned("a", "web"), owned("b", "web"), owned("c", "web", "Pending"), owned("d", "api")]
    loads = LoadTable()
    loads.set("default", "Deployment", "web", 3.0)
    shares = loads.shares(pods)
    assert shares == {"a": 1.5, "b": 1.5}  # the pending pod takes no share; "api" keeps the model
    assert pod_usage(pods[0], 0, UsageModel(cpu=0.5), shares.get(pod_key(pods[0]))).cpu == 1.5  # above its request
    assert pod_usage(pods[3], 0, UsageModel(cpu=0.5), shares.get(pod_key(pods[3]))).cpu == 0.5
    loads.set("default", "Deployment", "web", None)
    assert loads.shares(pods) == {}
    with pytest.raises(ValueError):
        loads.set("default", "Deployment", "web", -1.0)


def test_summary_reports_measured_use_only_with_a_metrics_api() -> None:
    from drods.members.collector import report_from_summary
    from drods.members.summary import summarise
    from drods.model.scaling import cluster_utilisation
    from drods.monitor.report import MetricsReport, normalise
    from drods.monitor.statusdoc import scheduler_view

    node = {"metadata": {"name": "n1", "labels": {}},
            "status": {"capacity": {"cpu": "8", "memory": "32Gi", "pods": "110"},
                       "conditions": [{"type": "Ready", "status": "True"}]}}
    p = ready(pod("w", "2"))
    p["spec"]["nodeName"] = "n1"
    metrics = [{"metadata": {"name": "n1"}, "usage": {"cpu": "500m", "memory": "1Gi"}}]
    with_metrics = summarise([node], [p], metrics)
    assert with_metrics.status["cpu"]["measured"] == 0.5 and with_metrics.status["cpu"]["used"] == 0.5
    assert cluster_utilisation(with_metrics.status)["cpu"] == pytest.approx(25.0)  # 0.5 of the 2 requested
    without = summarise([node], [p], None)
    assert "measured" not in without.status["cpu"]
    assert "cpu" not in cluster_utilisation(without.status)  # requests are not a measurement
    # through monitoring (an agent's push): the measurement survives into the scheduler view
    body = report_from_summary("c", with_metrics, now=1_800_000_000.0)
    assert body["cpuUsed"] == 0.5 and body["cpuUsage"] == pytest.approx(25.0)  # water level keeps the requests
    status = normalise(MetricsReport.model_validate(body), 1_800_000_000.0, source="push")
    assert not isinstance(status, str)
    view = scheduler_view(status)
    assert view["cpu"]["measured"] == 0.5 and cluster_utilisation(view)["cpu"] == pytest.approx(25.0)
    assert "cpuUsed" not in report_from_summary("c", without, now=1_800_000_000.0)


def test_a_service_with_a_selector_has_an_endpoint_slice_of_the_pods_it_selects() -> None:
    from drods.sim.endpoints import endpoint_slice, managed

    svc = {"metadata": {"name": "web", "namespace": "default", "uid": "u1"},
           "spec": {"selector": {"app": "web"}, "ports": [{"name": "http", "port": 80, "targetPort": "web"}]}}

    def pod(name: str, ip: str | None, ready: bool, app: str = "web", phase: str = "Running") -> dict[str, Any]:
        status: dict[str, Any] = {"phase": phase, "conditions": [{"type": "Ready", "status": str(ready)}]}
        if ip:
            status["podIP"] = ip
        return {"metadata": {"name": name, "namespace": "default", "labels": {"app": app}, "uid": name},
                "spec": {"nodeName": "n1", "containers": [{"ports": [{"name": "web", "containerPort": 8080}]}]},
                "status": status}

    got = endpoint_slice(svc, [pod("b", "10.0.0.2", False), pod("a", "10.0.0.1", True), pod("c", None, True),
                               pod("d", "10.0.0.4", True, app="other"), pod("e", "10.0.0.5", True, phase="Succeeded")])
    assert got is not None and managed(got)
    assert got["metadata"]["labels"]["kubernetes.io/service-name"] == "web"
    assert [(e["addresses"], e["conditions"]["ready"]) for e in got["endpoints"]] == [
        (["10.0.0.1"], True), (["10.0.0.2"], False)]
    assert got["ports"] == [{"name": "http", "port": 8080, "protocol": "TCP"}]  # the named target port
    assert endpoint_slice({**svc, "spec": {"ports": [{"port": 80}]}}, []) is None  # no selector: no slice
