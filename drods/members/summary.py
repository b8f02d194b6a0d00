"""A member cluster's resources, computed from its nodes, pods and (when served) metrics.k8s.io, in
exactly the status document the scheduler reads — the same shape an agent's push produces
(`drods.monitor.statusdoc.scheduler_view`, read by `drods.scheduler.snapshot`).

Units: CPU in cores, memory in GiB, GPUs in devices. ``allocated`` is the sum of the requests of
the non-terminal pods bound to a node (a pending pod holds nothing yet); ``used`` is what
metrics.k8s.io reports, or ``allocated`` when the cluster serves no metrics (GPUs always use
``allocated``: metrics.k8s.io has no GPU usage). The water level is the fuller of CPU and memory,
each taken as max(used, allocated) / allocatable. Network traffic (``network``) is what the kubelets'
counters measured between two readings (`drods.members.traffic`), absent when unknown.
``measured`` (CPU and memory) is present only
when metrics.k8s.io answered: the use itself, which an autoscaler compares with ``allocated``
(``used`` alone cannot tell a measurement from the requests standing in for one).
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from drods.members import labels as L
from drods.model.member_status import MemberStatus, NodeFree, Resource
from drods.model.quantity import GIB, quantity

Obj = dict[str, Any]
TERMINAL = frozenset({"Succeeded", "Failed"})


@dataclass(slots=True)
class Amount:
    cpu: float = 0.0  # cores
    memory: float = 0.0  # bytes
    gpu: float = 0.0

    def add(self, other: Amount) -> None:
        self.cpu += other.cpu
        self.memory += other.memory
        self.gpu += other.gpu


def _res(resources: dict[str, Any] | None) -> Amount:
    r = resources or {}
    return Amount(float(quantity(r.get("cpu"))), float(quantity(r.get("memory"))),
                float(quantity(r.get(L.GPU_RESOURCE))))


def pod_requests(pod: Obj) -> Amount:
    """Effective requests (a limit alone counts as the request; init containers by their max)."""
    spec = pod.get("spec") or {}
    total = Amount()
    for c in spec.get("containers") or []:
        res = c.get("resources") or {}
        total.add(_res({**(res.get("limits") or {}), **(res.get("requests") or {})}))
    for c in spec.get("initContainers") or []:
        res = c.get("resources") or {}
        r = _res({**(res.get("limits") or {}), **(res.get("requests") or {})})
        total = Amount(max(total.cpu, r.cpu), max(total.memory, r.memory), max(total.gpu, r.gpu))
    total.add(_res(spec.get("overhead")))
    return total


def _ready(node: Obj) -> bool:
    for cond in (node.get("status") or {}).get("conditions") or []:
        if cond.get("type") == "Ready":
            return bool(cond.get("status") == "True")
    return False


def _schedulable(node: Obj) -> bool:
    spec = node.get("spec") or {}
    if spec.get("unschedulable"):
        return False
    return not any(t.get("effect") == "NoSchedule" for t in spec.get("taints") or [])


def _most_common(values: list[str]) -> str | None:
    counted = Counter(v for v in values if v)
    return counted.most_common(1)[0][0] if counted else None


@dataclass
class ClusterSummary:
    """What a member looks like: the scheduler's status document plus topology and inventory."""

    member_status: MemberStatus
    node_count: int
    ready_nodes: int
    pending_pods: int
    kubernetes_version: str | None
    region: str | None
    zones: list[str]
    provider: str | None
    city: str | None
    gpu_models: list[str] = field(default_factory=list)
    # F1: per GPU model (node label nvidia.com/gpu.product): capacity, allocatable, allocated devices
    gpu_by_model: dict[str, dict[str, float]] = field(default_factory=dict)
    metrics_available: bool = False
    cluster_id: str | None = None  # its kube-system namespace's UID (Karmada's cluster ID), read at join

    @property
    def status(self) -> dict[str, Any]:
        """The status document, as stored and as an agent's push produces it."""
        return self.member_status.to_doc()

    @property
    def gpu_allocatable(self) -> float:
        gpu = self.member_status.gpu
        return 0.0 if gpu is None or gpu.allocatable is None else gpu.allocatable

    @property
    def water_level(self) -> float:
        return float(self.member_status.water_level or 0.0)

    def topology(self) -> dict[str, Any]:
        return {"region": self.region, "zones": self.zones, "provider": self.provider, "city": self.city}


def _r(x: float) -> float:
    return round(x, 6)


def _tally_pods(pods: list[Obj]) -> tuple[Amount, dict[str, Amount], int, int]:
    """Requests of the bound non-terminal pods (in all, per node), how many are bound and pending."""
    allocated = Amount()
    per_node_requested: dict[str, Amount] = {}
    pods_used = pending = 0
    for pod in pods:
        if (pod.get("status") or {}).get("phase") in TERMINAL:
            continue
        node = (pod.get("spec") or {}).get("nodeName")
        if not node:
            pending += 1
            continue
        pods_used += 1
        req = pod_requests(pod)
        allocated.add(req)
        per_node_requested.setdefault(node, Amount()).add(req)
    return allocated, per_node_requested, pods_used, pending


