"""X1: ``GET /api/v1/decisions`` — every decision, one record shape, newest first.

Query: ``kind``, ``namespace``, ``name`` (the subject: a workload's kind as ``kubectl`` spells it,
case-insensitive — ``Deployment``, ``ServiceRegistration`` …), ``type`` (Placement, Reschedule,
Eviction, Rebalance, Scaling, Route, Migration, CachePlan), ``since`` (RFC 3339, or a duration
``90s`` / ``15m`` / ``2h`` / ``7d``; default 24 hours), ``limit`` (default 100, at most 1000).
Answer ``{"items": [record], "truncated", "since"}`` (record shape: `drods.model.decision`).

``?watch=true`` streams Kubernetes-style watch lines, ``{"type": "ADDED", "object": record}``, one per
decision recorded from now on that matches the query (NDJSON, ``timeoutSeconds`` default 1800).

Retention is each journal's: placements 1 hour (the scheduler's ``historyRetentionSeconds``),
scaling 7 days, routes / migrations / cache plans 1 day (`drods.machinery.decision_log`), the
descheduler's evacuations / pre-allocations / restores / traffic rebalances as monitoring's
operations log (``failureRetentionDays``).
"""

from __future__ import annotations

import asyncio
import json
import re
import time
from collections.abc import AsyncIterator, Callable, Mapping
from typing import Any

from fastapi import APIRouter, Depends, Query, Request
from fastapi.responses import Response, StreamingResponse

from drods.api.auth import Principal
from drods.api.context import ApiContext, authenticate, context
from drods.api.json_response import JSONResponse
from drods.api.routes.admin import parse_time
from drods.api.schemas import ERROR_RESPONSES
from drods.errors import Invalid
from drods.machinery.journal import Journal
from drods.model import jsondoc
from drods.model.decision import SOURCES, TYPES, Record, Source
from drods.model.timefmt import rfc3339_ms
from drods.store import EventType

router = APIRouter(prefix="/api/v1", tags=["decisions"], responses=ERROR_RESPONSES)

DEFAULT_SINCE_S = 86_400.0
MAX_WATCH_SECONDS = 86_400.0
_DURATION = re.compile(r"^(\d+(?:\.\d+)?)(s|m|h|d)$")
_UNITS = {"s": 1.0, "m": 60.0, "h": 3600.0, "d": 86_400.0}
Match = Callable[[Source, Mapping[str, Any]], bool]


def parse_since(value: str | None, now: float) -> float:
    """RFC 3339 or a duration back from now."""
    if value is None:
        return now - DEFAULT_SINCE_S
    m = _DURATION.match(value.strip())
    if m:
        return now - float(m.group(1)) * _UNITS[m.group(2)]
    try:
        dt = parse_time("since", value)
    except Invalid as e:
        raise Invalid("since must be an RFC 3339 time or a duration back from now (90s, 15m, 2h, 7d)",
                      e.details) from e
    assert dt is not None
    return dt.timestamp()


def matcher(kind: str | None, namespace: str | None, name: str | None, type_: str | None,
            tenant: bool = False) -> Match:
    """``tenant``: the caller may read one namespace only: a decision about a Binding (cluster-scoped, named
    ``default`` when it stands for no workload) is not its to read."""
    def match(src: Source, entry: Mapping[str, Any]) -> bool:
        found = src.types(entry)  # "" for a journal entry that is no decision (monitoring's events)
        subject = src.subject(entry)
        return (bool(found) and (type_ is None or found == type_) and subject.matches(kind, namespace, name)
                and not (tenant and subject.kind == "Binding"))
    return match


async def query_decisions(ctx: ApiContext, start: float, limit: int, match: Match) -> tuple[list[Record], bool]:
    """Each journal's matching entries, merged newest first."""
    now = time.time()
    merged: list[Record] = []
    truncated = False
    for src in SOURCES:
        page = await Journal(ctx.store, src.prefix).query(start, now + 60.0, limit,
                                                            lambda e, s=src: match(s, e))  # type: ignore[misc]
        truncated = truncated or page.truncated
        merged.extend(src.record(e) for e in page.items)
    merged.sort(key=lambda r: str(r.get("time") or ""), reverse=True)
    return merged[:limit], truncated or len(merged) > limit


def _source_of(key: str) -> Source | None:
    return next((s for s in SOURCES if key.startswith(s.prefix)), None)


async def _watch(ctx: ApiContext, match: Match, duration_s: float) -> AsyncIterator[bytes]:
    """Every new journal group under ``/history/`` whose entries match, as ADDED lines."""
    start = await ctx.store.current_revision() + 1
    queue: asyncio.Queue[bytes] = asyncio.Queue()

    async def pump() -> None:
        async for ev in ctx.store.watch("/history/", start_revision=start):
            src = _source_of(ev.kv.key)
            if src is None or ev.type is not EventType.PUT:
                continue
            try:
                group = jsondoc.loads(ev.kv.value).get("entries") or []
            except (ValueError, AttributeError):
                continue
            for entry in group:
                if isinstance(entry, dict) and match(src, entry):
                    line = {"type": "ADDED", "object": src.record(entry)}
                    queue.put_nowait((json.dumps(line, separators=(",", ":")) + "\n").encode())

    task = asyncio.create_task(pump())
    loop = asyncio.get_running_loop()
    deadline = loop.time() + duration_s
    ctx.metrics.watches.inc()
    try:
        while (remaining := deadline - loop.time()) > 0 and not ctx.stopping.is_set():
            try:
                yield await asyncio.wait_for(queue.get(), timeout=min(remaining, 5.0))
            except TimeoutError:
                continue
    finally:
        ctx.metrics.watches.dec()
        task.cancel()


@router.get("/decisions", summary="Every decision with its trigger, inputs, options and runner-up (X1)",
            description="`?watch=true` streams `{type: ADDED, object}` lines (NDJSON) for new decisions.",
            responses={200: {"content": {"application/json": {}, "application/x-ndjson": {}}}})
async def list_decisions(
    request: Request,
    kind: str | None = Query(default=None, max_length=100, description="the subject's kind, e.g. Deployment"),
    namespace: str | None = Query(default=None, max_length=253),
    name: str | None = Query(default=None, max_length=253),
    type: str | None = Query(default=None, description="|".join(TYPES)),  # noqa: A002 - the query's name
    since: str | None = Query(default=None, description="RFC 3339 or 90s / 15m / 2h / 7d (default 24h)"),
    limit: int = Query(default=100, ge=1, le=1000),
    watch: bool = Query(default=False),
    timeoutSeconds: float = Query(default=1800.0, gt=0, le=MAX_WATCH_SECONDS),
    principal: Principal = Depends(authenticate),
) -> Response:
    """A token limited to namespaces reads the decisions of one of its namespaces (``?namespace=``)."""
    if type is not None and type not in TYPES:
        raise Invalid(f"type must be one of {', '.join(TYPES)}",
                      {"fields": [{"field": "type", "message": f"unknown decision type {type!r}"}]})
    ctx = context(request)
    match = matcher(kind, namespace, name, type, tenant=principal.namespaces is not None)
    if watch:
        return StreamingResponse(_watch(ctx, match, timeoutSeconds), media_type="application/x-ndjson")
    start = parse_since(since, time.time())
    items, truncated = await query_decisions(ctx, start, limit, match)
    return JSONResponse({"items": items, "truncated": truncated, "since": rfc3339_ms(start)})
