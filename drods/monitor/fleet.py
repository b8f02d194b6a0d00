"""Fleet-wide aggregation for GET /api/v1/monitor/realtime (SPEC API8, A4).

Input: the latest (scheduler-visible) `NormalisedStatus` per cluster and each registered
cluster's readiness. A cluster is *active* when it is ready and its status is fresh
(``max_age_s``); everything else registered is listed in ``unhealthyClusters``. Totals (pods,
traffic) and the fleet water level count active clusters only: they describe the capacity the
scheduler can actually use.

Fleet water level is capacity-weighted and uses the same definition as a cluster's:
``max(Σ cpu.used / Σ cpu.capacity, Σ memory.used / Σ memory.capacity)``.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
from pydantic import BaseModel

from drods.monitor import report as r
from drods.monitor.report import NormalisedStatus, iso


class WaterLevelView(BaseModel):
    clusters: dict[str, float | None]
    fleet: float | None


class RealtimeSnapshot(BaseModel):
    """Response body of GET /api/v1/monitor/realtime."""

    activeClusters: int
    totalPods: int
    networkTraffic: str  # "unknown" when no active cluster's traffic is measured
    networkTrafficMbps: float | None
    waterLevel: WaterLevelView
    unhealthyClusters: list[str]
    timestamp: str


_UNITS = (("bps", 1.0), ("Kbps", 1e3), ("Mbps", 1e6), ("Gbps", 1e9), ("Tbps", 1e12))


def format_bitrate(mbps: float) -> str:
    """Human bit rate from Mbps, 3 significant digits: 1200 → "1.2Gbps", 850 → "850Mbps"."""
    bps = mbps * 1e6
    if not bps > 0:
        return "0bps"
    i = len(_UNITS) - 1
    while i > 0 and bps < _UNITS[i][1]:
        i -= 1
    v = float(f"{bps / _UNITS[i][1]:.3g}")
    if v >= 1000 and i + 1 < len(_UNITS):  # 999.7 Mbps rounds to 1000 → "1Gbps"
        i += 1
        v = float(f"{bps / _UNITS[i][1]:.3g}")
    return f"{v:g}{_UNITS[i][0]}" if v < 1e6 else f"{v:.0f}{_UNITS[i][0]}"


def _col(statuses: list[NormalisedStatus], metric: str) -> np.ndarray:
    return np.fromiter(
        (np.nan if (v := s.get(metric)) is None else v for s in statuses), dtype=float, count=len(statuses)
    )


def _ratio(used: np.ndarray, cap: np.ndarray) -> float | None:
    both = ~(np.isnan(used) | np.isnan(cap))
    total = float(cap[both].sum())
    if total <= 0:
        return None
    return float(used[both].sum()) / total


def shown_level(level: float | None) -> float | None:
    """A water level as the API shows it: six digits, without a sum's float noise (0.029167, not
    0.029167000000000002); the scheduler decides on the level as computed."""
    return None if level is None else round(float(level), 6)


def realtime(
    statuses: Mapping[str, NormalisedStatus],
    ready: Mapping[str, bool],
    now: float,
    *,
    max_age_s: float | None = 60.0,
) -> RealtimeSnapshot:
    """Aggregate; ``ready`` lists every registered cluster (statuses of others are ignored)."""
    names = sorted(ready)
    present = [statuses.get(c) for c in names]
    fresh = np.fromiter(
        (s is not None and (max_age_s is None or now - s.received_ts <= max_age_s) for s in present),
        dtype=bool,
        count=len(names),
    )
    readiness = np.fromiter((bool(ready[c]) for c in names), dtype=bool, count=len(names))
    active = fresh & readiness
    act = [s for s, a in zip(present, active, strict=True) if a and s is not None]

    pods = np.nan_to_num(_col(act, r.PODS))
    net = np.concatenate([_col(act, r.NETWORK_IN), _col(act, r.NETWORK_OUT)])
    # measured traffic summed; none measured anywhere is unknown, not 0
    traffic = float(np.nansum(net)) if act and not np.isnan(net).all() else None
    fleet_wl: float | None = None
    if act:
        parts = [
            _ratio(_col(act, r.CPU_USED), _col(act, r.CPU_CAPACITY)),
            _ratio(_col(act, r.MEMORY_USED), _col(act, r.MEMORY_CAPACITY)),
        ]
        known = [p for p in parts if p is not None]
        fleet_wl = shown_level(min(max(known), 1.0)) if known else None
    per_cluster = {c: (None if s is None else shown_level(s.water_level)) for c, s in zip(names, present, strict=True)}
    return RealtimeSnapshot(
        activeClusters=int(active.sum()),
        totalPods=int(pods.sum()),
        networkTraffic="unknown" if traffic is None else format_bitrate(traffic),
        networkTrafficMbps=None if traffic is None else round(traffic, 3),
        waterLevel=WaterLevelView(clusters=per_cluster, fleet=fleet_wl),
        unhealthyClusters=[c for c, a in zip(names, active, strict=True) if not a],
        timestamp=iso(now),
    )
