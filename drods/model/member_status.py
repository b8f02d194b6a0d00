"""The member status document: what a member's resources look like to the scheduler (S2, S10).

Stored as ``status`` of ``/status/clusters/<name>`` (``drods.monitor.statusdoc``), built from a
member's nodes and pods (``drods.members.summary``) or from a pushed report, and read by the
scheduler's snapshot, steering and autoscaling. Its wire keys are named here once; ``MemberStatus``
is the typed form, ``read`` the lenient parse of a stored document (any field may be missing; a
value that is not a finite non-negative number counts as missing) and ``to_doc`` the document.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from drods.model import jsondoc

# top-level keys
TIMESTAMP = "timestamp"
RECEIVED_AT = "receivedAt"
SOURCE = "source"
CPU = "cpu"
MEMORY = "memory"
GPU = "gpu"
STORAGE = "storage"
PODS = "pods"
GPU_BY_MODEL = "gpuByModel"
STORAGE_BY_TIER = "storageByTier"
LARGEST_NODE_FREE = "largestNodeFree"
NETWORK = "network"
WATER_LEVEL = "waterLevel"
NODES = "nodes"  # {total, ready}: what a pull member's Cluster status shows (its agent's report)
KUBERNETES_VERSION = "kubernetesVersion"
# keys inside the sections
CAPACITY = "capacity"
ALLOCATABLE = "allocatable"
ALLOCATED = "allocated"
USED = "used"
MEASURED = "measured"
AVAILABLE = "available"
IN_MBPS = "inMbps"
OUT_MBPS = "outMbps"
TOTAL = "total"
READY = "ready"
RX_BPS = "rxBytesPerSecond"  # the same traffic in bytes per second (null when unknown)
TX_BPS = "txBytesPerSecond"

RESOURCE_SECTIONS = (CPU, MEMORY, GPU)  # the sections holding a ``Resource``
OFFER_MAPS = (GPU_BY_MODEL, STORAGE_BY_TIER)  # ``{key: {capacity, allocatable, allocated}}`` maps


def number(d: Mapping[str, Any], key: str) -> float | None:
    """``d[key]`` as a finite non-negative float; None when missing or anything else."""
    v = d.get(key)
    if v is None:
        return None
    try:
        f = float(v)
    except (TypeError, ValueError):
        return None
    return f if math.isfinite(f) and f >= 0 else None


@dataclass(frozen=True, slots=True)
class Resource:
    """One of cpu (cores), memory (GiB), gpu (devices); None = not stated."""

    capacity: float | None = None
    used: float | None = None
    allocatable: float | None = None
    allocated: float | None = None
    measured: float | None = None  # metrics.k8s.io use, when the member serves it

    @classmethod
    def read(cls, sec: Any) -> Resource | None:
        if not isinstance(sec, Mapping):
            return None
        return cls(number(sec, CAPACITY), number(sec, USED), number(sec, ALLOCATABLE),
                   number(sec, ALLOCATED), number(sec, MEASURED))

    @property
    def busy(self) -> float:
        """max(used, allocated): what the water level counts as taken (absent = 0)."""
        return max(zero_if_absent(self.used), zero_if_absent(self.allocated))

    def to_doc(self) -> dict[str, float]:
        pairs = ((CAPACITY, self.capacity), (USED, self.used), (ALLOCATABLE, self.allocatable),
                 (ALLOCATED, self.allocated), (MEASURED, self.measured))
        return {k: v for k, v in pairs if v is not None}


@dataclass(frozen=True, slots=True)
class NodeFree:
    """The largest free node (cpu cores, memory GiB, gpu devices); None = not stated."""

    cpu: float | None = None
    memory: float | None = None
    gpu: float | None = None

    def to_doc(self) -> dict[str, float]:
        return {k: v for k, v in ((CPU, self.cpu), (MEMORY, self.memory), (GPU, self.gpu)) if v is not None}


@dataclass(frozen=True, slots=True)
class MemberStatus:
    """A member's status document, typed; see the module docstring."""

    timestamp: str | None = None
    received_at: str | None = None
    source: str | None = None
    cpu: Resource | None = None
    memory: Resource | None = None
    gpu: Resource | None = None
    storage_capacity: float | None = None  # GiB; the section is written only with a capacity
    storage_available: float | None = None
    pods_used: float | None = None
    pods_capacity: float | None = None
    gpu_by_model: Mapping[str, Any] | None = None  # read by ``drods.scheduler.offers``
    storage_by_tier: Mapping[str, Any] | None = None
    largest_node_free: NodeFree | None = None
    network_in_mbps: float | None = None
    network_out_mbps: float | None = None
    water_level: float | None = None
    nodes_total: float | None = None
    nodes_ready: float | None = None
    kubernetes_version: str | None = None

    @classmethod
    def read(cls, doc: Mapping[str, Any] | None) -> MemberStatus | None:
        """The typed form of a stored document (None for none)."""
        if not doc:
            return None
        st, pods, lnf, net, nodes = (_section(doc, k) for k in (STORAGE, PODS, LARGEST_NODE_FREE, NETWORK, NODES))
        gbm, sbt = doc.get(GPU_BY_MODEL), doc.get(STORAGE_BY_TIER)
        ts, rcv, src, ver = doc.get(TIMESTAMP), doc.get(RECEIVED_AT), doc.get(SOURCE), doc.get(KUBERNETES_VERSION)
        return cls(
            timestamp=ts if isinstance(ts, str) else None,
            received_at=rcv if isinstance(rcv, str) else None,
            source=src if isinstance(src, str) else None,
            cpu=Resource.read(doc.get(CPU)), memory=Resource.read(doc.get(MEMORY)), gpu=Resource.read(doc.get(GPU)),
            storage_capacity=None if st is None else number(st, CAPACITY),
            storage_available=None if st is None else number(st, AVAILABLE),
            pods_used=None if pods is None else number(pods, USED),
            pods_capacity=None if pods is None else number(pods, CAPACITY),
            gpu_by_model=gbm if isinstance(gbm, Mapping) else None,
            storage_by_tier=sbt if isinstance(sbt, Mapping) else None,
            largest_node_free=None if lnf is None else NodeFree(*(number(lnf, k) for k in RESOURCE_SECTIONS)),
            network_in_mbps=None if net is None else number(net, IN_MBPS),
            network_out_mbps=None if net is None else number(net, OUT_MBPS),
            water_level=number(doc, WATER_LEVEL),
            nodes_total=None if nodes is None else number(nodes, TOTAL),
            nodes_ready=None if nodes is None else number(nodes, READY),
            kubernetes_version=ver if isinstance(ver, str) and ver else None,
        )

    def to_doc(self) -> dict[str, Any]:
        """The stored document: sections in this order, absent values omitted (never zero)."""
        doc: dict[str, Any] = {}
        for k, v in ((TIMESTAMP, self.timestamp), (RECEIVED_AT, self.received_at), (SOURCE, self.source)):
            if v is not None:
                doc[k] = v
        for k, res in ((CPU, self.cpu), (MEMORY, self.memory), (GPU, self.gpu)):
            if res is not None:
                doc[k] = res.to_doc()
        if self.storage_capacity is not None:
            doc[STORAGE] = {CAPACITY: self.storage_capacity, AVAILABLE: self.storage_available}
        pods = {k: v for k, v in ((USED, self.pods_used), (CAPACITY, self.pods_capacity)) if v is not None}
        if pods:
            doc[PODS] = pods
        for k, m in ((GPU_BY_MODEL, self.gpu_by_model), (STORAGE_BY_TIER, self.storage_by_tier)):
            if m is not None:
                doc[k] = m
        if self.largest_node_free is not None:
            doc[LARGEST_NODE_FREE] = self.largest_node_free.to_doc()
        if self.network_in_mbps is not None or self.network_out_mbps is not None:
            doc[NETWORK] = {IN_MBPS: self.network_in_mbps, OUT_MBPS: self.network_out_mbps,
                            RX_BPS: bytes_per_second(self.network_in_mbps),
                            TX_BPS: bytes_per_second(self.network_out_mbps)}
        if self.water_level is not None:
            doc[WATER_LEVEL] = self.water_level
        nodes = {k: v for k, v in ((TOTAL, self.nodes_total), (READY, self.nodes_ready)) if v is not None}
        if nodes:
            doc[NODES] = nodes
        if self.kubernetes_version is not None:
            doc[KUBERNETES_VERSION] = self.kubernetes_version
        return doc


def _section(doc: Mapping[str, Any], key: str) -> Mapping[str, Any] | None:
    sec = doc.get(key)
    return sec if isinstance(sec, Mapping) else None


def bytes_per_second(mbps: float | None) -> float | None:
    """Megabits per second as bytes per second (None stays None: unknown is not 0)."""
    return None if mbps is None else round(mbps * 1e6 / 8, 3)


def zero_if_absent(v: float | None) -> float:
    """A stated amount, or 0 for one not stated (where absence means nothing there)."""
    return 0.0 if v is None else v


def stored_document(raw: bytes) -> dict[str, Any] | None:
    """A stored status document as it was written (``/status/clusters/<name>``), None when it is not
    a JSON object: every reader of the documents decodes them this one way."""
    try:
        doc = jsondoc.loads(raw)
    except ValueError:
        return None
    return doc if isinstance(doc, dict) else None
