"""Pull collectors: metrics read from somewhere other than an agent, fed into the same pipeline (SPEC F5).

A collector is any object with::

    source: Source                                   # "prometheus", "kubernetes", …
    def handles(self, cluster: ClusterInfo) -> bool   # should it pull this cluster?
    async def collect(self, cluster: ClusterInfo) -> MetricsReport | Mapping | None
    async def aclose(self) -> None

`run_collectors` calls every collector for every cluster it handles once per interval and passes
the reports to `MonitorService.ingest` with the collector's ``source``, so pulled values go
through the same normalisation, rate control, thresholds and history as pushed ones, and carry
their provenance. Built in: `PrometheusCollector` (clusters whose ``spec.prometheus`` is set).
Other components add theirs by appending to ``ctx.services["monitor_collectors"]`` (the
Kubernetes-API collector of the members package is meant to plug in there).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Iterable, Mapping
from typing import Any, Protocol, runtime_checkable

from pydantic import ValidationError

from drods.monitor.fleetview import ClusterInfo
from drods.monitor.report import MetricsReport, Source

log = logging.getLogger(__name__)


@runtime_checkable
class Collector(Protocol):
    source: Source

    def handles(self, cluster: ClusterInfo) -> bool: ...

    async def collect(self, cluster: ClusterInfo) -> MetricsReport | Mapping[str, Any] | None: ...

    async def aclose(self) -> None: ...


class _Ingest(Protocol):
    async def ingest(self, report: MetricsReport, source: Source = "push") -> Any: ...

    async def record_collect_failure(self, cluster: str, source: str, error: str) -> None: ...


async def collect_once(service: _Ingest, collectors: Iterable[Collector], clusters: Iterable[ClusterInfo], *,
                       concurrency: int = 32, timeout_s: float = 10.0) -> int:
    """One round; returns the number of reports ingested. A failing cluster never stops the others."""
    sem = asyncio.Semaphore(concurrency)

    async def one(col: Collector, info: ClusterInfo) -> int:
        async with sem:
            try:
                async with asyncio.timeout(timeout_s):
                    got = await col.collect(info)
                if got is None:
                    return 0
                report = got if isinstance(got, MetricsReport) else MetricsReport.model_validate(got)
                await service.ingest(report, source=col.source)
                return 1
            except Exception as e:  # noqa: BLE001 - isolation between clusters (SEC4); includes timeouts
                msg = str(e) if not isinstance(e, ValidationError) else f"invalid report: {e.errors()[:3]}"
                await service.record_collect_failure(info.name, col.source, msg or type(e).__name__)
                return 0

    jobs = [one(c, i) for i in clusters for c in collectors if c.handles(i)]
    return sum(await asyncio.gather(*jobs))


async def run_collectors(service: _Ingest, collectors: Callable[[], list[Collector]],
                         clusters: Callable[[], list[ClusterInfo]], *, interval_s: float,
                         concurrency: int = 32, timeout_s: float = 10.0) -> None:
    """Collect every ``interval_s`` (wall clock) until cancelled."""
    while True:
        started = time.monotonic()
        try:
            await collect_once(service, collectors(), clusters(), concurrency=concurrency, timeout_s=timeout_s)
        except Exception:
            log.exception("collection round failed")
        await asyncio.sleep(max(interval_s - (time.monotonic() - started), 0.0))
