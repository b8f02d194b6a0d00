"""Explicit target filter (S9): a task naming its clusters is confined to them; the other filters
still run, so a named cluster that cannot fit the task gets its own clear reason."""

from __future__ import annotations

from drods.scheduler.arrays import BoolArr
from drods.scheduler.interface import FilterOutcome, PluginBase, reject
from drods.scheduler.snapshot import Snapshot
from drods.scheduler.task import TaskInfo


class TargetClusters(PluginBase):
    name = "TargetClusters"

    def filter(self, task: TaskInfo, snap: Snapshot, mask: BoolArr) -> FilterOutcome:
        if not task.targets:
            return mask, []
        _, missing = snap.rows_of(task.targets)
        task.missing_targets = tuple(missing)
        ok = snap.name_mask(task.targets)
        drop = mask & ~ok
        if not drop.any():
            return mask, []
        return mask & ok, [reject(self.name, "not in targetClusters", drop)]
