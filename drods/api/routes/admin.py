"""Health, readiness, Prometheus exposition and the audit log."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime

from fastapi import APIRouter, Depends, Query, Request
from fastapi.responses import PlainTextResponse, Response
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

from drods.api.audit import AuditFilter
from drods.api.auth import Principal
from drods.api.context import authenticate, context
from drods.api.json_response import JSONResponse
from drods.api.schemas import ERROR_RESPONSES, ErrorBody
from drods.api.status import RETRY_AFTER_SECONDS
from drods.errors import Invalid

router = APIRouter(responses=ERROR_RESPONSES)

_RFC3339 = {"format": "date-time"}


def parse_time(name: str, value: str | None) -> datetime | None:
    """Query times are RFC 3339 (``2026-01-01T00:00:00Z``); anything else is a clear 422."""
    if value is None:
        return None
    try:
        parsed = datetime.fromisoformat(value.replace("Z", "+00:00").replace("z", "+00:00"))
    except ValueError as e:
        raise Invalid(f"{name} must be an RFC 3339 time", {"fields": [{"field": name, "message": str(e)}]}) from e
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)


@router.get("/livez", tags=["health"], summary="Liveness, as kube-apiserver's (no auth)",
            response_class=PlainTextResponse)
@router.get("/healthz", tags=["health"], summary="Liveness (no auth)", response_class=PlainTextResponse)
async def healthz() -> PlainTextResponse:
    return PlainTextResponse("ok")


@router.get("/readyz", tags=["health"], summary="Readiness: the store answers and takes writes (no auth)",
            response_class=PlainTextResponse, responses={503: {"model": ErrorBody}})
async def readyz(request: Request) -> Response:
    ctx = context(request)
    try:
        async with asyncio.timeout(2):
            await ctx.store.current_revision()
    except Exception as e:  # noqa: BLE001 - any store failure means not ready
        why = str(e) or ("no answer within 2s" if isinstance(e, TimeoutError) else type(e).__name__)
        return JSONResponse({"code": "STORE_UNAVAILABLE", "message": f"store not reachable: {why}", "details": {}},
                            status_code=503, headers={"Retry-After": str(RETRY_AFTER_SECONDS)})
    failed = ctx.store.write_failure()  # a full or read-only disk: writes must go to another replica
    if failed is not None:
        return JSONResponse({"code": "STORE_UNAVAILABLE", "message": f"store failed: {failed}",
                             "details": {"failed": ["store"], "path": failed.path, "cause": failed.cause}},
                            status_code=503, headers={"Retry-After": str(RETRY_AFTER_SECONDS)})
    checks = ctx.readiness() if ctx.readiness is not None else {}
    waiting = sorted(name for name, ok in checks.items() if not ok)
    if waiting:
        return JSONResponse({"code": "NOT_READY", "message": f"not ready yet: {', '.join(waiting)}",
                             "details": {"waiting": waiting}}, status_code=503)
    return PlainTextResponse("ok")


@router.get("/metrics", tags=["health"], summary="Prometheus exposition", response_class=PlainTextResponse)
async def metrics(request: Request, _: Principal = Depends(authenticate)) -> Response:
    ctx = context(request)
    body = generate_latest(ctx.metrics.registry)
    for extra in ctx.prometheus_registries:
        body += generate_latest(extra)
    return Response(body, media_type=CONTENT_TYPE_LATEST)


@router.get("/api/v1/audit", tags=["audit"], summary="Audit log entries (admin)")
async def audit(request: Request,
                startTime: str | None = Query(default=None, description="RFC 3339", json_schema_extra=_RFC3339),
                endTime: str | None = Query(default=None, description="RFC 3339", json_schema_extra=_RFC3339),
                limit: int = Query(default=1000, ge=1, le=100_000),
                subject: str | None = Query(default=None, max_length=253, description="only this subject's requests"),
                kind: str | None = Query(default=None, max_length=63, description="only requests changing this kind"),
                namespace: str | None = Query(default=None, max_length=253,
                                              description="only requests that changed objects in this namespace"),
                _: Principal = Depends(authenticate)) -> JSONResponse:
    entries = await context(request).audit.query(parse_time("startTime", startTime), parse_time("endTime", endTime),
                                                 limit, AuditFilter(subject, kind, namespace))
    return JSONResponse({"items": entries})
