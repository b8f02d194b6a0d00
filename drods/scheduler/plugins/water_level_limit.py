"""Water-level limit filter and estimator (S4, S10).

The effective limit of a cluster is min(placement.waterLevelLimit, cluster spec.waterLevelLimit).
A cluster is dropped when its water level is already above the limit, or when one more replica
would push it above. ``max_replicas`` is how many replicas fit below the limit, so division
never raises a cluster above its limit.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from drods.scheduler.interface import BoolArr, FilterOutcome, FloatArr, PluginBase, Rejection
from drods.scheduler.snapshot import CPU, MEM, Snapshot
from drods.scheduler.task import TaskInfo

EPS = 1e-9


def effective_limit(task: TaskInfo, snap: Snapshot) -> FloatArr:
    lim = task.cache.get("limit")
    if lim is None:
        lim = np.minimum(snap.limit[: snap.n], task.limit)
        task.cache["limit"] = lim
    return lim  # type: ignore[no-any-return]


def _detail(reason: str, vals: FloatArr) -> Callable[[int], str]:
    return lambda k: f"{reason} (water level {vals[k]:.0%})"


def _grouped(plugin: str, fmt: str, drop: BoolArr, lim: FloatArr, wl: FloatArr) -> list[Rejection]:
    rows = np.flatnonzero(drop)
    lims = lim[rows]
    out: list[Rejection] = []
    for u in np.unique(lims):
        sub = rows[lims == u]
        vals = wl[sub]
        reason = fmt.format(limit=f"{u:.0%}")
        out.append(Rejection(reason, sub, plugin, _detail(reason, vals), True))
    return out


class WaterLevelLimit(PluginBase):
    name = "WaterLevelLimit"
    capacity_only = True

    def filter(self, task: TaskInfo, snap: Snapshot, mask: BoolArr) -> FilterOutcome:
        lim = effective_limit(task, snap)
        wl = snap.water_level
        out: list[Rejection] = []
        above = wl > lim + EPS
        drop = mask & above
        if drop.any():
            out.extend(_grouped(self.name, "water level above {limit}", drop, lim, wl))
            mask = mask & ~above
        after = self._after_one(task, snap)
        if after is not None:
            over = after > lim + EPS
            drop = mask & over
            if drop.any():
                out.extend(_grouped(self.name, "1 replica would raise water level above {limit}", drop,
                                    lim, after))
                mask = mask & ~over
        return mask, out

    @staticmethod
    def _after_one(task: TaskInfo, snap: Snapshot) -> FloatArr | None:
        """Water level each cluster would have with one more replica."""
        rs = [r for r in (CPU, MEM) if task.req[r] > 0]
        if not rs:
            return None
        n = snap.n
        alloc = snap.alloc[:n, rs]
        with np.errstate(divide="ignore"):
            step = np.where(alloc > 0, task.req[rs] / np.where(alloc > 0, alloc, 1.0), np.inf)
        frac = snap.fractions[:, rs] + step
        return np.maximum(snap.water_level, frac.max(axis=1) + snap.wl_offset[:n])

    def max_replicas(self, task: TaskInfo, snap: Snapshot) -> FloatArr:
        lim = effective_limit(task, snap)
        n = snap.n
        wl = snap.water_level
        rs = [r for r in (CPU, MEM) if task.req[r] > 0]
        if not rs:
            return np.where(wl <= lim + EPS, np.inf, 0.0)
        room = (lim - snap.wl_offset[:n])[:, None] - snap.fractions[:, rs]
        alloc = snap.alloc[:n, rs]
        fit = np.floor(room * alloc / task.req[rs] + EPS).min(axis=1)
        return np.maximum(fit, 0.0)
