"""Monitoring's background components for ``drods serve`` (see `drods.components`).

* `monitor_maintenance` — every replica: history flush, series downsampling/retention, forecast
  refresh, staleness checks, failure-log retention. Idempotent across replicas.
* `monitor_collectors` — leader only: pull collectors (Prometheus built in; more through
  ``ctx.services["monitor_collectors"]``).
* `monitor_autoops` — leader only: the automatic-operations policy (`drods.monitor.autoops`).
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import socket
import uuid
from collections.abc import Awaitable, Callable
from typing import Any

from drods.machinery.leader import LeaderElector
from drods.monitor.autoops import AutoOps, execute
from drods.monitor.collectors import Collector, run_collectors
from drods.monitor.collectors.prometheus import DEFAULT_COLLECT_PROMQL, PrometheusCollector
from drods.monitor.service import SUSTAINED_EVENTS_PREFIX, MonitorService, get_service
from drods.store import EventType

log = logging.getLogger(__name__)


def _identity() -> str:
    return f"{socket.gethostname()}-{os.getpid()}-{uuid.uuid4().hex[:6]}"


async def _every(interval_s: float, fn: Callable[[], Awaitable[Any]], name: str) -> None:
    """Run ``fn`` every ``interval_s`` seconds; a failure is logged and the loop goes on."""
    while True:
        await asyncio.sleep(interval_s)
        try:
            await fn()
        except asyncio.CancelledError:
            raise
        except Exception:
            log.exception("monitor task %s failed", name)


async def monitor_maintenance(ctx: Any) -> None:
    svc = get_service(ctx)
    await svc.start()
    s = svc.settings
    try:
        await asyncio.gather(
            _every(s.flushIntervalSeconds, svc.flush, "flush"),
            _every(s.maintenanceIntervalSeconds, svc.maintain_series, "series maintenance"),
            _every(s.forecastIntervalSeconds, svc.refresh_forecasts, "forecast refresh"),
            _every(s.staleCheckIntervalSeconds, svc.check_staleness, "staleness"),
            _every(3600.0, svc.prune_history, "history retention"),
        )
    finally:
        await svc.flush(force=True)


async def monitor_collectors(ctx: Any) -> None:
    svc = get_service(ctx)
    await svc.start()
    s = svc.settings
    prom = PrometheusCollector({**DEFAULT_COLLECT_PROMQL, **s.promql}, window=s.promqlWindow,
                               timeout_s=s.collectTimeoutSeconds, clock=svc.clock)

    def collectors() -> list[Collector]:
        return [prom, *ctx.services.get("monitor_collectors", [])]

    async def lead() -> None:
        await run_collectors(svc, collectors, lambda: list(svc.fleet.clusters.values()),
                             interval_s=s.collectIntervalSeconds, concurrency=s.collectConcurrency,
                             timeout_s=s.collectTimeoutSeconds)

    try:
        await LeaderElector(ctx.store, "monitor-collectors", _identity()).run(lead)
    finally:
        await prom.aclose()


def _candidates(svc: MonitorService, cluster: str) -> int:
    """Other active clusters whose water level is below their own limit: where load could go."""
    _, details = svc.fleet.realtime(svc.settings.activeMaxAgeSeconds)
    return sum(1 for c, d in details.items()
               if c != cluster and d["active"] and d["waterLevel"] is not None
               and d["waterLevel"] < svc.water_level_limit(c))


async def monitor_autoops(ctx: Any) -> None:
    svc = get_service(ctx)
    await svc.start()
    policy = svc.settings.autoops
    ops = AutoOps(policy)
    alarmed: set[str] = set()

    async def on_sustained() -> None:
        rev = await ctx.store.current_revision()
        async for ev in ctx.store.watch(SUSTAINED_EVENTS_PREFIX, start_revision=rev + 1):
            if ev.type is not EventType.PUT:
                continue
            try:
                body = json.loads(ev.kv.value)
            except ValueError:
                continue
            if body.get("kind") != "sustained":
                continue
            cluster = str(body.get("cluster"))
            reason = (f"water level {body.get('value', 0):.2f} above the limit {body.get('limit', 0):.2f} "
                      f"since {body.get('since')}")
            await execute(ops, "evacuate", cluster, reason, svc.clock(), candidates=_candidates(svc, cluster),
                          details=body, hook=ctx.services.get("reschedule"), record=svc.operations.append)

    async def preallocate() -> None:
        horizon = policy.preallocateHorizonMinutes
        _, details = svc.fleet.realtime(svc.settings.activeMaxAgeSeconds)
        for c, d in details.items():
            threshold = policy.preallocateThreshold or svc.water_level_limit(c)
            predicted = svc.forecaster.water_level_in(c, horizon)
            now_wl = d["waterLevel"]
            peak = d["active"] and predicted is not None and predicted >= threshold and \
                (now_wl is None or now_wl < threshold)
            if not peak:
                alarmed.discard(c)
                continue
            if c in alarmed:
                continue  # one decision per forecast episode
            alarmed.add(c)
            reason = f"forecast water level {predicted:.2f} within {horizon:g} min reaches {threshold:.2f}"
            await execute(ops, "preallocate", c, reason, svc.clock(), candidates=_candidates(svc, c),
                          details={"forecast": predicted, "horizonMinutes": horizon, "threshold": threshold,
                                   "waterLevel": now_wl},
                          hook=ctx.services.get("reschedule"), record=svc.operations.append)

    async def lead() -> None:
        await asyncio.gather(on_sustained(), _every(svc.settings.forecastIntervalSeconds, preallocate,
                                                    "pre-allocation"))

    await LeaderElector(ctx.store, "monitor-autoops", _identity()).run(lead)


def monitor_components() -> list[Callable[[Any], Awaitable[None]]]:
    return [monitor_maintenance, monitor_collectors, monitor_autoops]