def _resource(cap: float, alloc: float, booked: float, use: float, measured: bool, unit: float = 1.0) -> Resource:
    return Resource(capacity=_r(cap / unit), allocatable=_r(alloc / unit), allocated=_r(booked / unit),
                    used=_r(use / unit), measured=_r(use / unit) if measured else None)


def summarise(nodes: list[Obj], pods: list[Obj], node_metrics: list[Obj] | None,
              version: str | None = None, now: float | None = None,
              network: tuple[float, float] | None = None) -> ClusterSummary:
    """``network``: (received, transmitted) bytes per second measured from the kubelets' counters;
    None when unknown — the status then says nothing about traffic (never 0)."""
    capacity, allocatable = Amount(), Amount()
    pods_capacity = 0.0
    allocated, per_node_requested, pods_used, pending = _tally_pods(pods)
    best: tuple[float, float] | None = None
    largest = Amount()
    regions, zones, providers, cities, gpu_models = [], set(), [], [], set()
    by_model: dict[str, dict[str, float]] = {}
    ready_nodes = 0
    for node in nodes:
        status = node.get("status") or {}
        cap = _res(status.get("capacity"))
        alloc = _res(status.get("allocatable") or status.get("capacity"))
        capacity.add(cap)
        allocatable.add(alloc)
        pods_capacity += float(quantity((status.get("allocatable") or status.get("capacity") or {}).get("pods")))
        labels = (node.get("metadata") or {}).get("labels") or {}
        regions.append(L.label(labels, L.REGION) or "")
        zone = L.label(labels, L.ZONE)
        if zone:
            zones.add(zone)
        providers.append(L.provider_of(labels, (node.get("spec") or {}).get("providerID")) or "")
        cities.append(labels.get(L.CITY, ""))
        if labels.get(L.GPU_PRODUCT) and cap.gpu:
            model = labels[L.GPU_PRODUCT]
            gpu_models.add(model)
            used_gpus = per_node_requested.get((node.get("metadata") or {}).get("name", ""), Amount()).gpu
            slot = by_model.setdefault(model, {"capacity": 0.0, "allocatable": 0.0, "allocated": 0.0})
            slot["capacity"] += cap.gpu
            slot["allocatable"] += alloc.gpu
            slot["allocated"] += used_gpus
        ready = _ready(node)
        ready_nodes += ready
        if not ready or not _schedulable(node):
            continue
        req = per_node_requested.get(node["metadata"]["name"], Amount())
        free = Amount(max(0.0, alloc.cpu - req.cpu), max(0.0, alloc.memory - req.memory), max(0.0, alloc.gpu - req.gpu))
        if best is None or (free.cpu, free.memory) > best:
            best, largest = (free.cpu, free.memory), free
    metrics_available = node_metrics is not None
    used = Amount(allocated.cpu, allocated.memory, allocated.gpu)
    if node_metrics is not None:
        used = Amount(gpu=allocated.gpu)
        for m in node_metrics:
            u = _res(m.get("usage"))
            used.cpu += u.cpu
            used.memory += u.memory

    def level(a: float, u: float, total: float) -> float:
        return max(a, u) / total if total > 0 else 0.0

    water = max(level(allocated.cpu, used.cpu, allocatable.cpu),
                level(allocated.memory, used.memory, allocatable.memory))
    ts = datetime.fromtimestamp(now, UTC) if now is not None else datetime.now(UTC)
    doc = MemberStatus(
        timestamp=ts.isoformat(timespec="seconds").replace("+00:00", "Z"), source="kubernetes",
        cpu=_resource(capacity.cpu, allocatable.cpu, allocated.cpu, used.cpu, metrics_available),
        memory=_resource(capacity.memory, allocatable.memory, allocated.memory, used.memory, metrics_available, GIB),
        gpu=_resource(capacity.gpu, allocatable.gpu, allocated.gpu, used.gpu, False),
        pods_capacity=pods_capacity, pods_used=pods_used,
        largest_node_free=NodeFree(_r(largest.cpu), _r(largest.memory / GIB), _r(largest.gpu)),
        network_in_mbps=None if network is None else _r(network[0] * 8 / 1e6),
        network_out_mbps=None if network is None else _r(network[1] * 8 / 1e6), water_level=_r(water),
    )
    return ClusterSummary(
        member_status=doc, node_count=len(nodes), ready_nodes=ready_nodes, pending_pods=pending,
        kubernetes_version=version, region=_most_common(regions), zones=sorted(zones),
        provider=_most_common(providers), city=_most_common(cities), gpu_models=sorted(gpu_models),
        gpu_by_model={k: {p: _r(v) for p, v in slot.items()} for k, slot in sorted(by_model.items())},
        metrics_available=metrics_available,
    )
