"""API6: agents push the latest status of their cluster; domain events go beside it."""

from __future__ import annotations

import json
import time
from typing import Any

from fastapi import APIRouter, Body, Depends, Request
from fastapi.responses import JSONResponse
from pydantic import BaseModel, ConfigDict, Field

from drods.api.auth import Action, Principal
from drods.api.context import authenticate, context
from drods.api.routes.clusters import status_key
from drods.api.schemas import ERROR_RESPONSES
from drods.errors import not_found
from drods.model.kinds import CLUSTER
from drods.monitor.report import MetricsReport, NormalisedStatus, Normaliser, Rejection, iso

router = APIRouter(prefix="/api/v1/metrics", tags=["metrics"], responses=ERROR_RESPONSES)

EVENT_TTL_SECONDS = 3600


class DomainEvent(BaseModel):
    model_config = ConfigDict(extra="allow")

    cluster: str = Field(min_length=1, max_length=253)
    type: str = Field(min_length=1, max_length=64, examples=["NodeNotReady"])
    severity: str = Field(default="info", pattern="^(info|warning|critical)$")
    message: str = Field(default="", max_length=4096)
    timestamp: str | None = None


async def _ensure_cluster(request: Request, principal: Principal, cluster: str) -> None:
    principal.require(Action.REPORT, cluster)
    ctx = context(request)
    if await ctx.store.get(CLUSTER.key(cluster)) is None:
        raise not_found("Cluster", cluster)


@router.post("/events", status_code=201, summary="Record a domain event")
async def post_event(request: Request, event: DomainEvent = Body(...),
                     principal: Principal = Depends(authenticate)) -> JSONResponse:
    await _ensure_cluster(request, principal, event.cluster)
    ctx = context(request)
    lease = await ctx.store.grant_lease(EVENT_TTL_SECONDS)
    key = f"/events/clusters/{event.cluster}/{time.time_ns():020d}"
    doc: dict[str, Any] = event.model_dump(mode="json")
    await ctx.store.put(key, json.dumps(doc).encode(), lease=lease.id)
    return JSONResponse({"accepted": True, "key": key}, status_code=201)


def scheduler_view(status: NormalisedStatus) -> dict[str, Any]:
    """The compact per-cluster document the scheduler's snapshot reads (plain numbers)."""

    def res(view: Any) -> dict[str, float]:
        out: dict[str, float] = {}
        if view.capacity is not None:
            out["capacity"] = view.capacity
        if view.used is not None:
            out["used"] = view.used
        return out

    doc: dict[str, Any] = {
        "timestamp": iso(status.ts), "source": status.source,
        "cpu": res(status.cpu), "memory": res(status.memory), "gpu": res(status.gpu),
    }
    storage = status.storage
    if storage.capacity is not None:
        doc["storage"] = {"capacity": storage.capacity, "available": storage.free}
    if status.pods is not None:
        doc["pods"] = {"used": status.pods}
    free = {k: status.get(f"largestNodeFree.{k}") for k in ("cpu", "memory", "gpu")}
    if any(v is not None for v in free.values()):
        doc["largestNodeFree"] = {k: v for k, v in free.items() if v is not None}
    doc["network"] = {"inMbps": status.get("network.inMbps") or 0.0, "outMbps": status.get("network.outMbps") or 0.0}
    if status.water_level is not None:
        doc["waterLevel"] = status.water_level
    return doc


@router.put("", summary="Report the latest status of one cluster",
            responses={202: {"description": "Received but not applied: stale or out-of-order report"}})
async def put_metrics(request: Request, report: MetricsReport = Body(...),
                      principal: Principal = Depends(authenticate)) -> JSONResponse:
    await _ensure_cluster(request, principal, report.cluster)
    ctx = context(request)
    normaliser: Normaliser = ctx.services.setdefault("normaliser", Normaliser())
    result = normaliser(report, time.time())
    if isinstance(result, Rejection):
        return JSONResponse({"accepted": False, "code": result.code, "reason": result.reason}, status_code=202)
    doc = {"status": scheduler_view(result), "observed": result.to_dict(),
           "report": report.model_dump(mode="json")}
    await ctx.store.put(status_key(report.cluster), json.dumps(doc).encode())
    return JSONResponse({"accepted": True, "cluster": report.cluster, "waterLevel": result.water_level,
                         "clockSkewClamped": result.clock_skew_clamped})
