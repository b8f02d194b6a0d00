"""API9, scheduler part: ``GET /api/v1/history/schedules?startTime&endTime&maxEntries``.

Every scheduling decision, newest first, explained: candidate clusters, filter verdicts (reason
counts and per-cluster reasons), each score plugin's score for the clusters that received
replicas, the weights the adjuster used and its mode (spread / pack / blend), the result and the
timings (entry shape: `drods.schedulerd.history`), and why each feasible cluster weighed got nothing
(``whyNot``, ``runnerUp``: `drods.model.decision.with_why_not`). ``maxEntries`` defaults to 100; times are
RFC 3339; ``binding`` narrows to one task. ``/api/v1/history/failures`` (monitoring's route)
lists the unschedulable attempts the scheduler appends to the shared failure log.

``GET /api/v1/scheduler`` tells which scheduler holds the lease and, when this process runs one,
its queue depth and view of the fleet.
"""

from __future__ import annotations

import time

from fastapi import APIRouter, Depends, Query, Request

from drods.api.auth import Principal
from drods.api.context import authenticate, context
from drods.api.json_response import JSONResponse
from drods.api.routes.admin import parse_time
from drods.api.routes.history import LATEST, LATEST_DATE
from drods.api.schemas import ERROR_RESPONSES
from drods.errors import Invalid
from drods.model.decision import with_why_not
from drods.model.timefmt import rfc3339_ms
from drods.schedulerd import history as schedules

router = APIRouter(tags=["scheduler"], responses=ERROR_RESPONSES)

_RFC3339 = {"format": "date-time"}


def _epoch(name: str, value: str | None) -> float | None:
    dt = parse_time(name, value)
    if dt is None:
        return None
    t = dt.timestamp()
    if not 0 <= t <= LATEST:
        raise Invalid(f"{name} must be between 1970-01-01 and {LATEST_DATE}",
                      {"fields": [{"field": name, "message": f"must be between 1970-01-01 and {LATEST_DATE}"}]})
    return t


@router.get("/api/v1/history/schedules", summary="Scheduling decisions, newest first, with their explanation (API9)")
async def schedule_history(
    request: Request,
    startTime: str | None = Query(default=None, description="RFC 3339; default: the oldest kept entry",
                                  json_schema_extra=_RFC3339),
    endTime: str | None = Query(default=None, description="RFC 3339; default now", json_schema_extra=_RFC3339),
    maxEntries: int = Query(default=100, ge=1, le=10_000),
    binding: str | None = Query(default=None, max_length=253, description="only this binding's decisions"),
    _: Principal = Depends(authenticate),
) -> JSONResponse:
    ctx = context(request)
    now = time.time()
    end = _epoch("endTime", endTime)
    start = _epoch("startTime", startTime)
    end = min(end if end is not None else now + 60.0, now + 86_400.0)
    start = start if start is not None else 0.0
    if start > end:
        raise Invalid("startTime must not be after endTime",
                      {"fields": [{"field": "startTime", "message": "after endTime"}]})
    svc = ctx.scheduler
    history = svc.history if svc is not None else schedules.schedule_history(ctx.store)
    page = await history.query(start, end, maxEntries, schedules.for_binding(binding))
    items, truncated = [with_why_not(e) for e in page.items], page.truncated
    return JSONResponse({"items": items, "truncated": truncated, "startTime": rfc3339_ms(start),
                         "endTime": rfc3339_ms(end)})


@router.get("/api/v1/scheduler", summary="Which scheduler leads; this process's scheduler queue and fleet view")
async def scheduler_info(request: Request, _: Principal = Depends(authenticate)) -> JSONResponse:
    from drods.model.keys import lease_key
    from drods.schedulerd.service import LEASE_NAME

    ctx = context(request)
    kv = await ctx.store.get(lease_key(LEASE_NAME))
    body: dict[str, object] = {"leader": kv.value.decode() if kv is not None else None}
    svc = ctx.scheduler
    if svc is not None:
        snap = svc.cache.snap
        body["local"] = {"identity": svc.settings.identity, "leading": svc.is_leader, "synced": svc.ready.is_set(),
                         "profile": svc.profile.name, "queue": svc.queue.counts(), "clusters": snap.n,
                         "readyClusters": int(snap.ready[: snap.n].sum()), "assumed": len(snap.assumed_keys())}
    return JSONResponse(body)
