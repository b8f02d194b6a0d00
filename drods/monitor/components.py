"""Monitoring's runnables (registered with the manager by `drods.assembly`).

* `MonitorMaintenance` — every replica: history flush, series downsampling/retention, forecast
  refresh, staleness checks, failure-log retention. Idempotent across replicas.
* `MonitorCollectors` — single-active: pull collectors (Prometheus built in, plus any given).

Automatic operations are the descheduler's (`drods.controllers.descheduler`).
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

from drods.machinery.periodic import Periodic
from drods.monitor.collectors import Collector, run_collectors
from drods.monitor.collectors.prometheus import DEFAULT_COLLECT_PROMQL, PrometheusCollector
from drods.monitor.report import MetricsReport, Source
from drods.monitor.service import IngestOutcome, MonitorService
from drods.store import Store


class MonitorMaintenance:
    def __init__(self, monitor: MonitorService) -> None:
        self.monitor = monitor

    async def run(self) -> None:
        svc = self.monitor
        await svc.start()
        s = svc.settings
        passes = (Periodic("monitor-flush", svc.flush, s.flushIntervalSeconds),
                  Periodic("monitor-series-maintenance", svc.maintain_series, s.maintenanceIntervalSeconds),
                  Periodic("monitor-forecast-refresh", svc.refresh_forecasts, s.forecastIntervalSeconds),
                  Periodic("monitor-staleness", svc.check_staleness, s.staleCheckIntervalSeconds),
                  Periodic("monitor-history-retention", svc.prune_history, 3600.0))
        try:
            await asyncio.gather(*(p.run() for p in passes))
        finally:
            await svc.flush(force=True)


class _FencedIngest:
    """The monitor's ingest with every write through the collectors' leadership (A6)."""

    def __init__(self, monitor: MonitorService, store: Store) -> None:
        self.monitor = monitor
        self.store = store

    async def ingest(self, report: MetricsReport, source: Source = "push") -> IngestOutcome:
        return await self.monitor.ingest(report, source, store=self.store)

    async def record_collect_failure(self, cluster: str, source: str, error: str) -> None:
        await self.monitor.record_collect_failure(cluster, source, error)


class MonitorCollectors:
    """Pulls every cluster at the interval its subscriptions ask for; ``extra`` collectors run
    beside the built-in Prometheus one. ``store``: the leader's fenced view, which every write of
    a pulled report goes through (a deposed collector writes nothing)."""

    def __init__(self, monitor: MonitorService, extra: Sequence[Collector] = (), *, store: Store | None = None) -> None:
        self.monitor = monitor
        self.extra = list(extra)
        self.store = store

    async def run(self) -> None:
        svc = self.monitor
        await svc.start()
        s = svc.settings
        prom = PrometheusCollector({**DEFAULT_COLLECT_PROMQL, **s.promql}, window=s.promqlWindow,
                                   timeout_s=s.collectTimeoutSeconds, clock=svc.clock)
        ingest = _FencedIngest(svc, self.store) if self.store is not None else svc
        try:
            await run_collectors(ingest, lambda: [prom, *self.extra], lambda: list(svc.fleet.clusters.values()),
                                 interval_s=s.collectIntervalSeconds, concurrency=s.collectConcurrency,
                                 timeout_s=s.collectTimeoutSeconds, monitor=svc)
        finally:
            await prom.aclose()
