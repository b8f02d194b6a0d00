"""Follow-up filter (F3): a workload that declares ``followUp`` runs where the workload it follows
runs — on those of its clusters that pass the other filters, else on the feasible clusters nearest
to them (the TrafficAffinity distance: latency when known, else same zone, same region, elsewhere).
The scheduler service re-places a follower when its primary moves. Until the primary is placed
it constrains nothing. When the followed workload is placed with a stateful topology, "where it
runs" is its Primary cluster (its replica clusters are not followed). Last in the default filter
order, so capacity is checked first."""

from __future__ import annotations

import numpy as np

from drods.scheduler.arrays import BoolArr
from drods.scheduler.interface import FilterOutcome, PluginBase, reject
from drods.scheduler.plugins.traffic_affinity import TrafficAffinity
from drods.scheduler.snapshot import Snapshot
from drods.scheduler.task import TaskInfo


class FollowUp(PluginBase):
    name = "FollowUp"

    def filter(self, task: TaskInfo, snap: Snapshot, mask: BoolArr) -> FilterOutcome:
        if not task.follow:
            return mask, []
        primary = snap.workload_primaries.get(task.follow)
        placement = ((primary, 1),) if primary is not None else snap.workload_placements.get(task.follow)
        rows = [r for r in (snap.index.get(c) for c, k in (placement or ()) if k > 0) if r is not None]
        if not rows:
            return mask, []
        same = np.zeros(snap.n, dtype=bool)
        same[rows] = True
        if (mask & same).any():
            keep = same
            reason = f"{task.follow} does not run here"
        else:
            metric = TrafficAffinity()
            dist = np.min([metric.distance(snap, r, snap.names[r]) for r in rows], axis=0)
            keep = dist <= float(dist[mask].min()) + 1e-9 if mask.any() else same
            reason = f"farther from {task.follow} than the nearest feasible cluster"
        drop = mask & ~keep
        if not drop.any():
            return mask, []
        return mask & keep, [reject(self.name, reason, drop)]
