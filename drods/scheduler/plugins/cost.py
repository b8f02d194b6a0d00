"""Cost score (F6): cheaper per-replica hourly price scores higher, min-max normalised over the
feasible clusters; clusters without a cost model score a neutral 50."""

from __future__ import annotations

import numpy as np

from drods.scheduler.interface import BoolArr, FloatArr, PluginBase
from drods.scheduler.snapshot import Snapshot
from drods.scheduler.task import TaskInfo


class Cost(PluginBase):
    name = "Cost"

    def score(self, task: TaskInfo, snap: Snapshot, mask: BoolArr) -> FloatArr:
        n = snap.n
        prices = snap.cost[:n, :3]
        c = prices @ task.req[:3]
        known = ~np.isnan(c) & mask
        if not known.any():
            return np.full(n, 50.0)
        lo = float(c[known].min())
        hi = float(c[known].max())
        s = np.full(n, 100.0) if hi - lo <= 1e-12 else 100.0 * (hi - c) / (hi - lo)
        return np.where(np.isnan(c), 50.0, np.clip(s, 0.0, 100.0))  # type: ignore[no-any-return]
