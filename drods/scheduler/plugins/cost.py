"""Cost score (F6): the cheaper one replica's hourly price (``pricing.replica_price``, egress
included, spot weighed up by ``spotPremium``, default 0.1) the higher, min-max normalised over the
feasible clusters; clusters without a cost model score a neutral 50. On by default; skipped
before any array work while no cluster in the fleet has a price."""

from __future__ import annotations

import numpy as np

from drods.scheduler.arrays import BoolArr, FloatArr
from drods.scheduler.interface import PluginBase
from drods.scheduler.pricing import priced, replica_price
from drods.scheduler.snapshot import Snapshot
from drods.scheduler.task import TaskInfo

DEFAULT_SPOT_PREMIUM = 0.1


class Cost(PluginBase):
    name = "Cost"

    def skip(self, task: TaskInfo, snap: Snapshot) -> bool:
        return not priced(snap)

    def score(self, task: TaskInfo, snap: Snapshot, mask: BoolArr) -> FloatArr:
        n = snap.n
        c = replica_price(task, snap, float(self.args.get("spotPremium", DEFAULT_SPOT_PREMIUM)))
        unknown = np.isnan(c)
        known = mask & ~unknown
        if not known.any():
            return np.full(n, 50.0)
        ck = c[known]
        lo, hi = float(ck.min()), float(ck.max())
        if hi - lo <= 1e-12:
            s = np.full(n, 100.0)
        else:  # 0..100 inside the mask; outside it values are ignored (ScorePlugin), so not clipped
            s = np.subtract(hi, c)
            s *= 100.0
            s /= hi - lo
        s[unknown] = 50.0
        return s
