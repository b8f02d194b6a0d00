"""Health, readiness, Prometheus exposition and the audit log."""

from __future__ import annotations

import asyncio
from datetime import datetime

from fastapi import APIRouter, Depends, Query, Request
from fastapi.responses import JSONResponse, PlainTextResponse, Response
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

from drods.api.auth import Action, Principal
from drods.api.context import context, require
from drods.api.schemas import ERROR_RESPONSES

router = APIRouter(responses=ERROR_RESPONSES)


@router.get("/healthz", tags=["health"], summary="Liveness (no auth)")
async def healthz() -> PlainTextResponse:
    return PlainTextResponse("ok")


@router.get("/readyz", tags=["health"], summary="Readiness: the store answers (no auth)")
async def readyz(request: Request) -> Response:
    try:
        async with asyncio.timeout(2):
            await context(request).store.current_revision()
    except Exception as e:  # noqa: BLE001 - any store failure means not ready
        return JSONResponse({"code": "STORE_UNAVAILABLE", "message": f"store not reachable: {e}", "details": {}},
                            status_code=503)
    return PlainTextResponse("ok")


@router.get("/metrics", tags=["health"], summary="Prometheus exposition")
async def metrics(request: Request, _: Principal = Depends(require(Action.READ))) -> Response:
    ctx = context(request)
    body = generate_latest(ctx.metrics.registry)
    for extra in ctx.services.get("prometheus_registries", []):
        body += generate_latest(extra)
    return Response(body, media_type=CONTENT_TYPE_LATEST)


@router.get("/api/v1/audit", tags=["audit"], summary="Audit log entries (admin)")
async def audit(request: Request, startTime: datetime | None = None, endTime: datetime | None = None,
                limit: int = Query(default=1000, ge=1, le=100_000),
                _: Principal = Depends(require(Action.ADMIN))) -> JSONResponse:
    entries = await context(request).audit.query(startTime, endTime, limit)
    return JSONResponse({"items": entries})
