"""Network score (S5 "network"): low latency to the task's network identifier and low network
utilisation (in+out Mbps over bandwidth). Its weight rises during a traffic surge (adjuster)."""

from __future__ import annotations

import numpy as np

from drods.scheduler.arrays import BoolArr, FloatArr
from drods.scheduler.interface import PluginBase
from drods.scheduler.plugins.network_fit import latency_to
from drods.scheduler.snapshot import Snapshot
from drods.scheduler.task import TaskInfo


class NetworkLocality(PluginBase):
    name = "NetworkLocality"

    def score(self, task: TaskInfo, snap: Snapshot, mask: BoolArr) -> FloatArr:
        n = snap.n
        util_s = snap.status_cache.get("network-utilisation-score")
        if util_s is None:  # status and spec only: shared by every decision until they change
            bw = snap.bandwidth[:n]
            with np.errstate(divide="ignore", invalid="ignore"):
                util = snap.net_mbps[:n] / bw
            util_s = np.where(np.isnan(util), 50.0, 100.0 * (1.0 - np.clip(util, 0.0, 1.0)))
            util_s.flags.writeable = False
            snap.status_cache["network-utilisation-score"] = util_s
        if not task.network_id:
            return util_s  # type: ignore[no-any-return]
        lat = latency_to(snap, task.network_id)
        known = ~np.isnan(lat)
        ref = task.max_latency_ms
        if ref is None:
            sel = known & mask
            ref = float(lat[sel].max()) if sel.any() else 0.0
        ref = max(ref, 1.0)
        lat_s = np.where(known, 100.0 * np.clip(1.0 - np.nan_to_num(lat) / ref, 0.0, 1.0), 0.0)
        return 0.7 * lat_s + 0.3 * util_s  # type: ignore[no-any-return]
