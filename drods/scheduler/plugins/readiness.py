"""Readiness filter: skip clusters that are not Ready, have reported no status, or are cordoned.

Cordoned (``spec.unschedulable``) means no new placements and nothing moves: a cluster the workload
already runs on passes and keeps its replicas but gets no more (``max_replicas`` is 0 there; a
Duplicated copy follows the workload's count), as Karmada's cordon taint does (NoSchedule, passed by
``TargetContains``). A NotReady cluster is not kept: failover moves its replicas.
"""

from __future__ import annotations

import numpy as np

from drods.scheduler.arrays import BoolArr, FloatArr, IntArr
from drods.scheduler.interface import FilterOutcome, PluginBase, Rejection, none_more_on, reject
from drods.scheduler.snapshot import Snapshot
from drods.scheduler.task import TaskInfo

_NO_ROWS: IntArr = np.zeros(0, dtype=np.intp)


def _held(task: TaskInfo, snap: Snapshot) -> IntArr:
    """The task's current clusters that are cordoned (they keep what they have)."""
    cur = task.current_rows
    if task.rebalance or not cur.size:
        return _NO_ROWS
    return cur[snap.unschedulable[cur]]  # type: ignore[no-any-return]


class Readiness(PluginBase):
    name = "Readiness"

    def filter(self, task: TaskInfo, snap: Snapshot, mask: BoolArr) -> FilterOutcome:
        n = snap.n
        all_ok = snap.status_cache.get("readiness-all-ok")
        if all_ok is None:
            all_ok = bool(snap.ready[:n].all() and snap.has_status[:n].all() and not snap.unschedulable[:n].any())
            snap.status_cache["readiness-all-ok"] = all_ok
        if all_ok:
            return mask, []
        out: list[Rejection] = []
        for cond, reason in (
            (snap.ready[:n], "cluster not ready"),
            (snap.has_status[:n], "no resource status reported"),
        ):
            drop = mask & ~cond
            if drop.any():
                out.append(reject(self.name, reason, drop))
                mask = mask & cond
        drop = mask & snap.unschedulable[:n]
        if drop.any():
            drop[_held(task, snap)] = False
            if drop.any():
                out.append(reject(self.name, "cluster cordoned (unschedulable)", drop))
                mask = mask & ~drop
        return mask, out

    def max_replicas(self, task: TaskInfo, snap: Snapshot) -> FloatArr | None:
        """No more replicas on a kept cordoned cluster (None: the task keeps none)."""
        if task.division == "Duplicated" or snap.status_cache.get("readiness-all-ok"):
            return None
        return none_more_on(_held(task, snap), snap.n)
