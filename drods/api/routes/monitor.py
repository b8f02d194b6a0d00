"""API8 ``/api/v1/monitor/…``: the live fleet view, forecasts, surge signal, automatic operations.

``GET /api/v1/monitor/realtime`` answers from this replica's watch-fed `FleetView` (no store
read), so it is as fresh as the last status write — every accepted report whose visible status
changed, and a heartbeat every ``heartbeatSeconds``. ``?watch=true`` turns it into an NDJSON
stream: one line now, then one whenever the view changes (woken by the store watch on
``/status/clusters/`` and on cluster objects; re-evaluated every few seconds so clusters going
stale show up too), for ``timeoutSeconds`` (default 1800).

``/api/v1/monitor/subscriptions[/{name}]`` (SPEC C1): who needs how fresh a status of which
clusters; the collection interval of each cluster follows the fastest need
(`drods.monitor.subscriptions`). Reading needs the viewer role, writing operator or admin.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from collections.abc import AsyncIterator
from typing import Any

from fastapi import APIRouter, Body, Depends, Path, Query, Request
from fastapi.responses import Response, StreamingResponse
from pydantic import BaseModel, Field

from drods.api.auth import Principal
from drods.api.context import ApiContext, authenticate, context, monitoring
from drods.api.json_response import JSONResponse
from drods.api.schemas import ERROR_RESPONSES
from drods.errors import ApiError, Conflict, Invalid, not_found, validation_failed
from drods.monitor.fleet import RealtimeSnapshot
from drods.monitor.report import iso
from drods.monitor.service import MonitorService
from drods.monitor.subscriptions import (
    BUILTIN_SETTINGS,
    MAX_SUBSCRIPTIONS,
    NAME_PATTERN,
    SubscriptionBody,
    SubscriptionList,
    Subscriptions,
    SubscriptionView,
    subscriptions_of,
)

log = logging.getLogger(__name__)

router = APIRouter(prefix="/api/v1/monitor", tags=["monitor"], responses=ERROR_RESPONSES)

_RFC3339 = {"format": "date-time"}
MAX_WATCH_SECONDS = 24 * 3600


class ClusterRealtime(BaseModel):
    ready: bool | None = Field(description="the Cluster's Ready condition; null while Unknown (never heard from)")
    active: bool = Field(description="ready and reporting within activeMaxAgeSeconds")
    waterLevel: float | None = Field(description="of the latest accepted report")
    schedulerWaterLevel: float | None = Field(description="what the scheduler sees (after rate control)")
    reportAgeSeconds: float | None


class RealtimeView(RealtimeSnapshot):
    """API8 plus per-cluster detail."""

    clusters: dict[str, ClusterRealtime]


class ForecastView(BaseModel):
    cluster: str
    minutes: float
    at: str
    waterLevel: float | None = Field(description="forecast water level (0..1); null: see `reason`")
    currentWaterLevel: float | None
    method: str | None = Field(default=None, description="holt_winters, holt or last_value (too little history)")
    fittedAt: str | None = Field(default=None, description="when the forecast was fitted (refitted hourly)")
    reason: str | None = Field(default=None, description="why waterLevel is null")


def realtime_body(svc: MonitorService) -> dict[str, Any]:
    """Each cluster's latest accepted report (``schedulerWaterLevel``: the rate-controlled view)."""
    snap, details = svc.fleet.realtime(svc.settings.activeMaxAgeSeconds,
                                       latest=svc.pipeline.normaliser.latest_all())
    return snap.model_dump() | {"clusters": details}


@router.get("/realtime", summary="Fleet view (API8); ?watch=true streams changes as NDJSON",
            response_model=RealtimeView,
            description="With `watch=true` (and optional `timeoutSeconds`, default 1800) the answer is an "
                        "`application/x-ndjson` stream: one JSON line now and one per change.")
async def get_realtime(request: Request, _: Principal = Depends(authenticate)) -> Response:
    svc = await monitoring(request)
    if request.query_params.get("watch") in ("true", "1"):
        try:
            timeout = float(request.query_params.get("timeoutSeconds", "1800"))
        except ValueError:
            timeout = -1.0
        if not 0 < timeout <= MAX_WATCH_SECONDS:
            raise Invalid("timeoutSeconds must be a number in (0, 86400]",
                          {"fields": [{"field": "timeoutSeconds", "message": "must be a number in (0, 86400]"}]})
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
        while (remaining := deadline - loop.time()) > 0 and not ctx.stopping.is_set():
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
                       minutes: float = Query(default=30.0, gt=0, le=7 * 24 * 60, allow_inf_nan=False),
                       _: Principal = Depends(authenticate)) -> JSONResponse:
    svc = await monitoring(request)
    if await svc.cluster(cluster) is None:
        raise not_found("Cluster", cluster)
    fc = svc.forecaster
    if fc.is_due(cluster):
        with contextlib.suppress(Exception):  # no history / Prometheus down: answer null, not 500
            await fc.refresh(cluster)
    entry = svc.fleet.status(cluster)
    current = entry.status.water_level if entry is not None and entry.status is not None else None
    level, fit = fc.water_level_in(cluster, minutes), fc.fit_of(cluster)
    reason = None if level is not None else "no history to fit yet" if fit is None else \
        f"past the forecast's horizon of {fc.horizon_s / 60:g} minutes"
    body = ForecastView(cluster=cluster, minutes=minutes, at=iso(svc.clock() + minutes * 60), waterLevel=level,
                        currentWaterLevel=current, method=None if fit is None else fit[0],
                        fittedAt=None if fit is None else iso(fit[1]), reason=reason)
    return JSONResponse(body.model_dump())


