"""Pull collectors: metrics read from somewhere other than an agent, fed into the same pipeline (SPEC F5).

A collector is any object with::

    source: Source                                   # "prometheus", "kubernetes", …
    def handles(self, cluster: ClusterInfo) -> bool   # should it pull this cluster?
    async def collect(self, cluster: ClusterInfo) -> MetricsReport | Mapping | None
    async def aclose(self) -> None

`run_collectors` pulls each cluster on its own effective interval — the fastest need among the
subscriptions that match it (SPEC C1, `drods.monitor.subscriptions`), ``collectIntervalSeconds``
when nobody asks for more — calling every collector that handles it, and passes the reports to
`MonitorService.ingest` with the collector's ``source``, so pulled values go
through the same normalisation, rate control, thresholds and history as pushed ones, and carry
their provenance. Built in: `PrometheusCollector` (clusters whose ``spec.prometheus`` is set).
Others are handed to `MonitorCollectors` when the process is assembled.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import math
import time
from collections.abc import Callable, Mapping
from typing import Any, Protocol, runtime_checkable

from pydantic import ValidationError

from drods.machinery.periodic import Periodic
from drods.monitor.fleetview import ClusterInfo
from drods.monitor.report import MetricsReport, Source
from drods.monitor.service import MonitorService
from drods.monitor.subscriptions import subscriptions_of

RESCAN_S = 1.0  # the longest the scheduler sleeps before re-reading clusters and their intervals
MIN_INTERVAL_S = 0.05  # guard against a zero interval turning into a busy loop
SCHEDULE_NAME = "monitor-collectors"  # the scheduling passes' name in the reconcile metrics


@runtime_checkable
class Collector(Protocol):
    source: Source

    def handles(self, cluster: ClusterInfo) -> bool: ...

    async def collect(self, cluster: ClusterInfo) -> MetricsReport | Mapping[str, Any] | None: ...

    async def aclose(self) -> None: ...


class _Ingest(Protocol):
    async def ingest(self, report: MetricsReport, source: Source = "push") -> Any: ...

    async def record_collect_failure(self, cluster: str, source: str, error: str) -> None: ...


async def _collect(service: _Ingest, col: Collector, info: ClusterInfo, sem: asyncio.Semaphore,
                   timeout_s: float) -> int:
    """Pull one cluster through one collector; 1 if a report was ingested. Never raises (SEC4)."""
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
            with contextlib.suppress(Exception):
                await service.record_collect_failure(info.name, col.source, msg or type(e).__name__)
            return 0


async def run_collectors(service: _Ingest, collectors: Callable[[], list[Collector]],
                         clusters: Callable[[], list[ClusterInfo]], *, interval_s: float,
                         concurrency: int = 32, timeout_s: float = 10.0,
                         interval_for: Callable[[ClusterInfo], float] | None = None,
                         monitor: MonitorService | None = None) -> None:
    """Pull every cluster on its own interval until cancelled.

    ``interval_for(cluster)`` gives a cluster's interval, capped at ``interval_s`` (the default and
    the slowest). Without it, a `MonitorService`'s subscriptions decide (`subscriptions_of`: the
    ``monitor``'s, else the ``service``'s when it is one); anything else is pulled every ``interval_s``.
    """
    source = monitor if monitor is not None else service
    if interval_for is None and isinstance(source, MonitorService):
        subs = subscriptions_of(source)
        async with subs.using():
            await _pull_on_schedule(service, collectors, clusters, subs.seconds_for, interval_s,
                                    concurrency, timeout_s)
        return
    await _pull_on_schedule(service, collectors, clusters, interval_for or (lambda _: interval_s), interval_s,
                            concurrency, timeout_s)


class _Schedule:
    """The scheduling loop of `run_collectors`: one pass starts every pull that is due (each
    cluster on its own interval) and says when the next one is due; the wait between passes
    ends then, or earlier when a pull finishes."""

    def __init__(self, service: _Ingest, collectors: Callable[[], list[Collector]],
                 clusters: Callable[[], list[ClusterInfo]], interval_for: Callable[[ClusterInfo], float],
                 ceiling_s: float, concurrency: int, timeout_s: float) -> None:
        self.service = service
        self.collectors = collectors
        self.clusters = clusters
        self.interval_for = interval_for
        self.ceiling_s = ceiling_s
        self.timeout_s = timeout_s
        self.sem = asyncio.Semaphore(concurrency)
        self.last: dict[str, float] = {}  # monotonic time the cluster's last pull started
        self.running: dict[str, asyncio.Task[int]] = {}
        self.wake = asyncio.Event()
        self.next_at = 0.0

    def _finished(self, name: str, task: asyncio.Task[int]) -> None:
        if self.running.get(name) is task:
            del self.running[name]
        self.wake.set()  # it may be overdue already

    async def _pull(self, cols: list[Collector], info: ClusterInfo) -> int:
        return sum(await asyncio.gather(*(_collect(self.service, c, info, self.sem, self.timeout_s) for c in cols)))

    async def step(self) -> None:
        now = time.monotonic()
        self.next_at = now + min(self.ceiling_s, RESCAN_S)  # a failed pass rescans then
        cols = self.collectors()
        infos = self.clusters()
        for info in infos:
            mine = [c for c in cols if c.handles(info)]
            if not mine or info.name in self.running:
                continue
            every = min(max(self.interval_for(info), MIN_INTERVAL_S), self.ceiling_s)
            due = self.last.get(info.name, -math.inf) + every
            if due <= now:
                self.last[info.name] = now
                task = asyncio.create_task(self._pull(mine, info), name=f"collect-{info.name}")
                self.running[info.name] = task
                task.add_done_callback(functools.partial(self._finished, info.name))
                due = now + every
            self.next_at = min(self.next_at, due)
        for gone in self.last.keys() - {i.name for i in infos}:
            del self.last[gone]

    async def wait(self) -> None:
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(max(self.next_at - time.monotonic(), 0.0)):
                await self.wake.wait()

    async def stop(self) -> None:
        tasks = list(self.running.values())
        for t in tasks:
            t.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)


async def _pull_on_schedule(service: _Ingest, collectors: Callable[[], list[Collector]],
                            clusters: Callable[[], list[ClusterInfo]], interval_for: Callable[[ClusterInfo], float],
                            ceiling_s: float, concurrency: int, timeout_s: float) -> None:
    """Each cluster is due ``interval`` after its last pull started; intervals are re-read on
    every wake-up (at least every `RESCAN_S`), so a new or removed need applies within a second.
    A cluster is never pulled twice at once, and a slow one delays nobody else (one task each).
    The scheduling passes are one `Periodic` (``monitor-collectors``): a failed pass is logged and
    counted, and the next one comes at the rescan."""
    schedule = _Schedule(service, collectors, clusters, interval_for, ceiling_s, concurrency, timeout_s)
    try:
        await Periodic(SCHEDULE_NAME, schedule.step, None, wake=schedule.wake, wait=schedule.wait,
                       first_at_start=True).run()
    finally:
        await schedule.stop()
