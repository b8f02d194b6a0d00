"""Workload affinity filter (Karmada 1.17 ``placement.workloadAffinity``): hard rules between
workloads of one group (same namespace, same value under ``groupByLabelKey``).

* affinity — only the clusters where a placed peer runs; while no peer runs anywhere (the group's
  first workload) nothing is constrained;
* anti-affinity — no cluster where a placed peer runs.

Each is a boolean mask over the cluster rows of the peers' placements (`Snapshot.workload_groups`,
`Snapshot.workload_placements`)."""

from __future__ import annotations

import heapq

import numpy as np

from drods.scheduler.arrays import BoolArr
from drods.scheduler.interface import FilterOutcome, PluginBase, Rejection, reject
from drods.scheduler.snapshot import Snapshot
from drods.scheduler.task import TaskInfo


def peer_rows(snap: Snapshot, group: str, workload: str | None) -> tuple[BoolArr, list[str]]:
    """The rows where ``group``'s other workloads run, and (the first three by name of) those placed."""
    index, placements = snap.index, snap.workload_placements
    rows: list[int] = []
    placed: list[str] = []
    for peer in snap.workload_groups.members(group):
        got = [index[c] for c, k in placements.get(peer, ()) if k > 0 and c in index] if peer != workload else ()
        if got:
            rows.extend(got)
            placed.append(peer)
    where = np.zeros(snap.n, dtype=bool)
    where[rows] = True
    return where, heapq.nsmallest(3, placed)


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
                                  f"{', '.join(placed)} runs here", drop))
        if task.anti_affinity_group:
            where, placed = peer_rows(snap, task.anti_affinity_group, task.workload)
            drop = mask & where
            if drop.any():
                mask = mask & ~where
                out.append(reject(self.name, f"workload anti-affinity {_label(task.anti_affinity_group)}: "
                                  f"{', '.join(placed)} runs here", drop))
        return mask, out
