"""Region/zone preference score: 100 in a preferred zone, ``regionScore`` (default 70) in a preferred
region. Without explicit preferences the regions/zones the workload runs in now are preferred,
so replicas added on scale-up stay close to the existing ones (follow-up scheduling, F3)."""

from __future__ import annotations

import numpy as np

from drods.scheduler.arrays import BoolArr, FloatArr
from drods.scheduler.indexes import codes_in
from drods.scheduler.interface import PluginBase
from drods.scheduler.snapshot import Snapshot
from drods.scheduler.task import TaskInfo


class TopologyPreference(PluginBase):
    name = "TopologyPreference"

    def score(self, task: TaskInfo, snap: Snapshot, mask: BoolArr) -> FloatArr:
        n = snap.n
        s = np.zeros(n)
        region_score = float(self.args.get("regionScore", 70.0))
        if task.preferred_regions or task.preferred_zones:
            if task.preferred_regions:
                s[snap.field_in("region", task.preferred_regions)] = region_score
            if task.preferred_zones:
                s[snap.field_in("zone", task.preferred_zones)] = 100.0
            return s
        rows = task.current_rows
        if rows.size == 0:
            return s
        for fld, val in (("region", region_score), ("zone", 100.0)):
            codes = snap.indexes.topo[fld][:n]
            cur = codes[rows]
            cur = cur[cur >= 0]
            if cur.size:
                s[codes_in(codes, cur, len(snap.indexes.vocab[fld]))] = val
        return s
