"""Least water level score: the more headroom below the effective limit, the higher (0..100).
The multi-cluster cousin of trimaran's TargetLoadPacking / Koordinator's LoadAware."""

from __future__ import annotations

import numpy as np

from drods.scheduler.interface import BoolArr, FloatArr, PluginBase
from drods.scheduler.plugins.water_level_limit import effective_limit
from drods.scheduler.snapshot import Snapshot
from drods.scheduler.task import TaskInfo


class LeastWaterLevel(PluginBase):
    name = "LeastWaterLevel"

    def score(self, task: TaskInfo, snap: Snapshot, mask: BoolArr) -> FloatArr:
        lim = effective_limit(task, snap)
        return 100.0 * np.clip((lim - snap.water_level) / lim, 0.0, 1.0)  # type: ignore[no-any-return]
