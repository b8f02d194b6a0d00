"""``PUT /api/v1/datasets/access`` (F4): who reads which Dataset from where, blended into the decaying
access document (`drods.model.dataset_access`) the cache planner reads; ``GET`` answers each
Dataset's hotness now (decayed GiB/h by reading cluster, and their sum)."""

from __future__ import annotations

import json
import time

from fastapi import APIRouter, Body, Depends, Request
from fastapi.responses import JSONResponse

from drods.api.auth import Action, Principal
from drods.api.context import context, require
from drods.api.schemas import ERROR_RESPONSES
from drods.errors import ApiError
from drods.model.dataset_access import DatasetAccessReport, hotness, merge_access
from drods.model.keys import DATASET_ACCESS_KEY
from drods.model.timefmt import parse_rfc3339
from drods.store import CasFailed

router = APIRouter(prefix="/api/v1/datasets/access", tags=["datasets"], responses=ERROR_RESPONSES)
CAS_ATTEMPTS = 20


@router.put("", summary="Report Dataset reads by cluster (F4 hotness)")
async def put_access(request: Request, report: DatasetAccessReport = Body(...),
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
        kv = await store.get(DATASET_ACCESS_KEY)
        doc = merge_access(json.loads(kv.value) if kv is not None else None, report, now)
        try:
            await store.put(DATASET_ACCESS_KEY, json.dumps(doc, separators=(",", ":")).encode(),
                            expect_revision=kv.mod_revision if kv is not None else 0)
        except CasFailed:
            continue
        return JSONResponse({"accepted": len(report.reads), "entries": len(doc["reads"])})
    raise ApiError(409, "CONFLICT", "the access document changed under too many concurrent writers; retry", {})


@router.get("", summary="Dataset hotness now (decayed GiB/h by reading cluster)")
async def get_access(request: Request, _: Principal = Depends(require(Action.READ))) -> JSONResponse:
    kv = await context(request).store.get(DATASET_ACCESS_KEY)
    hot = hotness(json.loads(kv.value) if kv is not None else None, time.time())
    return JSONResponse({"datasets": {ds: {"hotnessGiBPerHour": round(sum(by.values()), 4),
                                           "byCluster": {c: round(v, 4) for c, v in sorted(by.items())}}
                                      for ds, by in sorted(hot.items())}})
