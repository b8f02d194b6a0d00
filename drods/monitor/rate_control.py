"""Rate control of the scheduler-visible status (SPEC C8, CATS R6/R9: "no oscillation").

Agents report every ~10 s and utilisation jitters; if every wiggle reached the scheduler, a
cluster hovering at a water-level limit would be filtered in and out on alternate decisions
and workloads would flap between domains. So the *visible* value of each metric moves only when

* at least ``min_interval_s`` has passed since it last moved (rate limit), and
* the new raw value differs from the visible one by the change threshold
  (``max(abs_change, rel_change * |visible|)``), or it left a hysteresis band:
  crossing a configured threshold ``t`` upward needs ``value >= t + hysteresis`` and downward
  needs ``value < t - hysteresis``; a move that would put the visible value on the other side
  of a threshold without leaving the band is held back.

The raw stream is not affected: history and threshold/surge detectors read it directly.
Everything is pure and deterministic: time is passed in, state is O(1) per (cluster, metric).
"""

from __future__ import annotations

import enum
from bisect import bisect_right
from collections.abc import Hashable, Mapping
from dataclasses import dataclass, field, replace

from drods.monitor import report as r
from drods.monitor.report import Measured, NormalisedStatus


@dataclass(frozen=True, slots=True)
class RatePolicy:
    """Damping for one metric. ``thresholds`` must be sorted ascending."""

    min_interval_s: float = 30.0
    abs_change: float = 0.0
    rel_change: float = 0.0
    thresholds: tuple[float, ...] = ()
    hysteresis: float = 0.0

    def __post_init__(self) -> None:
        if list(self.thresholds) != sorted(self.thresholds):
            raise ValueError("thresholds must be sorted ascending")
        if min(self.min_interval_s, self.abs_change, self.rel_change, self.hysteresis) < 0:
            raise ValueError("rate policy values must be non-negative")


_UTIL = RatePolicy(min_interval_s=30.0, abs_change=0.02)
_TRAFFIC = RatePolicy(min_interval_s=30.0, rel_change=0.10, abs_change=1.0)
_CAPACITY = RatePolicy(min_interval_s=0.0)  # capacity changes are rare and always real

#: Defaults per metric (from `drods.monitor.report.METRICS`); the water-level bands match the
#: usual policy limits (70/80/90 %) so that the S4 filter never sees a flapping crossing.
DEFAULT_POLICIES: dict[str, RatePolicy] = {
    r.CPU_CAPACITY: _CAPACITY,
    r.MEMORY_CAPACITY: _CAPACITY,
    r.GPU_CAPACITY: _CAPACITY,
    r.STORAGE_CAPACITY: _CAPACITY,
    r.CPU_UTILISATION: RatePolicy(min_interval_s=30.0, abs_change=0.02, thresholds=(0.7,), hysteresis=0.03),
    r.MEMORY_UTILISATION: _UTIL,
    r.GPU_UTILISATION: _UTIL,
    r.STORAGE_UTILISATION: _UTIL,
    r.CPU_USED: RatePolicy(min_interval_s=30.0, rel_change=0.02),
    r.MEMORY_USED: RatePolicy(min_interval_s=30.0, rel_change=0.02),
    r.GPU_USED: RatePolicy(min_interval_s=30.0, rel_change=0.02),
    r.STORAGE_USED: RatePolicy(min_interval_s=30.0, rel_change=0.02),
    r.NETWORK_IN: _TRAFFIC,
    r.NETWORK_OUT: _TRAFFIC,
    r.REQUEST_RATE: _TRAFFIC,
    r.PODS: RatePolicy(min_interval_s=30.0, abs_change=1.0, rel_change=0.02),
    r.NODE_FREE_CPU: RatePolicy(min_interval_s=30.0, rel_change=0.05),
    r.NODE_FREE_MEMORY: RatePolicy(min_interval_s=30.0, rel_change=0.05),
    r.NODE_FREE_GPU: RatePolicy(min_interval_s=30.0),
    r.WATER_LEVEL: RatePolicy(min_interval_s=30.0, abs_change=0.02, thresholds=(0.7, 0.8, 0.9), hysteresis=0.03),
}


class Decision(enum.Enum):
    PUBLISHED = "published"  # visible value changed to the offered value
    WITHIN_TOLERANCE = "within_tolerance"  # offered value confirms the visible one (or its band)
    DEFERRED = "deferred"  # a real change is waiting for ``min_interval_s`` to pass


