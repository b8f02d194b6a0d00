"""Cost score (F6): the cheaper one replica's hourly price (``pricing.replica_price``, egress
included, spot weighed up by ``spotPremium``, default 0.1) the higher, min-max normalised over the
feasible clusters; clusters without a cost model score a neutral 50. On by default; skipped
before any array work while no cluster in the fleet has a price."""

from __future__ import annotations

import numpy as np

from drods.scheduler.interface import BoolArr, FloatArr, PluginBase
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
        known = ~np.isnan(c) & mask
        if not known.any():
            return np.full(n, 50.0)
        lo = float(c[known].min())
        hi = float(c[known].max())
        s = np.full(n, 100.0) if hi - lo <= 1e-12 else 100.0 * (hi - c) / (hi - lo)
        return np.where(np.isnan(c), 50.0, np.clip(s, 0.0, 100.0))  # type: ignore[no-any-return]
