"""Threshold crossings and "sustained above limit" detection (SPEC C3, A4, S11).

Crossing events are what CATS C3 writes to the status store ("CPU load crossing 70%") so
that prefix watchers recompute; sustained detection is what automatic operations (S11
rescheduling, F6 scale-out) act on: a domain *briefly* above its water-level limit must not
trigger a migration, one that stays there for T seconds must.

Both work on the raw stream with their own hysteresis, so they are not delayed by the
scheduler-facing rate control. Units are those of `drods.monitor.report` (utilisations and
water level in 0..1, so "CPU >= 70%" is ``ThresholdRule("cpu.utilisation", 0.7)``).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, Literal

from drods.monitor.report import NormalisedStatus, iso


@dataclass(frozen=True, slots=True)
class ThresholdRule:
    """Up when ``value >= level``; down again only when ``value < level - hysteresis``."""

    metric: str
    level: float
    hysteresis: float = 0.0
    name: str = ""

    @property
    def key(self) -> str:
        return self.name or f"{self.metric}>={self.level:g}"


@dataclass(frozen=True, slots=True)
class ThresholdEvent:
    cluster: str
    metric: str
    direction: Literal["up", "down"]
    value: float
    threshold: float
    ts: float
    rule: str

    def to_dict(self) -> dict[str, Any]:
        return {
            "cluster": self.cluster,
            "metric": self.metric,
            "direction": self.direction,
            "value": self.value,
            "threshold": self.threshold,
            "time": iso(self.ts),
            "rule": self.rule,
        }


class ThresholdDetector:
    """Edge-triggered crossings for a set of rules; state is one bool per (cluster, rule)."""

    def __init__(self, rules: Iterable[ThresholdRule]) -> None:
        self.rules = list(rules)
        self._by_metric: dict[str, list[ThresholdRule]] = {}
        for rule in self.rules:
            if rule.hysteresis < 0:
                raise ValueError("hysteresis must be non-negative")
            self._by_metric.setdefault(rule.metric, []).append(rule)
        self._above: dict[tuple[str, str], bool] = {}

    def observe(self, cluster: str, metric: str, value: float, ts: float) -> list[ThresholdEvent]:
        rules = self._by_metric.get(metric)
        if not rules:
            return []
        out: list[ThresholdEvent] = []
        for rule in rules:
            k = (cluster, rule.key)
            above = self._above.get(k)
            if not above and value >= rule.level:
                # A first observation already above the limit is reported (state was unknown).
                self._above[k] = True
                out.append(ThresholdEvent(cluster, metric, "up", value, rule.level, ts, rule.key))
            elif above and value < rule.level - rule.hysteresis:
                self._above[k] = False
                out.append(ThresholdEvent(cluster, metric, "down", value, rule.level, ts, rule.key))
            elif above is None:
                self._above[k] = False
        return out

    def observe_status(self, status: NormalisedStatus) -> list[ThresholdEvent]:
        out: list[ThresholdEvent] = []
        for metric in self._by_metric:
            m = status.values.get(metric)
            if m is not None:
                out.extend(self.observe(status.cluster, metric, m.value, m.ts))
        return out

    def is_above(self, cluster: str, rule: str) -> bool:
        return self._above.get((cluster, rule), False)

    def forget(self, cluster: str) -> None:
        for k in [k for k in self._above if k[0] == cluster]:
            del self._above[k]


@dataclass(frozen=True, slots=True)
class SustainedEvent:
    cluster: str
    metric: str
    kind: Literal["sustained", "cleared"]
    value: float
    limit: float
    since_ts: float  # when the episode started (first sample at/above the limit)
    ts: float

    def to_dict(self) -> dict[str, Any]:
        return {
            "cluster": self.cluster,
            "metric": self.metric,
            "kind": self.kind,
            "value": self.value,
            "limit": self.limit,
            "since": iso(self.since_ts),
            "time": iso(self.ts),
        }


@dataclass(slots=True)
class _Episode:
    since: float | None = None
    fired: bool = False
    last_ts: float | None = None


class SustainedDetector:
    """Fires once when ``metric >= limit`` has held for ``duration_s``; clears below
    ``limit - hysteresis``. Dips into the hysteresis band don't restart the clock.

    ``max_gap_s``: if samples stop for longer than this before the episode fired, the clock
    restarts: an absence of data is not evidence that the domain stayed hot.
    """

    def __init__(
        self,
        metric: str,
        limit: float,
        duration_s: float,
        *,
        hysteresis: float = 0.0,
        max_gap_s: float | None = None,
    ) -> None:
        if duration_s < 0 or hysteresis < 0:
            raise ValueError("duration and hysteresis must be non-negative")
        self.metric = metric
        self.limit = limit
        self.duration_s = duration_s
        self.hysteresis = hysteresis
        self.max_gap_s = max_gap_s
        self._ep: dict[str, _Episode] = {}

    def observe(self, cluster: str, value: float, ts: float) -> SustainedEvent | None:
        ep = self._ep.get(cluster)
        if ep is None:
            ep = self._ep[cluster] = _Episode()
        if self.max_gap_s is not None and ep.last_ts is not None and ts - ep.last_ts > self.max_gap_s and not ep.fired:
            ep.since = None
        ep.last_ts = ts
        if value >= self.limit:
            if ep.since is None:
                ep.since = ts
            if not ep.fired and ts - ep.since >= self.duration_s:
                ep.fired = True
                return SustainedEvent(cluster, self.metric, "sustained", value, self.limit, ep.since, ts)
        elif value < self.limit - self.hysteresis:
            since, fired = ep.since, ep.fired
            ep.since, ep.fired = None, False
            if fired and since is not None:
                return SustainedEvent(cluster, self.metric, "cleared", value, self.limit, since, ts)
        return None

    def observe_status(self, status: NormalisedStatus) -> SustainedEvent | None:
        m = status.values.get(self.metric)
        return None if m is None else self.observe(status.cluster, m.value, m.ts)

    def is_sustained(self, cluster: str) -> bool:
        ep = self._ep.get(cluster)
        return ep is not None and ep.fired

    def above_since(self, cluster: str) -> float | None:
        ep = self._ep.get(cluster)
        return None if ep is None else ep.since

    def forget(self, cluster: str) -> None:
        self._ep.pop(cluster, None)
