"""The in-process ingest path: report → normalise → rate control → thresholds/surge → history.

This is the one object the API server needs for PUT /api/v1/metrics: call `ingest` per report
and `flush` (or `aflush`) every few seconds to write the buffered raw samples to history in
one transaction. `visible` is what the scheduler reads; `events` are what the status store
publishes for watchers (SPEC C3).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from datetime import datetime

from drods.monitor.metric_history import MetricHistory
from drods.monitor.rate_control import StatusDamper
from drods.monitor.report import (
    CPU_UTILISATION,
    WATER_LEVEL,
    MetricsReport,
    NormalisedStatus,
    Normaliser,
    Rejection,
    Source,
    to_epoch,
)
from drods.monitor.series import Sample, SeriesStore
from drods.monitor.surge import SurgeDetector, SurgeSignal
from drods.monitor.thresholds import (
    SustainedDetector,
    SustainedEvent,
    ThresholdDetector,
    ThresholdEvent,
    ThresholdRule,
)

DEFAULT_RULES: tuple[ThresholdRule, ...] = (
    ThresholdRule(CPU_UTILISATION, 0.7, hysteresis=0.05),
    ThresholdRule(WATER_LEVEL, 0.8, hysteresis=0.05),
    ThresholdRule(WATER_LEVEL, 0.9, hysteresis=0.05),
)


@dataclass(slots=True)
class IngestResult:
    status: NormalisedStatus | None = None  # raw normalised status (None when rejected)
    visible: NormalisedStatus | None = None  # after rate control
    changed: list[str] = field(default_factory=list)  # metrics whose visible value moved
    events: list[ThresholdEvent] = field(default_factory=list)
    sustained: list[SustainedEvent] = field(default_factory=list)
    surge: SurgeSignal | None = None
    rejection: Rejection | None = None


class MonitorPipeline:
    def __init__(
        self,
        *,
        series: SeriesStore | None = None,
        normaliser: Normaliser | None = None,
        damper: StatusDamper | None = None,
        thresholds: ThresholdDetector | None = None,
        sustained: Iterable[SustainedDetector] = (),
        surge: SurgeDetector | None = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.series = series
        self.normaliser = normaliser or Normaliser()
        self.damper = damper or StatusDamper()
        self.thresholds = thresholds or ThresholdDetector(DEFAULT_RULES)
        self.sustained = list(sustained)
        self.surge = surge or SurgeDetector()
        self.clock = clock
        self.visible: dict[str, NormalisedStatus] = {}
        self._buffer: list[Sample] = []

    def ingest(
        self, report: MetricsReport, now: datetime | float | None = None, source: Source = "push"
    ) -> IngestResult:
        now_ts = self.clock() if now is None else to_epoch(now)
        st = self.normaliser(report, now_ts, source)
        if isinstance(st, Rejection):
            if st.history is not None:  # stale: history gets the measurement, the live view does not
                self._buffer.extend(SeriesStore.samples_of(st.history))
            return IngestResult(rejection=st)
        self._buffer.extend(SeriesStore.samples_of(st))
        visible, changed = self.damper.apply(st, now_ts)
        self.visible[st.cluster] = visible
        events = self.thresholds.observe_status(st)
        sustained = [e for d in self.sustained if (e := d.observe_status(st)) is not None]
        surge = self.surge.observe_status(st)
        return IngestResult(st, visible, changed, events, sustained, surge)

    def take_buffer(self) -> list[Sample]:
        buf, self._buffer = self._buffer, []
        return buf

    def flush(self) -> int:
        """Write buffered raw samples to history in one transaction."""
        buf = self.take_buffer()
        return self.series.append(buf) if self.series is not None and buf else 0

    async def aflush(self, store: MetricHistory) -> int:
        buf = self.take_buffer()
        return await store.append(buf) if buf else 0

    def forget(self, cluster: str) -> None:
        """Drop all per-cluster state (cluster deregistered)."""
        self.visible.pop(cluster, None)
        self.normaliser.forget(cluster)
        self.damper.forget(cluster)
        self.thresholds.forget(cluster)
        for d in self.sustained:
            d.forget(cluster)
        self.surge.forget(cluster)
