"""The cluster summary from nodes, pods and metrics, in the scheduler's status-document shape."""

from __future__ import annotations

from typing import Any

import pytest

from drods.members.summary import summarise


def node(name: str, cpu: str, memory: str, gpu: int = 0, *, alloc_cpu: str | None = None,
         alloc_memory: str | None = None, ready: bool = True, unschedulable: bool = False,
         labels: dict[str, str] | None = None, provider_id: str | None = None) -> dict[str, Any]:
    cap = {"cpu": cpu, "memory": memory, "pods": "110", **({"nvidia.com/gpu": str(gpu)} if gpu else {})}
    alloc = {**cap, "cpu": alloc_cpu or cpu, "memory": alloc_memory or memory}
    spec: dict[str, Any] = {"unschedulable": True} if unschedulable else {}
    if provider_id:
        spec["providerID"] = provider_id
    return {"metadata": {"name": name, "labels": labels or {}}, "spec": spec,
            "status": {"capacity": cap, "allocatable": alloc,
                       "conditions": [{"type": "Ready", "status": "True" if ready else "False"}]}}


def pod(node_name: str | None, cpu: str = "", memory: str = "", gpu: int = 0, phase: str = "Running",
        limits_only: bool = False) -> dict[str, Any]:
    res = {k: v for k, v in (("cpu", cpu), ("memory", memory), ("nvidia.com/gpu", str(gpu) if gpu else "")) if v}
    resources = {"limits": res} if limits_only else {"requests": res}
    spec: dict[str, Any] = {"containers": [{"name": "c", "resources": resources}]}
    if node_name:
        spec["nodeName"] = node_name
    return {"metadata": {"name": "p"}, "spec": spec, "status": {"phase": phase}}


NODES = [
    node("a", "4", "8Gi", 2, alloc_cpu="3750m", alloc_memory="7680Mi",
         labels={"topology.kubernetes.io/region": "us-east-1", "topology.kubernetes.io/zone": "us-east-1a",
                 "multicluster.io/city": "DFW", "nvidia.com/gpu.product": "A100"}),
    node("b", "4", "8Gi", alloc_cpu="3750m", alloc_memory="7680Mi",
         labels={"topology.kubernetes.io/region": "us-east-1", "topology.kubernetes.io/zone": "us-east-1b"},
         provider_id="aws:///us-east-1b/i-0abc"),
]


def test_document_shape_is_the_schedulers() -> None:
    doc = summarise(NODES, [], None, "v1.30.0", now=0).status
    assert set(doc) == {"timestamp", "source", "cpu", "memory", "gpu", "pods", "largestNodeFree", "waterLevel"}
    assert doc["source"] == "kubernetes" and doc["timestamp"] == "1970-01-01T00:00:00Z"
    for res in ("cpu", "memory", "gpu"):
        assert set(doc[res]) == {"capacity", "allocatable", "allocated", "used"}
    assert set(doc["pods"]) == {"capacity", "used"}
    assert set(doc["largestNodeFree"]) == {"cpu", "memory", "gpu"}


def test_network_traffic_is_what_was_measured_and_absent_when_unknown() -> None:
    assert "network" not in summarise(NODES, [], None, now=0).status  # unknown: no section, never 0
    doc = summarise(NODES, [], None, now=0, network=(1_250_000.0, 250_000.0)).status
    assert doc["network"] == {"inMbps": 10.0, "outMbps": 2.0, "rxBytesPerSecond": 1_250_000.0,
                              "txBytesPerSecond": 250_000.0}


def test_allocated_counts_bound_non_terminal_pods_only() -> None:
    pods = [pod("a", "1", "1Gi", 1), pod("a", "500m", "512Mi"), pod("b", "2", "2Gi"),
            pod(None, "3", "3Gi"),  # pending: holds nothing yet
            pod("b", "1", "1Gi", phase="Succeeded"), pod("b", "1", "1Gi", phase="Failed"),
            pod("a", "250m", "256Mi", limits_only=True)]  # a limit alone is the request
    s = summarise(NODES, pods, None)
    doc = s.status
    assert doc["cpu"] == {"capacity": 8.0, "allocatable": 7.5, "allocated": 3.75, "used": 3.75}
    assert doc["memory"] == {"capacity": 16.0, "allocatable": 15.0, "allocated": 3.75, "used": 3.75}
    assert doc["gpu"] == {"capacity": 2.0, "allocatable": 2.0, "allocated": 1.0, "used": 1.0}
    assert doc["pods"] == {"capacity": 220.0, "used": 4}
    assert s.pending_pods == 1
    # a: 3.75 - 1.75 = 2.0 cores free; b: 3.75 - 2 = 1.75 -> a is the largest
    assert doc["largestNodeFree"] == {"cpu": 2.0, "memory": pytest.approx(7.5 - 1.75), "gpu": 1.0}
    assert doc["waterLevel"] == pytest.approx(3.75 / 7.5)


def test_used_comes_from_metrics_when_served() -> None:
    pods = [pod("a", "2", "2Gi")]
    metrics = [{"metadata": {"name": "a"}, "usage": {"cpu": "3000000000n", "memory": "1048576Ki"}},
               {"metadata": {"name": "b"}, "usage": {"cpu": "500m", "memory": "512Mi"}}]
    s = summarise(NODES, pods, metrics)
    assert s.metrics_available
    assert s.status["cpu"]["used"] == 3.5 and s.status["memory"]["used"] == 1.5
    assert s.status["cpu"]["allocated"] == 2.0
    # water level takes the larger of use and requests: cpu 3.5 / 7.5 beats memory 2 / 15
    assert s.water_level == pytest.approx(3.5 / 7.5, abs=1e-6)


def test_largest_free_node_skips_cordoned_and_not_ready_nodes() -> None:
    nodes = [*NODES, node("big-cordoned", "64", "256Gi", unschedulable=True),
             node("big-down", "64", "256Gi", ready=False), node("mid", "8", "4Gi")]
    doc = summarise(nodes, [], None).status
    assert doc["largestNodeFree"] == {"cpu": 8.0, "memory": 4.0, "gpu": 0.0}  # by cpu first, then memory


def test_topology_version_and_inventory() -> None:
    s = summarise(NODES, [], None, "v1.29.3")
    assert s.topology() == {"region": "us-east-1", "zones": ["us-east-1a", "us-east-1b"], "provider": "aws",
                            "city": "DFW"}
    assert s.node_count == 2 and s.ready_nodes == 2 and s.kubernetes_version == "v1.29.3"
    assert s.gpu_models == ["A100"]


def test_empty_cluster_has_zero_water_level() -> None:
    doc = summarise([], [], None).status
    assert doc["waterLevel"] == 0 and doc["largestNodeFree"] == {"cpu": 0.0, "memory": 0.0, "gpu": 0.0}
