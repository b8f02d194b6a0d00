"""Data locality score (F4): a workload goes where the data it reads already is.

For each Dataset the task reads (``datasets: [{name, readGiBPerHour}]``) the nearest copy feeds a
candidate cluster c: nothing when c holds a copy, else the transfer cost from copy d

    cost_d(c) = readGiBPerHour × egress(d) × refBandwidth / bandwidth(d, c)

— bytes ÷ bandwidth between the copy and the cluster, times the copy cluster's egress price
(``spec.cost.egressGiB``; ``defaultEgressGiB``, 0.09, where a cluster has no price), expressed as the
egress bill over a reference link (``refBandwidthMbps``, 1000): a copy behind a link half as fast
costs twice as much. bandwidth(d, c) is the measured pair from C2's network status when there is
one, else the narrower of the two clusters' ``network.bandwidthMbps``, else the reference. The
nearest copy is the one of least cost. cost(c) is the sum over datasets; the cheapest feasible
cluster scores 100, the dearest 0 (min-max), and the other scores weigh it against compute
headroom. ``moved_gib_per_hour`` is what a placement will move across domains; every decision
records it. Skipped before any array work when the task reads no known dataset.

Data size counts: a cluster holding no copy also pays the one-time transfer of the whole
dataset (``spec.sizeGiB``) from its nearest copy, priced like the reads (size × egress × reference ÷
link bandwidth) and spread over ``transferAmortiseHours`` (24) so it adds to the hourly read cost. A
dataset with no declared size is charged nothing for the copy (its size is unknown).

A workload with a stateful topology (F3, ``placement.statefulTopology``) writes: its cost is measured
from each dataset's Primary copy only (every copy when a dataset names no Primary), so its primary
lands where the data's writes land. The cache planner (`drods.controllers.cache_planner`) prices a
reader's nearest copy with the same ``nearest_copy`` to decide whether the data is far.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from drods.scheduler.arrays import BoolArr, FloatArr, IntArr
from drods.scheduler.interface import PluginBase
from drods.scheduler.snapshot import Snapshot
from drods.scheduler.task import TaskInfo

EGRESS = 3  # column of ``Snapshot.cost``
DEFAULT_EGRESS_GIB = 0.09
REF_BANDWIDTH_MBPS = 1000.0
TRANSFER_AMORTISE_HOURS = 24.0


def transfer_cost(gib: float, egress: float, bandwidth: FloatArr, ref_bandwidth: float = REF_BANDWIDTH_MBPS,
                  ) -> FloatArr:
    """Per hour, reading ``gib`` GiB/h over links of ``bandwidth`` Mbps from a copy whose cluster charges
    ``egress`` per GiB: the egress bill scaled by reference ÷ link bandwidth (unknown: the reference;
    0 Mbps counts as 1)."""
    slow = np.where(np.isnan(bandwidth), 1.0, ref_bandwidth / np.maximum(bandwidth, 1.0))
    return gib * egress * slow  # type: ignore[no-any-return]


def egress_prices(snap: Snapshot, default: float = DEFAULT_EGRESS_GIB) -> FloatArr:
    """Each cluster's egress price per GiB (``default`` where it has no price)."""
    egress = snap.cost[:snap.n, EGRESS]
    return np.where(np.isnan(egress), default, egress)  # type: ignore[no-any-return]


def nearest_copy(snap: Snapshot, rows: list[int], egress: FloatArr, ref_bandwidth: float = REF_BANDWIDTH_MBPS,
                 sources: bool = False) -> tuple[FloatArr, IntArr | None]:
    """For every cluster, the cost per GiB/h of reading from the cheapest of the copies on ``rows``
    (0 on a copy), and — with ``sources`` — that copy's row."""
    n = snap.n
    best = np.full(n, np.inf)
    src = np.full(n, rows[0], dtype=np.intp) if sources else None
    for d in rows:
        c = transfer_cost(1.0, float(egress[d]), snap.bandwidth_between(d), ref_bandwidth)
        if src is not None:
            better = c < best
            src[better] = d
        np.minimum(best, c, out=best)
    best[rows] = 0.0
    if src is not None:
        src[rows] = rows
    return best, src


def known_reads(task: TaskInfo, snap: Snapshot) -> list[tuple[float, list[int], float | None]]:
    """(GiB/h, rows holding a copy, declared size GiB or None) for each dataset the task reads that
    the snapshot knows; for a
    stateful topology the Primary copy only, when the dataset names one."""
    out: list[tuple[float, list[int], float | None]] = []
    for key, gib in task.datasets:
        copies = snap.datasets.get(key)
        if task.topology is not None and key in snap.dataset_primaries:
            copies = (snap.dataset_primaries[key],)
        if copies:
            rows = [r for r in (snap.index.get(c) for c in copies) if r is not None]
            if rows:
                out.append((gib, rows, snap.dataset_sizes.get(key)))
    return out


def moved_gib_per_hour(task: TaskInfo, snap: Snapshot, rows: IntArr, counts: IntArr) -> float | None:
    """GiB/h the placement reads from another cluster (replicas away from every copy, pro rata)."""
    if not task.datasets or rows.size == 0:
        return None
    total = float(counts.sum())
    if total <= 0:
        return None
    moved = 0.0
    for key, gib in task.datasets:
        copies = set(snap.datasets.get(key, ()))
        away = sum(int(c) for r, c in zip(rows.tolist(), counts.tolist(), strict=True)
                   if snap.names[r] not in copies)
        moved += gib * away / total
    return round(moved, 4)


class DataLocality(PluginBase):
    name = "DataLocality"
    affinity = True

    def __init__(self, args: dict[str, Any] | None = None) -> None:
        super().__init__(args)
        self.default_egress = float(self.args.get("defaultEgressGiB", DEFAULT_EGRESS_GIB))
        self.ref_bandwidth = float(self.args.get("refBandwidthMbps", REF_BANDWIDTH_MBPS))
        self.amortise_hours = max(float(self.args.get("transferAmortiseHours", TRANSFER_AMORTISE_HOURS)), 1e-9)

    def skip(self, task: TaskInfo, snap: Snapshot) -> bool:
        return not task.datasets or not known_reads(task, snap)

    def score(self, task: TaskInfo, snap: Snapshot, mask: BoolArr) -> FloatArr:
        n = snap.n
        egress = egress_prices(snap, self.default_egress)
        cost = np.zeros(n)
        for gib, rows, size in known_reads(task, snap):
            once = (size or 0.0) / self.amortise_hours  # the one-time copy of the dataset, per hour
            cost += (gib + once) * nearest_copy(snap, rows, egress, self.ref_bandwidth)[0]
        feas = cost[mask]
        if feas.size == 0:
            return np.full(n, 100.0)
        lo = float(feas.min())
        hi = float(feas.max())
        if hi - lo <= 1e-12:
            return np.full(n, 100.0)
        return np.clip(100.0 * (hi - cost) / (hi - lo), 0.0, 100.0)  # type: ignore[no-any-return]
