"""Traffic surge detection (SPEC S5: "network weight rises during a traffic surge").

Per cluster and per signal (network Mbps in+out, request rate) we keep a slow EWMA baseline
with an EW variance and a fast EWMA of the recent level. A surge starts when the fast level is
both statistically unusual (z-score ``>= z_on``) and materially higher (ratio ``>= ratio_on``),
and ends only below the lower ``z_off`` / ``ratio_off`` marks (hysteresis). Requiring both
conditions keeps noisy-but-flat clusters (large z on tiny absolute moves) and quiet clusters
(huge ratios on a few Mbps) from firing.

While surging, the baseline adapts much more slowly, so a surge is not absorbed into "normal"
in minutes, but a permanent new level does eventually become the baseline.

EWMA weights use ``1 - exp(-dt / tau)``, so irregular report intervals are handled.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Literal

from drods.monitor.report import NormalisedStatus

Signal = Literal["network", "requests"]


@dataclass(frozen=True, slots=True)
class SurgeConfig:
    baseline_tau_s: float = 1800.0
    surging_baseline_tau_s: float = 4 * 3600.0
    fast_tau_s: float = 30.0
    z_on: float = 4.0
    z_off: float = 2.0
    ratio_on: float = 1.5
    ratio_off: float = 1.2
    ratio_full: float = 3.0  # fast/baseline ratio at which magnitude reaches 1
    warmup_s: float = 300.0  # no surge until the baseline has seen this much history
    min_std_frac: float = 0.05  # z-score floor: std >= this fraction of the baseline
    min_level: float = 1.0  # Mbps or req/s below which nothing is a surge


@dataclass(frozen=True, slots=True)
class SurgeSignal:
    """What the scheduler's dynamic adjuster reads; ``magnitude`` is 0 unless ``active``."""

    cluster: str
    active: bool
    magnitude: float
    signal: Signal | None
    ratio: float
    zscore: float
    ts: float


@dataclass(frozen=True, slots=True)
class FleetSurge:
    active: bool
    magnitude: float  # traffic-weighted mean of cluster magnitudes, 0..1
    clusters: tuple[str, ...]  # clusters currently surging


@dataclass(slots=True)
class _Track:
    mean: float
    var: float
    fast: float
    first_ts: float
    last_ts: float
    on: bool = False
    ratio: float = 1.0
    z: float = 0.0


class SurgeDetector:
    def __init__(self, config: SurgeConfig | None = None) -> None:
        self.config = config or SurgeConfig()
        self._tracks: dict[tuple[str, Signal], _Track] = {}
        self._latest: dict[str, SurgeSignal] = {}

    def _update(self, key: tuple[str, Signal], x: float, ts: float) -> _Track:
        c = self.config
        tr = self._tracks.get(key)
        if tr is None:
            tr = self._tracks[key] = _Track(mean=x, var=0.0, fast=x, first_ts=ts, last_ts=ts)
            return tr
        dt = ts - tr.last_ts
        if dt <= 0:
            return tr
        tr.last_ts = ts
        tr.fast += (1.0 - math.exp(-dt / c.fast_tau_s)) * (x - tr.fast)
        base = max(tr.mean, c.min_level)
        std = max(math.sqrt(tr.var), c.min_std_frac * base)
        tr.z = (tr.fast - tr.mean) / std
        tr.ratio = tr.fast / base
        warm = ts - tr.first_ts >= c.warmup_s
        if not tr.on:
            if warm and tr.fast >= c.min_level and tr.z >= c.z_on and tr.ratio >= c.ratio_on:
                tr.on = True
        elif tr.z < c.z_off or tr.ratio < c.ratio_off:
            tr.on = False
        # Baseline learns from the sample after the decision, so a spike is judged against
        # what came before it.
        a = 1.0 - math.exp(-dt / (c.surging_baseline_tau_s if tr.on else c.baseline_tau_s))
        diff = x - tr.mean
        tr.mean += a * diff
        tr.var = (1.0 - a) * (tr.var + a * diff * diff)
        return tr

    def _magnitude(self, tr: _Track) -> float:
        if not tr.on:
            return 0.0
        return min(max((tr.ratio - 1.0) / (self.config.ratio_full - 1.0), 0.0), 1.0)

    def observe(
        self,
        cluster: str,
        ts: float,
        *,
        network_mbps: float | None = None,
        request_rate: float | None = None,
    ) -> SurgeSignal:
        """Feed one report's traffic; returns the cluster's current surge signal."""
        inputs: tuple[tuple[Signal, float | None], ...] = (
            ("network", network_mbps),
            ("requests", request_rate),
        )
        best_mag = 0.0
        best_sig: Signal | None = None
        best_tr: _Track | None = None
        for name, x in inputs:
            if x is None or not math.isfinite(x):
                continue
            track = self._update((cluster, name), x, ts)
            m = self._magnitude(track)
            if best_tr is None or m > best_mag:
                best_mag, best_sig, best_tr = m, name, track
        mag, sig, tr = best_mag, best_sig, best_tr
        if tr is None:
            prev = self._latest.get(cluster)
            return prev or SurgeSignal(cluster, False, 0.0, None, 1.0, 0.0, ts)
        out = SurgeSignal(cluster, tr.on, mag, sig if tr.on else None, tr.ratio, tr.z, ts)
        self._latest[cluster] = out
        return out

    def observe_status(self, status: NormalisedStatus) -> SurgeSignal:
        net = None
        if status.get("network.inMbps") is not None or status.get("network.outMbps") is not None:
            net = status.network_mbps
        return self.observe(status.cluster, status.ts, network_mbps=net, request_rate=status.get("requestRate"))

    def cluster(self, cluster: str) -> SurgeSignal | None:
        return self._latest.get(cluster)

    def fleet(self, clusters: Iterable[str] | None = None) -> FleetSurge:
        names = list(self._latest) if clusters is None else [c for c in clusters if c in self._latest]
        num = den = 0.0
        surging: list[str] = []
        for c in names:
            s = self._latest[c]
            # Weighted by network traffic: a surge on a big cluster matters more to the fleet.
            tr = self._tracks.get((c, "network"))
            w = max(tr.fast if tr is not None else 0.0, self.config.min_level)
            num += s.magnitude * w
            den += w
            if s.active:
                surging.append(c)
        mag = num / den if den > 0 else 0.0
        return FleetSurge(bool(surging), min(max(mag, 0.0), 1.0), tuple(sorted(surging)))

    def forget(self, cluster: str) -> None:
        self._latest.pop(cluster, None)
        self._tracks.pop((cluster, "network"), None)
        self._tracks.pop((cluster, "requests"), None)
