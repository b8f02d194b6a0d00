"""Network filter (S3 network dimension): minimum bandwidth and maximum latency to the task's
network identifier (a cluster on that identifier has latency 0)."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from drods.scheduler.arrays import BoolArr, FloatArr, IntArr
from drods.scheduler.interface import FilterOutcome, PluginBase, Rejection, reject
from drods.scheduler.snapshot import Snapshot
from drods.scheduler.task import TaskInfo


def latency_to(snap: Snapshot, identifier: str) -> FloatArr:
    """Latency (ms) from each cluster to ``identifier``; NaN when unknown."""
    n = snap.n
    arr = snap.latency_array(identifier)
    lat = arr[:n].copy() if arr is not None else np.full(n, np.nan)
    code = snap.indexes.vocab["network"].get(identifier)
    if code is not None:
        lat[snap.indexes.topo["network"][:n] == code] = 0.0
    row = snap.index.get(identifier)
    if row is not None:
        lat[row] = 0.0
    return lat


def latency_detail(reason: str, lat: FloatArr, measured: str = "") -> Callable[[IntArr], Callable[[int], str]]:
    """A rejection's per-cluster text: the reason and that cluster's latency (``measured``: from where)."""
    unit = f"ms {measured}" if measured else "ms"

    def make(rows: IntArr) -> Callable[[int], str]:
        vals = lat[rows]
        return lambda k: f"{reason} (latency unknown)" if np.isnan(vals[k]) else f"{reason} ({vals[k]:g} {unit})"
    return make


class NetworkFit(PluginBase):
    name = "NetworkFit"

    def filter(self, task: TaskInfo, snap: Snapshot, mask: BoolArr) -> FilterOutcome:
        out: list[Rejection] = []
        n = snap.n
        if task.min_bandwidth_mbps is not None:
            bw = snap.bandwidth[:n]
            unknown = np.isnan(bw)
            drop = mask & unknown
            if drop.any():
                out.append(reject(self.name, "bandwidth unknown", drop))
                mask = mask & ~unknown
            low = bw < task.min_bandwidth_mbps
            drop = mask & low
            if drop.any():
                out.append(reject(self.name, f"bandwidth below {task.min_bandwidth_mbps:g} Mbps", drop))
                mask = mask & ~low
        if task.max_latency_ms is not None and task.network_id:
            lat = latency_to(snap, task.network_id)
            unknown = np.isnan(lat)
            drop = mask & unknown
            if drop.any():
                out.append(reject(self.name, f"latency to {task.network_id} unknown", drop))
                mask = mask & ~unknown
            far = lat > task.max_latency_ms
            drop = mask & far
            if drop.any():
                reason = f"latency to {task.network_id} above {task.max_latency_ms:g} ms"
                out.append(reject(self.name, reason, drop, latency_detail(reason, lat)))
                mask = mask & ~far
        return mask, out