@router.get("/surge", summary="Traffic surge signal per cluster and for the fleet (S5)")
async def get_surge(request: Request, _: Principal = Depends(authenticate)) -> JSONResponse:
    svc = await monitoring(request)
    doc = svc.fleet.surge or {}
    return JSONResponse({"fleet": doc.get("fleet") or {"active": False, "magnitude": 0.0, "clusters": []},
                         "clusters": doc.get("clusters") or {}, "timestamp": doc.get("timestamp")})


@router.get("/operations", summary="Automatic operations decided by the monitoring policy (newest first)")
async def get_operations(request: Request,
                         startTime: str | None = Query(default=None, json_schema_extra=_RFC3339),
                         endTime: str | None = Query(default=None, json_schema_extra=_RFC3339),
                         maxEntries: int = Query(default=100, ge=1, le=10_000),
                         _: Principal = Depends(authenticate)) -> JSONResponse:
    from drods.api.routes.history import time_window

    svc = await monitoring(request)
    start, end = time_window(svc, startTime, endTime)
    page = await svc.operations.query(start, end, maxEntries)
    return JSONResponse({"items": page.items, "truncated": page.truncated})


# -- collection subscriptions (C1) -----------------------------------------------------------

_SUB_NAME = Path(min_length=1, max_length=253, pattern=NAME_PATTERN, description="subscription name")


async def _subscriptions(request: Request) -> tuple[MonitorService, Subscriptions]:
    svc = await monitoring(request)
    subs = subscriptions_of(svc)
    await subs.ensure_started()
    return svc, subs


def _read_only(name: str) -> ApiError:
    setting = BUILTIN_SETTINGS[name]
    return Conflict(f"subscription {name!r} is built in; change monitoring.{setting} in the configuration "
                    "file (drods.yaml) instead",
                    {"name": name, "setting": setting},
                    code="SUBSCRIPTION_READ_ONLY")


@router.get("/subscriptions", summary="Collection subscriptions and each cluster's effective interval (C1)",
            response_model=SubscriptionList)
async def list_subscriptions(request: Request, _: Principal = Depends(authenticate)) -> JSONResponse:
    svc, subs = await _subscriptions(request)
    items = await subs.read()
    s = svc.settings
    body = SubscriptionList(items=[x.to_view() for x in items],
                            intervals={c: iv.to_view() for c, iv in subs.intervals(svc.fleet.clusters, items).items()},
                            minCollectIntervalSeconds=min(s.minCollectIntervalSeconds, s.collectIntervalSeconds),
                            collectIntervalSeconds=s.collectIntervalSeconds)
    return JSONResponse(body.model_dump(mode="json"))


@router.get("/subscriptions/{name}", summary="One collection subscription", response_model=SubscriptionView)
async def get_subscription(request: Request, name: str = _SUB_NAME,
                           _: Principal = Depends(authenticate)) -> JSONResponse:
    subs = (await _subscriptions(request))[1]
    sub = await subs.get(name)
    if sub is None:
        raise not_found("Subscription", name)
    return JSONResponse(sub.to_view().model_dump(mode="json"))


async def _put(request: Request, name: str, body: SubscriptionBody, principal: Principal) -> JSONResponse:
    if body.name is not None and body.name != name:
        raise validation_failed("name in the body differs from the name in the path",
                                [{"field": "name", "message": f"must be {name!r}"}])
    subs = (await _subscriptions(request))[1]
    if name in BUILTIN_SETTINGS:
        raise _read_only(name)
    if len(subs.cached()) >= MAX_SUBSCRIPTIONS and await subs.get(name) is None:
        raise Conflict(f"at most {MAX_SUBSCRIPTIONS} subscriptions",
                       {"limit": MAX_SUBSCRIPTIONS},
                       code="TOO_MANY_SUBSCRIPTIONS")
    sub, created = await subs.put(name, body, principal.subject)
    return JSONResponse(sub.to_view().model_dump(mode="json"), status_code=201 if created else 200)


_PUT_DOC = ("Create or replace (201 / 200). With `ttlSeconds` the subscription lapses unless PUT again "
            "within that time (the need of a subscriber that died goes away by itself).")


@router.put("/subscriptions/{name}", summary="Declare how fresh a status this subscriber needs (C1)",
            response_model=SubscriptionView, responses={201: {"model": SubscriptionView}}, description=_PUT_DOC)
async def put_subscription(request: Request, name: str = _SUB_NAME, body: SubscriptionBody = Body(...),
                           principal: Principal = Depends(authenticate)) -> JSONResponse:
    return await _put(request, name, body, principal)


@router.put("/subscriptions", summary="Declare a need, named in the body (C1)", response_model=SubscriptionView,
            responses={201: {"model": SubscriptionView}}, description=_PUT_DOC)
async def put_subscription_named(request: Request, body: SubscriptionBody = Body(...),
                                 principal: Principal = Depends(authenticate)) -> JSONResponse:
    if body.name is None:
        raise validation_failed("request validation failed", [{"field": "name", "message": "Field required"}])
    return await _put(request, body.name, body, principal)


@router.delete("/subscriptions/{name}", summary="Withdraw a need", response_model=SubscriptionView)
async def delete_subscription(request: Request, name: str = _SUB_NAME,
                              _: Principal = Depends(authenticate)) -> JSONResponse:
    subs = (await _subscriptions(request))[1]
    if name in BUILTIN_SETTINGS:
        raise _read_only(name)
    sub = await subs.delete(name)
    if sub is None:
        raise not_found("Subscription", name)
    return JSONResponse(sub.to_view().model_dump(mode="json"))


__all__ = ["router"]
