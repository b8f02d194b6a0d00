"""``PUT /api/v1/traffic`` (H1): service-to-service traffic from mesh telemetry or agents, blended
into the stored graph (`drods.model.traffic`) that the scheduler's TrafficAffinity score reads;
``GET`` answers the graph as it stands now (each edge decayed to now, heaviest first)."""

from __future__ import annotations

import json
import time

from fastapi import APIRouter, Body, Depends, Request

from drods.api.auth import Principal
from drods.api.context import authenticate, context
from drods.api.json_response import JSONResponse
from drods.api.merged_document import merge_into, report_time
from drods.api.schemas import ERROR_RESPONSES
from drods.model.keys import TRAFFIC_KEY
from drods.model.timefmt import rfc3339
from drods.model.traffic import TrafficReport, edges_now, merge_report

router = APIRouter(prefix="/api/v1/traffic", tags=["traffic"], responses=ERROR_RESPONSES)


@router.put("", summary="Report service-to-service traffic (H1)")
async def put_traffic(request: Request, report: TrafficReport = Body(...),
                      _: Principal = Depends(authenticate)) -> JSONResponse:
    now = report_time(report.timestamp)
    doc = await merge_into(context(request).store, TRAFFIC_KEY, lambda graph: merge_report(graph, report, now),
                           "traffic graph")
    return JSONResponse({"accepted": len(report.edges), "edges": len(doc["edges"])})


@router.get("", summary="The service traffic graph now (H1)")
async def get_traffic(request: Request, _: Principal = Depends(authenticate)) -> JSONResponse:
    kv = await context(request).store.get(TRAFFIC_KEY)
    edges = edges_now(json.loads(kv.value) if kv is not None else None, time.time())
    return JSONResponse({"edges": [{**e, "reportedAt": rfc3339(e["reportedAt"])} for e in edges]})
