"""``PUT /api/v1/datasets/access`` (F4): who reads which Dataset from where, blended into the decaying
access document (`drods.model.dataset_access`) the cache planner reads; ``GET`` answers each
Dataset's hotness now (decayed GiB/h by reading cluster, and their sum)."""

from __future__ import annotations

import json
import time

from fastapi import APIRouter, Body, Depends, Request

from drods.api.auth import Principal
from drods.api.context import authenticate, context
from drods.api.json_response import JSONResponse
from drods.api.merged_document import merge_into, report_time
from drods.api.schemas import ERROR_RESPONSES
from drods.model.dataset_access import DatasetAccessReport, hotness, merge_access
from drods.model.keys import DATASET_ACCESS_KEY

router = APIRouter(prefix="/api/v1/datasets/access", tags=["datasets"], responses=ERROR_RESPONSES)


@router.put("", summary="Report Dataset reads by cluster (F4 hotness)")
async def put_access(request: Request, report: DatasetAccessReport = Body(...),
                     _: Principal = Depends(authenticate)) -> JSONResponse:
    now = report_time(report.timestamp)
    doc = await merge_into(context(request).store, DATASET_ACCESS_KEY,
                           lambda stored: merge_access(stored, report, now), "access document")
    return JSONResponse({"accepted": len(report.reads), "entries": len(doc["reads"])})


@router.get("", summary="Dataset hotness now (decayed GiB/h by reading cluster)")
async def get_access(request: Request, _: Principal = Depends(authenticate)) -> JSONResponse:
    kv = await context(request).store.get(DATASET_ACCESS_KEY)
    hot = hotness(json.loads(kv.value) if kv is not None else None, time.time())
    return JSONResponse({"datasets": {ds: {"hotnessGiBPerHour": round(sum(by.values()), 4),
                                           "byCluster": {c: round(v, 4) for c, v in sorted(by.items())}}
                                      for ds, by in sorted(hot.items())}})
