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