@dataclass(slots=True)
class _State:
    visible: float
    changed_at: float
    band: int


def _band_of(thresholds: tuple[float, ...], v: float) -> int:
    return bisect_right(thresholds, v)


def with_min_interval(seconds: float, policies: Mapping[str, RatePolicy] = DEFAULT_POLICIES) -> dict[str, RatePolicy]:
    """The policies with every non-zero minimum interval set to ``seconds`` (``rateMinIntervalSeconds``)."""
    return {m: replace(p, min_interval_s=seconds) if p.min_interval_s > 0 else p for m, p in policies.items()}


class RateController:
    """Per-key damping state machine; keys are usually ``(cluster, metric)``."""

    def __init__(self, policies: Mapping[str, RatePolicy] | None = None, default: RatePolicy | None = None) -> None:
        self.policies: dict[str, RatePolicy] = dict(DEFAULT_POLICIES if policies is None else policies)
        self.default = default or RatePolicy()
        self._state: dict[Hashable, _State] = {}

    def policy(self, metric: str) -> RatePolicy:
        return self.policies.get(metric, self.default)

    def offer(self, key: Hashable, metric: str, value: float, now: float) -> Decision:
        """Feed one raw value; says whether the visible value moved."""
        p = self.policy(metric)
        st = self._state.get(key)
        th = p.thresholds
        if st is None:
            self._state[key] = _State(value, now, _band_of(th, value))
            return Decision.PUBLISHED
        band = st.band
        if th:
            h = p.hysteresis
            if band < len(th) and value >= th[band] + h:
                band = _band_of(th, value - h)
            elif band > 0 and value < th[band - 1] - h:
                band = _band_of(th, value + h)
        if band == st.band:
            if value == st.visible:
                return Decision.WITHIN_TOLERANCE
            # Inside a hysteresis band on the far side of a threshold: the old side still holds.
            if th and _band_of(th, value) != _band_of(th, st.visible):
                return Decision.WITHIN_TOLERANCE
            if abs(value - st.visible) < max(p.abs_change, p.rel_change * abs(st.visible)):
                return Decision.WITHIN_TOLERANCE
        if now - st.changed_at < p.min_interval_s:
            return Decision.DEFERRED
        st.visible, st.changed_at, st.band = value, now, band
        return Decision.PUBLISHED

    def visible(self, key: Hashable) -> float | None:
        st = self._state.get(key)
        return None if st is None else st.visible

    def forget(self, key: Hashable) -> None:
        self._state.pop(key, None)


@dataclass(slots=True)
class _Visible:
    values: dict[str, Measured] = field(default_factory=dict)


class StatusDamper:
    """Applies a `RateController` to whole `NormalisedStatus` objects, per cluster.

    A held value keeps its old value; its timestamp advances only when the raw stream confirms
    it (within tolerance), so "timestamp" always means "last time this value was known true".
    """

    def __init__(self, controller: RateController | None = None) -> None:
        self.controller = controller or RateController()
        self._visible: dict[str, _Visible] = {}

    def apply(self, status: NormalisedStatus, now: float) -> tuple[NormalisedStatus, list[str]]:
        """Return the scheduler-visible status and the metrics whose visible value moved."""
        vis = self._visible.setdefault(status.cluster, _Visible())
        old = vis.values
        out: dict[str, Measured] = {}
        changed: list[str] = []
        offer = self.controller.offer
        cluster = status.cluster
        for metric, m in status.values.items():
            d = offer((cluster, metric), metric, m.value, now)
            prev = old.get(metric)
            if d is Decision.PUBLISHED or prev is None:
                out[metric] = m
                if prev is None or prev.value != m.value:
                    changed.append(metric)
            elif d is Decision.WITHIN_TOLERANCE:
                out[metric] = Measured(prev.value, m.source, m.ts)
            else:
                out[metric] = prev
        for metric in old.keys() - out.keys():
            self.controller.forget((cluster, metric))
            changed.append(metric)
        vis.values = out
        return status.replace_values(out), changed

    def forget(self, cluster: str) -> None:
        vis = self._visible.pop(cluster, None)
        if vis is not None:
            for metric in vis.values:
                self.controller.forget((cluster, metric))
