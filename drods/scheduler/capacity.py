"""What the capacity plugins (ResourceFit, WaterLevelLimit, BalancedAllocation) need of one
replica shape, computed once per status and shared across plugins and decisions.

Everything here depends on the task's per-replica request, its water-level limit and the fleet's
status and spec, never on assumed placements, so it is cached in ``Snapshot.status_cache`` and
survives the assume/forget of every decision; a status or spec change drops it.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from drods.scheduler.arrays import FloatArr
from drods.scheduler.resources import CPU, MEM
from drods.scheduler.snapshot import Snapshot
from drods.scheduler.task import TaskInfo

EPS = 1e-9


@dataclass(frozen=True, slots=True)
class ReplicaShape:
    """Per-shape constants over the fleet (arrays are read-only)."""

    rs: tuple[int, ...]          # requested resources
    req: tuple[float, ...]       # req[rs]
    need: tuple[float, ...]      # req[rs] - EPS: free below this cannot hold one replica
    node_rs: tuple[int, ...]     # requested resources a single node must hold (cpu, memory, gpu)
    node_need: tuple[float, ...]
    wl_rs: tuple[int, ...]       # requested among cpu, memory (those raise the water level)
    limit: FloatArr              # (n,) min(task limit, cluster limit)
    limit_eps: FloatArr          # limit + EPS: a water level above this is over the limit
    inv_limit: FloatArr          # 1 / limit
    step: FloatArr               # (n, 2) cpu and memory fraction one replica adds; inf where none allocatable
    room_base: FloatArr          # (n,) limit - status water-level offset
    per_replica: FloatArr        # (n, len(wl_rs)) allocatable / request: replicas per unit of fraction


def replica_shape(task: TaskInfo, snap: Snapshot) -> ReplicaShape:
    """The cached ``ReplicaShape`` of ``task`` on ``snap`` (also memoised on the task's cycle cache)."""
    hit = task.cache.get("shape")
    if hit is not None:
        return hit  # type: ignore[no-any-return]
    req = task.req
    ck = ("shape", req.tobytes(), task.limit)
    shape: ReplicaShape | None = snap.status_cache.get(ck)
    if shape is None:
        n = snap.n
        rs = task.requested
        node_rs = tuple(r for r in rs if r < 3)
        a2 = snap.alloc[:n, :2]
        with np.errstate(divide="ignore", invalid="ignore"):
            step = np.where(a2 > 0, req[:2] / np.where(a2 > 0, a2, 1.0), np.inf)
        limit = np.minimum(snap.limit[:n], task.limit)
        wl_rs = tuple(r for r in (CPU, MEM) if req[r] > 0)
        shape = ReplicaShape(
            rs=rs, req=tuple(req[list(rs)].tolist()), need=tuple((req[list(rs)] - EPS).tolist()),
            node_rs=node_rs, node_need=tuple((req[list(node_rs)] - EPS).tolist()),
            wl_rs=wl_rs, limit=limit, limit_eps=limit + EPS, inv_limit=1.0 / limit, step=step,
            room_base=limit - snap.wl_offset[:n], per_replica=snap.alloc[:n, list(wl_rs)] / req[list(wl_rs)],
        )
        for a in (shape.limit, shape.limit_eps, shape.inv_limit, shape.step,
                  shape.room_base, shape.per_replica):
            a.flags.writeable = False
        snap.status_cache[ck] = shape
    task.cache["shape"] = shape
    return shape
