"""API6: agents push the latest status of their cluster; domain events go beside it.

PUT /api/v1/metrics runs the report through the monitoring pipeline (`drods.monitor.service`):

* 200 ``{"accepted": true, …}`` — applied. ``published`` says whether the scheduler-visible
  status document changed (rate control, SPEC C8, holds back jitter and flapping);
* 202 ``{"accepted": false, "stale": true, "code": "STALE_REPORT", "reason"}`` — older than
  ``staleAfterSeconds``: stored in history (``GET /api/v1/history/metrics``, within its retention)
  as a measurement of its time, but it does not change the live view; 202 ``{"accepted": false, "stale": false, "code":
  "OUT_OF_ORDER_REPORT"}`` — not newer than the last accepted report: dropped. Nothing to retry in
  either case, so not an error status. A report without ``timestamp`` was measured now;
* 422 ``VALIDATION_FAILED`` with ``details.fields[].field`` paths (e.g. ``largestNodeFree.cpu``);
* 403 when a cluster-agent token reports for another cluster; 404 for an unregistered cluster.

Rejected and invalid reports are also recorded in the failure log (at most one entry per cluster
and code per minute).

A 200 answer carries ``nextReportSeconds``: the cluster's effective collection interval (the
fastest need among the subscriptions that match it, SPEC C1, `drods.monitor.subscriptions`), so an
agent reports as often as someone needs and no more (a 202 leaves it at its previous interval).
"""

from __future__ import annotations

import contextlib
import json
import logging
import time
from collections.abc import Callable, Coroutine
from typing import Any, Literal

from fastapi import APIRouter, Body, Depends, Request, Response
from fastapi.exceptions import RequestValidationError
from fastapi.routing import APIRoute
from pydantic import BaseModel, ConfigDict, Field

from drods.api.auth import Action, Principal
from drods.api.context import authenticate, monitoring
from drods.api.json_response import JSONResponse
from drods.api.schemas import ERROR_RESPONSES
from drods.errors import field_errors_of, not_found, validation_failed
from drods.model.keys import CLUSTER_EVENTS_PREFIX
from drods.monitor.fleetview import ClusterInfo
from drods.monitor.report import MetricsReport
from drods.monitor.service import MonitorService
from drods.monitor.statusdoc import allocation_errors
from drods.monitor.subscriptions import subscriptions_of

log = logging.getLogger(__name__)


class _RecordsInvalidReports(APIRoute):
    """Body validation fails before the handler runs; this still puts it in the failure log."""

    def get_route_handler(self) -> Callable[[Request], Coroutine[Any, Any, Response]]:
        original = super().get_route_handler()

        async def handler(request: Request) -> Response:
            try:
                return await original(request)
            except RequestValidationError as e:
                if request.method == "PUT":
                    await _record_invalid(request, e)
                raise

        return handler


router = APIRouter(prefix="/api/v1/metrics", tags=["metrics"], responses=ERROR_RESPONSES,
                   route_class=_RecordsInvalidReports)


async def _record_invalid(request: Request, exc: RequestValidationError) -> None:
    principal: Principal | None = getattr(request.state, "principal", None)
    if principal is None:
        return
    try:
        body = await request.json()
    except ValueError:
        return
    cluster = body.get("cluster") if isinstance(body, dict) else None
    if not isinstance(cluster, str):
        return
    try:
        principal.require(Action.REPORT, cluster)
        svc = await monitoring(request)
        if await svc.cluster(cluster) is None:
            return
        await svc.record_invalid(cluster, field_errors_of(exc.errors()))
    except Exception as e:  # noqa: BLE001 - the 422 goes out whatever happens here
        log.debug("could not record invalid report: %s", e)


class DomainEvent(BaseModel):
    model_config = ConfigDict(extra="allow")

    cluster: str = Field(min_length=1, max_length=253)
    type: str = Field(min_length=1, max_length=64, examples=["NodeNotReady"])
    severity: str = Field(default="info", pattern="^(info|warning|critical)$")
    message: str = Field(default="", max_length=4096)
    timestamp: str | None = None


