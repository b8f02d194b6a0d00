"""Least water level score: the more headroom below the effective limit, the higher (0..100).
The multi-cluster cousin of trimaran's TargetLoadPacking / Koordinator's LoadAware."""

from __future__ import annotations

import numpy as np

from drods.scheduler.arrays import BoolArr, FloatArr
from drods.scheduler.capacity import replica_shape
from drods.scheduler.interface import PluginBase
from drods.scheduler.snapshot import Snapshot
from drods.scheduler.task import TaskInfo


class LeastWaterLevel(PluginBase):
    name = "LeastWaterLevel"

    def score(self, task: TaskInfo, snap: Snapshot, mask: BoolArr) -> FloatArr:
        free = 1.0 - snap.water_level * replica_shape(task, snap).inv_limit  # (limit - wl) / limit
        return 100.0 * np.minimum(np.maximum(free, 0.0, out=free), 1.0, out=free)  # type: ignore[no-any-return]
