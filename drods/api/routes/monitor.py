"""API8 ``/api/v1/monitor/…``: the live fleet view, forecasts, surge signal, automatic operations.

``GET /api/v1/monitor/realtime`` answers from this replica's watch-fed `FleetView` (no store
read), so it is as fresh as the last status write — every accepted report whose visible status
changed, and a heartbeat every ``heartbeatSeconds``. ``?watch=true`` turns it into an NDJSON
stream: one line now, then one whenever the view changes (woken by the store watch on
``/status/clusters/`` and on cluster objects; re-evaluated every few seconds so clusters going
stale show up too), for ``timeoutSeconds`` (default 1800).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from collections.abc import AsyncIterator
from typing import Any

from fastapi import APIRouter, Depends, FastAPI, Query, Request
from fastapi.responses import JSONResponse, Response, StreamingResponse
from pydantic import BaseModel, Field

from drods.api.auth import Action, Principal
from drods.api.context import ApiContext, context, require
from drods.api.schemas import ERROR_RESPONSES
from drods.errors import ApiError, not_found
from drods.monitor.fleet import RealtimeSnapshot
from drods.monitor.report import iso
from drods.monitor.service import MonitorService, get_service

log = logging.getLogger(__name__)

router = APIRouter(prefix="/api/v1/monitor", tags=["monitor"], responses=ERROR_RESPONSES)

_RFC3339 = {"format": "date-time"}
MAX_WATCH_SECONDS = 24 * 3600


class ClusterRealtime(BaseModel):
    ready: bool
    active: bool = Field(description="ready and reporting within activeMaxAgeSeconds")
    waterLevel: float | None
    reportAgeSeconds: float | None


class RealtimeView(RealtimeSnapshot):
    """API8 plus per-cluster detail."""

    clusters: dict[str, ClusterRealtime]


class ForecastView(BaseModel):
    cluster: str
    minutes: float
    at: str
    waterLevel: float | None = Field(description="forecast water level (0..1); null without history")
    currentWaterLevel: float | None


async def _service(request: Request) -> MonitorService:
    svc = get_service(context(request))
    await svc.start()
    return svc


def realtime_body(svc: MonitorService) -> dict[str, Any]:
    snap, details = svc.fleet.realtime(svc.settings.activeMaxAgeSeconds)
    return snap.model_dump() | {"clusters": details}


@router.get("/realtime", summary="Fleet view (API8); ?watch=true streams changes as NDJSON",
            response_model=RealtimeView,
            description="With `watch=true` (and optional `timeoutSeconds`, default 1800) the answer is an "
                        "`application/x-ndjson` stream: one JSON line now and one per change.")
async def get_realtime(request: Request, _: Principal = Depends(require(Action.READ))) -> Response:
    svc = await _service(request)
    if request.query_params.get("watch") in ("true", "1"):
        try:
            timeout = float(request.query_params.get("timeoutSeconds", "1800"))
        except ValueError:
            timeout = -1.0
        if not 0 < timeout <= MAX_WATCH_SECONDS:
            raise ApiError(422, "VALIDATION_FAILED", "timeoutSeconds must be a number in (0, 86400]",
                           {"fields": [{"field": "timeoutSeconds", "message": "out of range"}]})
        ctx = context(request)
        return StreamingResponse(_watch(ctx, svc, timeout), media_type="application/x-ndjson")
    return JSONResponse(realtime_body(svc))


async def _watch(ctx: ApiContext, svc: MonitorService, duration_s: float) -> AsyncIterator[bytes]:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + duration_s
    recheck = max(min(5.0, svc.settings.activeMaxAgeSeconds / 4), 0.05)
    version = -1
    last: dict[str, Any] | None = None
    ctx.metrics.watches.inc()
    try:
        while (remaining := deadline - loop.time()) > 0:
            version = await svc.fleet.wait_change(version, min(recheck, remaining))
            body = realtime_body(svc)
            # Report ages tick every second; a line is worth sending when something else changed.
            key = {k: v for k, v in body.items() if k not in ("timestamp", "clusters")}
            key["clusters"] = {c: {f: x for f, x in d.items() if f != "reportAgeSeconds"}
                               for c, d in body["clusters"].items()}
            if key != last:
                last = key
                yield (json.dumps(body, separators=(",", ":")) + "\n").encode()
                # Coalesce bursts (many clusters publishing at once) into one line per interval.
                await asyncio.sleep(min(svc.settings.realtimeMinIntervalSeconds, max(remaining, 0)))
    finally:
        ctx.metrics.watches.dec()


@router.get("/forecast", summary="Forecast water level of one cluster (F6)", response_model=ForecastView)
async def get_forecast(request: Request, cluster: str = Query(min_length=1, max_length=253),
                       minutes: float = Query(default=30.0, gt=0, le=7 * 24 * 60),
                       _: Principal = Depends(require(Action.READ))) -> JSONResponse:
    svc = await _service(request)
    if await svc.cluster(cluster) is None:
        raise not_found("Cluster", cluster)
    fc = svc.forecaster
    if fc.is_due(cluster):
        with contextlib.suppress(Exception):  # no history / Prometheus down: answer null, not 500
            await fc.refresh(cluster)
    entry = svc.fleet.status(cluster)
    current = entry.status.water_level if entry is not None and entry.status is not None else None
    body = ForecastView(cluster=cluster, minutes=minutes, at=iso(svc.clock() + minutes * 60),
                        waterLevel=fc.water_level_in(cluster, minutes), currentWaterLevel=current)
    return JSONResponse(body.model_dump())


@router.get("/surge", summary="Traffic surge signal per cluster and for the fleet (S5)")
async def get_surge(request: Request, _: Principal = Depends(require(Action.READ))) -> JSONResponse:
    svc = await _service(request)
    doc = svc.fleet.surge or {}
    return JSONResponse({"fleet": doc.get("fleet") or {"active": False, "magnitude": 0.0, "clusters": []},
                         "clusters": doc.get("clusters") or {}, "timestamp": doc.get("timestamp")})


@router.get("/operations", summary="Automatic operations decided by the monitoring policy (newest first)")
async def get_operations(request: Request,
                         startTime: str | None = Query(default=None, json_schema_extra=_RFC3339),
                         endTime: str | None = Query(default=None, json_schema_extra=_RFC3339),
                         maxEntries: int = Query(default=100, ge=1, le=10_000),
                         _: Principal = Depends(require(Action.READ))) -> JSONResponse:
    from drods.api.routes.history import time_window

    svc = await _service(request)
    start, end = time_window(svc, startTime, endTime)
    page = await svc.operations.query(start, end, maxEntries)
    return JSONResponse({"items": page.items, "truncated": page.truncated})


def install(app: FastAPI, ctx: ApiContext) -> None:
    """Start monitoring with the app and stop it (flushing history) before the store closes.

    The service is built at startup, so ``ctx.services["monitor_settings"]`` / ``["monitor_clock"]``
    set between `create_app` and serving are honoured.
    """
    inner = app.router.lifespan_context

    @contextlib.asynccontextmanager
    async def lifespan(a: Any) -> AsyncIterator[Any]:
        async with inner(a) as state:
            svc = get_service(ctx)
            try:
                await svc.start()
            except Exception as e:  # noqa: BLE001 - routes retry start(); the API must come up
                log.warning("monitoring did not start: %s", e)
            try:
                yield state
            finally:
                await svc.close()

    app.router.lifespan_context = lifespan


__all__ = ["install", "router"]