class MetricsAccepted(BaseModel):
    accepted: Literal[True]
    cluster: str
    waterLevel: float | None = Field(description="water level of this report (0..1)")
    visibleWaterLevel: float | None = Field(description="what the scheduler sees after rate control")
    clockSkewClamped: bool
    published: bool = Field(description="the scheduler-visible status document was written")
    publishReason: str | None = Field(description="changed | heartbeat | null")
    events: int = Field(description="threshold / sustained events this report raised")
    nextReportSeconds: float = Field(description="report again after this long (the cluster's effective "
                                                 "collection interval, C1)")


class MetricsNotApplied(BaseModel):
    accepted: Literal[False]
    stale: bool = Field(description="older than the staleness window: kept in history, not in the live view")
    cluster: str
    code: Literal["STALE_REPORT", "OUT_OF_ORDER_REPORT"]
    reason: str


async def _ensure_cluster(request: Request, principal: Principal, cluster: str) -> MonitorService:
    return (await _cluster_info(request, principal, cluster))[0]


async def _cluster_info(request: Request, principal: Principal, cluster: str) -> tuple[MonitorService, ClusterInfo]:
    principal.require(Action.REPORT, cluster)
    svc = await monitoring(request)
    info = await svc.cluster(cluster)
    if info is None:
        raise not_found("Cluster", cluster)
    return svc, info


async def _next_report_seconds(svc: MonitorService, info: ClusterInfo) -> float:
    subs = subscriptions_of(svc)
    if not subs.running:  # normally started with the app; a store hiccup must not fail the report
        with contextlib.suppress(Exception):
            await subs.ensure_started(sync_timeout_s=2.0)
    return round(subs.seconds_for(info), 3)


@router.post("/events", status_code=201, summary="Record a domain event")
async def post_event(request: Request, event: DomainEvent = Body(...),
                     principal: Principal = Depends(authenticate)) -> JSONResponse:
    svc = await _ensure_cluster(request, principal, event.cluster)
    key = f"{CLUSTER_EVENTS_PREFIX}{event.cluster}/{time.time_ns():020d}"
    doc: dict[str, Any] = event.model_dump(mode="json")
    await svc.leases.put(key, json.dumps(doc).encode())  # one shared lease (eventTtlSeconds), not one per event
    await svc.record_domain_event(event.cluster, doc)
    return JSONResponse({"accepted": True, "key": key}, status_code=201)


@router.put("", summary="Report the latest status of one cluster", response_model=MetricsAccepted,
            responses={202: {"model": MetricsNotApplied,
                             "description": "Received but not applied to the live view: a stale report "
                                            "(kept in history) or an out-of-order one"}})
async def put_metrics(request: Request, report: MetricsReport = Body(...),
                      principal: Principal = Depends(authenticate)) -> JSONResponse:
    svc, info = await _cluster_info(request, principal, report.cluster)
    errors = allocation_errors(report.extras)
    if errors:
        await svc.record_invalid(report.cluster, errors)
        raise validation_failed("report failed validation", errors)
    out = await svc.ingest(report, source="push")
    if out.rejection is not None:
        body = MetricsNotApplied(accepted=False, stale=out.rejection.stale, cluster=out.cluster,
                                 code=out.rejection.code, reason=out.rejection.reason)
        return JSONResponse(body.model_dump(), status_code=202)
    ok = MetricsAccepted(accepted=True, cluster=out.cluster, waterLevel=out.water_level,
                         visibleWaterLevel=out.visible_water_level, clockSkewClamped=out.clock_skew_clamped,
                         published=out.published is not None, publishReason=out.published, events=out.events,
                         nextReportSeconds=await _next_report_seconds(svc, info))
    return JSONResponse(ok.model_dump())
