"""Monitoring's runnables (registered with the manager by `drods.assembly`).

* `MonitorMaintenance` — every replica: history flush, series downsampling/retention, forecast
  refresh, staleness checks, failure-log retention. Idempotent across replicas.
* `MonitorCollectors` — single-active: pull collectors (Prometheus built in, plus any given).

Automatic operations are the descheduler's (`drods.controllers.descheduler`).
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

from drods.machinery.periodic import every
from drods.monitor.collectors import Collector, run_collectors
from drods.monitor.collectors.prometheus import DEFAULT_COLLECT_PROMQL, PrometheusCollector
from drods.monitor.service import MonitorService


class MonitorMaintenance:
    def __init__(self, monitor: MonitorService) -> None:
        self.monitor = monitor

    async def run(self) -> None:
        svc = self.monitor
        await svc.start()
        s = svc.settings
        try:
            await asyncio.gather(
                every(s.flushIntervalSeconds, svc.flush, "flush"),
                every(s.maintenanceIntervalSeconds, svc.maintain_series, "series maintenance"),
                every(s.forecastIntervalSeconds, svc.refresh_forecasts, "forecast refresh"),
                every(s.staleCheckIntervalSeconds, svc.check_staleness, "staleness"),
                every(3600.0, svc.prune_history, "history retention"),
            )
        finally:
            await svc.flush(force=True)


class MonitorCollectors:
    """Pulls every cluster at the interval its subscriptions ask for; ``extra`` collectors run
    beside the built-in Prometheus one."""

    def __init__(self, monitor: MonitorService, extra: Sequence[Collector] = ()) -> None:
        self.monitor = monitor
        self.extra = list(extra)

    async def run(self) -> None:
        svc = self.monitor
        await svc.start()
        s = svc.settings
        prom = PrometheusCollector({**DEFAULT_COLLECT_PROMQL, **s.promql}, window=s.promqlWindow,
                                   timeout_s=s.collectTimeoutSeconds, clock=svc.clock)
        try:
            await run_collectors(svc, lambda: [prom, *self.extra], lambda: list(svc.fleet.clusters.values()),
                                 interval_s=s.collectIntervalSeconds, concurrency=s.collectConcurrency,
                                 timeout_s=s.collectTimeoutSeconds)
        finally:
            await prom.aclose()
