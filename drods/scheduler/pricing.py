"""The cluster price model (F6): what one replica of a task costs per hour on each cluster.

price = cpu × cpuCoreHour + memory × memoryGiBHour + gpu × (gpuHourByModel[model] or gpuHour)
        + egressGiBPerHour × egressGiB

(the task's per-replica demand and egress, the cluster's ``spec.cost``). A cluster without a cost
model has no price (NaN). Spot prices are what a replica pays; a scorer may weigh them up by a
risk premium for interruption, the bill (``estimatedHourlyCost``) never does.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from drods.model.cluster import ClusterSpec
from drods.scheduler.arrays import FloatArr, IntArr
from drods.scheduler.resources import CPU, GPU, MEM
from drods.scheduler.snapshot import Snapshot
from drods.scheduler.task import TaskInfo

EGRESS = 3  # column of ``Snapshot.cost``


def priced(snap: Snapshot) -> bool:
    """True when at least one cluster has a cost model (cached until the topology changes)."""
    hit = snap.cache.get("priced")
    if hit is None:
        hit = bool((~np.isnan(snap.cost[: snap.n, CPU])).any())
        snap.cache["priced"] = hit
    return bool(hit)


def _gpu_price(model: str) -> Callable[[ClusterSpec], float]:
    def fn(spec: ClusterSpec) -> float:
        c = spec.cost
        if c is None:
            return float("nan")
        return float(c.gpuHourByModel.get(model, c.gpuHour))
    return fn


def _spot(spec: ClusterSpec) -> float:
    return 1.0 if spec.cost is not None and spec.cost.market == "Spot" else 0.0


def spot_mask(snap: Snapshot) -> FloatArr:
    """1.0 on clusters whose prices are spot prices, else 0.0."""
    return snap.spec_column("spot", _spot)


def replica_price(task: TaskInfo, snap: Snapshot, spot_premium: float = 0.0,
                  rows: IntArr | None = None) -> FloatArr:
    """Hourly price of one replica per cluster, or per row of ``rows`` (NaN where the cluster has no
    cost model)."""
    at: IntArr | slice = slice(0, snap.n) if rows is None else rows
    c = snap.cost[at]
    req = task.req
    price = c[:, CPU] * req[CPU] + c[:, MEM] * req[MEM]
    if req[GPU] > 0:
        model = task.gpu_model
        gp = snap.spec_column(("gpuPrice", model), _gpu_price(model))[at] if model else c[:, GPU]
        price = price + gp * req[GPU]
    if task.egress_gib_per_hour:
        price = price + c[:, EGRESS] * task.egress_gib_per_hour
    if spot_premium:
        price = price * (1.0 + spot_premium * spot_mask(snap)[at])
    return price  # type: ignore[no-any-return]


def hourly_cost(task: TaskInfo, snap: Snapshot, rows: IntArr, counts: IntArr) -> float | None:
    """The bill of a placement (replicas × price); None when none of its clusters is priced."""
    if rows.size == 0 or not priced(snap):
        return None
    p = replica_price(task, snap, rows=rows)
    bill = float(np.dot(p, counts))
    if bill == bill:  # not NaN: every cluster of the placement is priced
        return round(bill, 4)
    known = ~np.isnan(p)
    if not known.any():
        return None
    return round(float((p[known] * counts[known]).sum()), 4)
