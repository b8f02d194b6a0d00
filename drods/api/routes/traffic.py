"""``PUT /api/v1/traffic`` (H1): service-to-service traffic from mesh telemetry or agents, blended
into the stored graph (`drods.model.traffic`) that the scheduler's TrafficAffinity score reads."""

from __future__ import annotations

import json
import time

from fastapi import APIRouter, Body, Depends, Request
from fastapi.responses import JSONResponse

from drods.api.auth import Action, Principal
from drods.api.context import context, require
from drods.api.schemas import ERROR_RESPONSES
from drods.errors import ApiError
from drods.model.keys import TRAFFIC_KEY
from drods.model.timefmt import parse_rfc3339
from drods.model.traffic import TrafficReport, merge_report
from drods.store import CasFailed

router = APIRouter(prefix="/api/v1/traffic", tags=["traffic"], responses=ERROR_RESPONSES)
CAS_ATTEMPTS = 20


@router.put("", summary="Report service-to-service traffic (H1)")
async def put_traffic(request: Request, report: TrafficReport = Body(...),
                      _: Principal = Depends(require(Action.WRITE))) -> JSONResponse:
    now = time.time()
    if report.timestamp is not None:
        ts = parse_rfc3339(report.timestamp)
        if ts is None:
            raise ApiError(422, "VALIDATION_FAILED", "timestamp is not RFC 3339",
                           {"fields": [{"field": "timestamp", "message": "not RFC 3339"}]})
        now = min(ts, now)
    store = context(request).store
    for _attempt in range(CAS_ATTEMPTS):
        kv = await store.get(TRAFFIC_KEY)
        graph = json.loads(kv.value) if kv is not None else None
        doc = merge_report(graph, report, now)
        try:
            await store.put(TRAFFIC_KEY, json.dumps(doc, separators=(",", ":")).encode(),
                            expect_revision=kv.mod_revision if kv is not None else 0)
        except CasFailed:
            continue
        return JSONResponse({"accepted": len(report.edges), "edges": len(doc["edges"])})
    raise ApiError(409, "CONFLICT", "the traffic graph changed under too many concurrent writers; retry", {})
