"""Workload affinity filter (Karmada 1.17 ``placement.workloadAffinity``): hard rules between
workloads of one group (same namespace, same value under ``groupByLabelKey``).

* affinity — only the clusters where a placed peer runs; while no peer runs anywhere (the group's
  first workload) nothing is constrained;
* anti-affinity — no cluster where a placed peer runs.

Each is a boolean mask over the cluster rows of the peers' placements (`Snapshot.workload_groups`,
`Snapshot.workload_placements`)."""

from __future__ import annotations

import numpy as np

from drods.scheduler.arrays import BoolArr
from drods.scheduler.interface import FilterOutcome, PluginBase, Rejection, reject
from drods.scheduler.snapshot import Snapshot
from drods.scheduler.task import TaskInfo


def peer_rows(snap: Snapshot, group: str, workload: str | None) -> tuple[BoolArr, list[str]]:
    """The rows where ``group``'s other workloads run, and which of them run anywhere."""
    where = np.zeros(snap.n, dtype=bool)
    placed: list[str] = []
    for peer in snap.workload_groups.peers(group, workload):
        rows = [r for r in (snap.index.get(c) for c, k in snap.workload_placements.get(peer, ()) if k > 0)
                if r is not None]
        if rows:
            where[rows] = True
            placed.append(peer)
    return where, placed


def _label(group: str) -> str:
    return group.partition("/")[2] or group


class WorkloadAffinity(PluginBase):
    name = "WorkloadAffinity"

    def filter(self, task: TaskInfo, snap: Snapshot, mask: BoolArr) -> FilterOutcome:
        out: list[Rejection] = []
        if task.affinity_group:
            where, placed = peer_rows(snap, task.affinity_group, task.workload)
            drop = mask & ~where
            if placed and drop.any():
                mask = mask & where
                out.append(reject(self.name, f"workload affinity {_label(task.affinity_group)}: none of "
                                  f"{', '.join(placed[:3])} runs here", drop))
        if task.anti_affinity_group:
            where, placed = peer_rows(snap, task.anti_affinity_group, task.workload)
            drop = mask & where
            if drop.any():
                mask = mask & ~where
                out.append(reject(self.name, f"workload anti-affinity {_label(task.anti_affinity_group)}: "
                                  f"{', '.join(placed[:3])} runs here", drop))
        return mask, out
