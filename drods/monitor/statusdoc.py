"""The per-cluster status document in the store, ``/status/clusters/<name>`` (SPEC A5, S2, C3).

One document per cluster, written by the monitoring ingest path only when the scheduler-visible
(rate-controlled, SPEC C8) status changed or a heartbeat is due::

    {
      "status":      <scheduler view: plain numbers, the contract the scheduler's snapshot reads>,
      "observed":    <NormalisedStatus.to_dict() of that same visible status: value/source/timestamp
                      per leaf, so every number says where it came from and how old it is (F5)>,
      "latest":      <NormalisedStatus.to_dict() of the accepted report behind this write, before rate
                      control: what the realtime view shows>,
      "report":      <the raw report that caused this write, extra fields kept>,
      "publishedAt": <RFC 3339 time of this write>
    }

The scheduler view is ``{"timestamp", "receivedAt", "source", "cpu": {"capacity", "allocatable",
"allocated", "used", "measured"}, "memory": {… GiB}, "gpu": {…}, "storage": {"capacity", "available"},
"pods": {"capacity", "used"}, "largestNodeFree": {"cpu", "memory", "gpu"},
"network": {"inMbps", "outMbps", "rxBytesPerSecond", "txBytesPerSecond"}, "waterLevel"}``; absent
measurements are omitted, never zero (traffic unknown in one direction is ``null``).
``allocatable``/``allocated``/``measured``/``pods.capacity`` come from the report's documented extra
fields (`ALLOCATION_EXTRAS`), which Kubernetes-reading collectors fill in. GPUs by model and storage
by tier (F1) come the same way, as maps of the same leaves (`ALLOCATION_MAPS`)::

    "gpuByModel": {"A100": {"capacity": 8, "allocatable": 8, "allocated": 3}},
    "storageByTier": {"ssd": {"capacity": 2000, "allocated": 250}}          # GiB

``observed`` is enough to rebuild the visible state (`status_from_dict`): that is how another API
replica, or this one after a restart, continues rate control from what the scheduler sees.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from drods.model import member_status as ms
from drods.model.timefmt import parse_rfc3339
from drods.monitor import report as r
from drods.monitor.report import Measured, NormalisedStatus, ResourceView, Source, iso

#: Extra report fields (beyond `MetricsReport`'s) that reach the scheduler view, with their place.
ALLOCATION_EXTRAS: dict[str, tuple[str, str]] = {
    "cpuAllocatable": ("cpu", "allocatable"),
    "cpuAllocated": ("cpu", "allocated"),
    "memoryAllocatable": ("memory", "allocatable"),
    "memoryAllocated": ("memory", "allocated"),
    "gpuAllocatable": ("gpu", "allocatable"),
    "gpuAllocated": ("gpu", "allocated"),
    "podsCapacity": ("pods", "capacity"),
    # measured use (metrics.k8s.io) when ``cpuUsage`` folds requests in: what autoscaling reads
    "cpuUsed": ("cpu", "measured"),
    "memoryUsed": ("memory", "measured"),
}

#: Extra report fields holding one ``{capacity, allocatable, allocated}`` leaf per GPU model / storage
#: tier; they reach the scheduler view under the same name.
ALLOCATION_MAPS = ("gpuByModel", "storageByTier")
_MAP_LEAVES = ("capacity", "allocatable", "allocated")

# Keys of the scheduler view that change on every report without the status changing.
_VOLATILE = ("timestamp", "receivedAt")

_GROUPS = ("cpu", "memory", "gpu", "storage")
_PARTS = ("capacity", "used", "utilisation")
_SOURCES: tuple[Source, ...] = ("push", "kubernetes", "prometheus")




def allocation_errors(extras: Mapping[str, Any]) -> list[dict[str, str]]:
    """Field errors for the documented extra fields (they bypass the report model's checks)."""
    errors: list[dict[str, str]] = []
    for name in ALLOCATION_EXTRAS:
        if name not in extras or extras[name] is None:
            continue
        v = extras[name]
        if not _amount(v):
            errors.append({"field": name, "message": "must be a finite non-negative number"})
    for name in ALLOCATION_MAPS:
        m = extras.get(name)
        if m is None:
            continue
        if not isinstance(m, Mapping):
            errors.append({"field": name, "message": "must be an object of {capacity, allocatable, allocated} "
                                                     "by GPU model / storage tier"})
            continue
        for key, leaf in m.items():
            if not key or not isinstance(leaf, Mapping):
                errors.append({"field": f"{name}.{key}", "message": "must be an object with capacity, "
                                                                    "allocatable or allocated"})
                continue
            for part, v in leaf.items():
                if part not in _MAP_LEAVES:
                    errors.append({"field": f"{name}.{key}.{part}",
                                   "message": f"unknown field; expected one of {', '.join(_MAP_LEAVES)}"})
                elif v is not None and not _amount(v):
                    errors.append({"field": f"{name}.{key}.{part}", "message": "must be a finite non-negative number"})
    return errors


def _amount(v: Any) -> bool:
    return not isinstance(v, bool) and isinstance(v, int | float) and math.isfinite(v) and v >= 0


def scheduler_view(status: NormalisedStatus) -> dict[str, Any]:
    """The compact document the scheduler's snapshot reads (plain numbers, absent = unknown)."""
    extras: dict[tuple[str, str], float] = {}
    for name, place in ALLOCATION_EXTRAS.items():
        v = status.extras.get(name)
        if isinstance(v, int | float) and not isinstance(v, bool) and math.isfinite(v) and v >= 0:
            extras[place] = float(v)
    maps: dict[str, dict[str, dict[str, float]] | None] = dict.fromkeys(ALLOCATION_MAPS)
    for name in ALLOCATION_MAPS:
        m = status.extras.get(name)
        if isinstance(m, Mapping):
            clean = {str(k): {p: float(v) for p, v in leaf.items() if p in _MAP_LEAVES and _amount(v)}
                     for k, leaf in m.items() if isinstance(leaf, Mapping)}
            maps[name] = clean or None
    free = [status.get(f"largestNodeFree.{k}") for k in ms.RESOURCE_SECTIONS]
    storage = status.storage
    return ms.MemberStatus(
        timestamp=iso(status.ts), received_at=iso(status.received_ts), source=status.source,
        cpu=_resource(status.cpu, ms.CPU, extras), memory=_resource(status.memory, ms.MEMORY, extras),
        gpu=_resource(status.gpu, ms.GPU, extras),
        storage_capacity=storage.capacity, storage_available=storage.free if storage.capacity is not None else None,
        pods_used=status.pods, pods_capacity=extras.get((ms.PODS, ms.CAPACITY)),
        gpu_by_model=maps[ms.GPU_BY_MODEL], storage_by_tier=maps[ms.STORAGE_BY_TIER],
        largest_node_free=ms.NodeFree(*free) if any(v is not None for v in free) else None,
        network_in_mbps=status.get(r.NETWORK_IN), network_out_mbps=status.get(r.NETWORK_OUT),
        water_level=status.water_level,
        nodes_total=_count(status.extras.get("nodes")), nodes_ready=_count(status.extras.get("readyNodes")),
        kubernetes_version=version if isinstance(version := status.extras.get("kubernetesVersion"), str) and version
        else None,
    ).to_doc()


def _count(v: Any) -> float | None:
    """A reported count (nodes), None unless an amount."""
    return float(v) if _amount(v) else None


def _resource(view: ResourceView, section: str, extras: Mapping[tuple[str, str], float]) -> ms.Resource:
    return ms.Resource(capacity=view.capacity, used=view.used, allocatable=extras.get((section, ms.ALLOCATABLE)),
                       allocated=extras.get((section, ms.ALLOCATED)), measured=extras.get((section, ms.MEASURED)))


def comparable(view: Mapping[str, Any]) -> dict[str, Any]:
    """The part of a scheduler view whose change is worth a store write."""
    return {k: v for k, v in view.items() if k not in _VOLATILE}




def _leaf(d: Any) -> Measured | None:
    if not isinstance(d, Mapping):
        return None
    v, ts = d.get("value"), parse_rfc3339(d.get("timestamp"))
    if isinstance(v, bool) or not isinstance(v, int | float) or ts is None or not math.isfinite(v):
        return None
    src = d.get("source")
    return Measured(float(v), src if src in _SOURCES else "push", ts)


def status_from_dict(d: Mapping[str, Any]) -> NormalisedStatus | None:
    """Inverse of `NormalisedStatus.to_dict` (None when the document is not one)."""
    cluster, ts = d.get("cluster"), parse_rfc3339(d.get("timestamp"))
    if not isinstance(cluster, str) or ts is None:
        return None
    values: dict[str, Measured] = {}

    def put(metric: str, leaf: Any) -> None:
        m = _leaf(leaf)
        if m is not None:
            values[metric] = m

    for group in _GROUPS:
        sec = d.get(group) or {}
        if isinstance(sec, Mapping):
            for part in _PARTS:
                put(f"{group}.{part}", sec.get(part))
    net = d.get("network") or {}
    if isinstance(net, Mapping):
        put(r.NETWORK_IN, net.get("inMbps"))
        put(r.NETWORK_OUT, net.get("outMbps"))
    lnf = d.get("largestNodeFree") or {}
    if isinstance(lnf, Mapping):
        for k in ("cpu", "memory", "gpu"):
            put(f"largestNodeFree.{k}", lnf.get(k))
    put(r.PODS, d.get("pods"))
    put(r.REQUEST_RATE, d.get("requestRate"))
    put(r.WATER_LEVEL, d.get("waterLevel"))
    src = d.get("source")
    extras = d.get("extras")
    return NormalisedStatus(
        cluster=cluster,
        ts=ts,
        received_ts=parse_rfc3339(d.get("receivedAt")) or ts,
        source=src if src in _SOURCES else "push",
        values=values,
        clock_skew_clamped=bool(d.get("clockSkewClamped")),
        extras=dict(extras) if isinstance(extras, Mapping) else {},
    )


def build_doc(visible: NormalisedStatus, report: Mapping[str, Any], published_at: float,
              latest: NormalisedStatus | None = None) -> dict[str, Any]:
    return {
        "status": scheduler_view(visible),
        "observed": visible.to_dict(),
        **({"latest": latest.to_dict()} if latest is not None else {}),
        "report": dict(report),
        "publishedAt": iso(published_at),
    }
