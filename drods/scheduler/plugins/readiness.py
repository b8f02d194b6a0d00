"""Readiness filter: skip clusters that are not Ready, have reported no status, or are cordoned.

Cordoned (``spec.unschedulable``) means no new placements and nothing moves: a cluster the workload
already runs on passes and keeps its replicas but gets no more (``max_replicas`` is 0 there; a
Duplicated copy follows the workload's count), as Karmada's cordon taint does (NoSchedule, passed by
``TargetContains``).

A NotReady cluster the workload already runs on that carries the health controller's not-ready taint
(``cluster.multicluster.io/not-ready:NoExecute``) is held the same way until its toleration runs out:
as in Karmada, a scale or any decision not from scratch keeps its replicas there and places none more,
and the move is the failover controller's, once the toleration's seconds have passed
(`drods.controllers.failover`). Whether the taint is still tolerated is `TaintToleration`'s to judge
(a binding without a toleration of it stays for the failover controller's default seconds). A decision
from scratch (``rebalance``: a forced reschedule), failover's move off it (the cluster is no longer
current then), a workload not there yet, and a NotReady cluster without the taint (nothing would move
it) leave it out.
"""

from __future__ import annotations

import numpy as np

from drods.model.taints import NOT_READY_TAINT
from drods.scheduler.arrays import BoolArr, FloatArr, IntArr
from drods.scheduler.interface import FilterOutcome, PluginBase, Rejection, none_more_on, reject
from drods.scheduler.snapshot import Snapshot
from drods.scheduler.task import TaskInfo

_NO_ROWS: IntArr = np.zeros(0, dtype=np.intp)


def not_ready_tainted(snap: Snapshot) -> BoolArr | None:
    """Rows carrying the health controller's not-ready taint (whatever its value); None: none do.
    Cached per topology version (taints are topology)."""
    if "not-ready-tainted" in snap.cache:
        return snap.cache["not-ready-tainted"]  # type: ignore[no-any-return]
    out: BoolArr | None = None
    for (key, _value, effect), m in snap.indexes.taints.items():
        if key == NOT_READY_TAINT and effect == "NoExecute":
            out = m[:snap.n].copy() if out is None else out | m[:snap.n]
    snap.cache["not-ready-tainted"] = out
    return out


def _held(task: TaskInfo, snap: Snapshot) -> tuple[IntArr, IntArr]:
    """The task's current clusters that keep what they have: those cordoned, and those NotReady with
    the not-ready taint (and a status)."""
    cur = task.current_rows
    if task.rebalance or not cur.size:
        return _NO_ROWS, _NO_ROWS
    tainted = not_ready_tainted(snap)
    not_ready = _NO_ROWS if tainted is None else cur[~snap.ready[cur] & snap.has_status[cur] & tainted[cur]]
    return cur[snap.unschedulable[cur]], not_ready


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
        cordoned, not_ready = _held(task, snap)
        for cond, reason in (
            (snap.ready[:n], "cluster not ready"),
            (snap.has_status[:n], "no resource status reported"),
        ):
            drop = mask & ~cond
            drop[not_ready] = False
            if drop.any():
                out.append(reject(self.name, reason, drop))
                mask = mask & ~drop
        drop = mask & snap.unschedulable[:n]
        if drop.any():
            drop[cordoned] = False
            if drop.any():
                out.append(reject(self.name, "cluster cordoned (unschedulable)", drop))
                mask = mask & ~drop
        return mask, out

    def max_replicas(self, task: TaskInfo, snap: Snapshot) -> FloatArr | None:
        """No more replicas on a kept cordoned or NotReady cluster (None: the task keeps none)."""
        if task.division == "Duplicated" or snap.status_cache.get("readiness-all-ok"):
            return None
        return none_more_on(np.concatenate(_held(task, snap)), snap.n)
