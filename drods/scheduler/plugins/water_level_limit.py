"""Water-level limit filter and estimator (S4, S10).

The effective limit of a cluster is min(placement.waterLevelLimit, cluster spec.waterLevelLimit).
A cluster is dropped when its water level is already above the limit, or when one more replica
would push it above — unless the binding is a whole object that requests nothing (see ``skip``).
``max_replicas`` is how many replicas fit below the limit, so division never raises a cluster above
its limit.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from drods.scheduler.arrays import BoolArr, FloatArr
from drods.scheduler.capacity import replica_shape
from drods.scheduler.interface import FilterOutcome, PluginBase, Rejection, distinct
from drods.scheduler.resources import PODS
from drods.scheduler.snapshot import Snapshot
from drods.scheduler.task import TaskInfo

EPS = 1e-9


def _detail(reason: str, vals: FloatArr) -> Callable[[int], str]:
    return lambda k: f"{reason} (water level {vals[k]:.0%})"


def _grouped(plugin: str, fmt: str, drop: BoolArr, lim: FloatArr, wl: FloatArr) -> list[Rejection]:
    rows = drop.nonzero()[0]
    lims = lim[rows]
    out: list[Rejection] = []
    for u in distinct(lims):
        sub = rows[lims == u]
        vals = wl[sub]
        reason = fmt.format(limit=f"{u:.0%}")
        out.append(Rejection(reason, sub, plugin, _detail(reason, vals), True))
    return out


class WaterLevelLimit(PluginBase):
    name = "WaterLevelLimit"
    capacity_only = True

    def skip(self, task: TaskInfo, snap: Snapshot) -> bool:
        """A whole object that requests nothing (a ConfigMap, a Service, a Role: Duplicated, no pod
        template) runs nothing: a cluster above its limit still gets it, as Karmada places it wherever
        the policy says. A workload's replicas are barred, requests or not."""
        return task.division == "Duplicated" and set(task.requested) <= {PODS}

    def filter(self, task: TaskInfo, snap: Snapshot, mask: BoolArr) -> FilterOutcome:
        shape = replica_shape(task, snap)
        lim = shape.limit
        wl = snap.water_level
        after = self._after_one(task, snap)
        over = after > shape.limit_eps
        if not np.count_nonzero(mask & over):
            return mask, []  # one more replica keeps every cluster under its limit: none is above it now
        out: list[Rejection] = []
        above = wl > shape.limit_eps
        drop = mask & above
        if np.count_nonzero(drop):
            out.extend(_grouped(self.name, "water level above {limit}", drop, lim, wl))
            mask = mask & ~above
        drop = mask & over  # nobody when the task raises no water level: ``over`` is ``above`` then
        if np.count_nonzero(drop):
            out.extend(_grouped(self.name, "1 replica would raise water level above {limit}", drop,
                                lim, after))
            mask = mask & ~over
        return mask, out

    @staticmethod
    def _after_one(task: TaskInfo, snap: Snapshot) -> FloatArr:
        """Water level each cluster would have with one more replica (the level now when the task
        requests neither cpu nor memory)."""
        shape = replica_shape(task, snap)
        rs = list(shape.wl_rs)
        if not rs:
            return snap.water_level
        frac = snap.fractions
        after = frac[:, rs[0]] + shape.step[:, rs[0]]
        if len(rs) == 2:
            np.maximum(after, frac[:, 1] + shape.step[:, 1], out=after)
        after += snap.wl_offset[: snap.n]
        return np.maximum(snap.water_level, after, out=after)

    def max_replicas(self, task: TaskInfo, snap: Snapshot, headroom: float = 0.0) -> FloatArr:
        """Replicas each cluster holds under its limit less ``headroom``."""
        shape = replica_shape(task, snap)
        wl = snap.water_level
        rs = list(shape.wl_rs)
        if not rs:
            return np.where(wl <= shape.limit - headroom + EPS, np.inf, 0.0)
        base = shape.room_base if not headroom else shape.room_base - headroom
        room = base[:, None] - (snap.fractions if len(rs) == 2 else snap.fractions[:, rs])
        room *= shape.per_replica
        room += EPS
        np.floor(room, out=room)
        # the smaller of the (at most two) columns; a row-wise reduction costs more than this
        fit = np.minimum(room[:, 0], room[:, 1]) if len(rs) == 2 else room[:, 0].copy()
        return np.maximum(fit, 0.0, out=fit)
