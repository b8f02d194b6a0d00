"""Spread constraint filter: clusters outside any group of a constraint are dropped, and a
constraint whose ``minGroups`` cannot be met by the feasible clusters makes the task
Unschedulable with a reason naming the shortfall. Choosing which groups to use (maxGroups) happens
at selection time in the framework."""

from __future__ import annotations

import numpy as np

from drods.scheduler.arrays import BoolArr
from drods.scheduler.interface import FilterOutcome, PluginBase, Rejection, reject
from drods.scheduler.snapshot import Snapshot
from drods.scheduler.task import TaskInfo


def feasible_groups(codes: np.ndarray, mask: BoolArr, by_cluster: bool) -> int:
    if by_cluster:
        return int(mask.sum())
    return int(np.unique(codes[mask]).size)


class SpreadConstraint(PluginBase):
    name = "SpreadConstraint"

    def filter(self, task: TaskInfo, snap: Snapshot, mask: BoolArr) -> FilterOutcome:
        out: list[Rejection] = []
        for c in task.spread:
            by = c.spreadByLabel if c.spreadByLabel is not None else (c.spreadByField or "cluster")
            by_cluster = c.spreadByLabel is None and by == "cluster"
            codes = snap.group_codes(c.spreadByField, c.spreadByLabel)
            if not by_cluster:
                none = codes < 0
                drop = mask & none
                if drop.any():
                    out.append(reject(self.name, f"no {by} set (spread by {by})", drop))
                    mask = mask & ~none
            if c.minGroups:
                # fewer replicas than minGroups is no refusal (Karmada's neither): the groups are chosen
                # and the division gives the first ones a replica each while there are replicas to give
                k = feasible_groups(codes, mask, by_cluster)
                if k < c.minGroups and mask.any():
                    out.append(reject(self.name, f"spread by {by}: {k} feasible groups < minGroups "
                                      f"{c.minGroups}", mask))
                    mask = np.zeros_like(mask)
                    break
        return mask, out
