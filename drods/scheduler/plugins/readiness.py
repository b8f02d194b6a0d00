"""Readiness filter: skip clusters that are not Ready, have reported no status, or are cordoned."""

from __future__ import annotations

from drods.scheduler.arrays import BoolArr
from drods.scheduler.interface import FilterOutcome, PluginBase, Rejection, reject
from drods.scheduler.snapshot import Snapshot
from drods.scheduler.task import TaskInfo


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
            (~snap.unschedulable[:n], "cluster cordoned (unschedulable)"),
        ):
            drop = mask & ~cond
            if drop.any():
                out.append(reject(self.name, reason, drop))
                mask = mask & cond
        return mask, out
