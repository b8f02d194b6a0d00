"""Cluster locality score: clusters already hosting this workload score 100 (avoid churn)."""

from __future__ import annotations

import numpy as np

from drods.scheduler.arrays import BoolArr, FloatArr
from drods.scheduler.interface import PluginBase
from drods.scheduler.snapshot import Snapshot
from drods.scheduler.task import TaskInfo


class ClusterLocality(PluginBase):
    name = "ClusterLocality"

    def score(self, task: TaskInfo, snap: Snapshot, mask: BoolArr) -> FloatArr:
        s = np.zeros(snap.n)
        if task.current_rows.size:
            s[task.current_rows] = 100.0
        return s
