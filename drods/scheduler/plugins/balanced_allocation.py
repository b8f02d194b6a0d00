"""Balanced allocation score: after one more replica, cpu/memory (and gpu when requested) load
fractions should be close to each other, so no resource is stranded (Kubernetes' plugin of the
same name)."""

from __future__ import annotations

import numpy as np

from drods.scheduler.arrays import BoolArr, FloatArr
from drods.scheduler.capacity import replica_shape
from drods.scheduler.interface import PluginBase
from drods.scheduler.resources import GPU
from drods.scheduler.snapshot import Snapshot
from drods.scheduler.task import TaskInfo


class BalancedAllocation(PluginBase):
    name = "BalancedAllocation"

    def score(self, task: TaskInfo, snap: Snapshot, mask: BoolArr) -> FloatArr:
        n = snap.n
        if task.req[GPU] > 0:
            cols = [0, 1, GPU]
            alloc = snap.alloc[:n, cols]
            used = snap.load[:n, cols] + snap.ledger.arr[:n, cols] + task.req[cols]
            frac = np.where(alloc > 0, used / np.where(alloc > 0, alloc, 1.0), 1.0)
            np.clip(frac, 0.0, 1.0, out=frac)
            return 100.0 * (1.0 - (frac.max(axis=1) - frac.min(axis=1)))  # type: ignore[no-any-return]
        # cpu and memory: the current fractions plus one replica's step (inf, hence 1, where none allocatable)
        frac = snap.fractions + replica_shape(task, snap).step
        np.minimum(np.maximum(frac, 0.0, out=frac), 1.0, out=frac)  # np.clip, at half its call cost
        gap = np.abs(frac[:, 0] - frac[:, 1])
        gap *= -100.0
        gap += 100.0
        return gap
