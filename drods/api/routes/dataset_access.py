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
from drods.errors import validation_failed
from drods.model.dataset_access import DatasetAccessReport, hotness, merge_access
from drods.model.keys import DATASET_ACCESS_KEY
from drods.model.kinds import CLUSTER, DATASET

router = APIRouter(prefix="/api/v1/datasets/access", tags=["datasets"], responses=ERROR_RESPONSES)


@router.put("", summary="Report Dataset reads by cluster (F4 hotness)")
async def put_access(request: Request, report: DatasetAccessReport = Body(...),
                     _: Principal = Depends(authenticate)) -> JSONResponse:
    """Reads of a Dataset that does not exist, or from a cluster that is not registered, are refused
    (422 naming each): they would show as hotness nobody can act on. Each distinct name is looked up
    once: a report may carry thousands of entries over a few Datasets and clusters."""
    ctx = context(request)
    missing_datasets = {(ns, name) for ns, name in {(r.dataset.namespace, r.dataset.name) for r in report.reads}
                        if await ctx.registry.try_get(DATASET, name, ns) is None}
    missing_clusters = {c for c in {r.cluster for r in report.reads}
                        if await ctx.registry.try_get(CLUSTER, c) is None}
    fields: list[dict[str, str]] = []
    for i, r in enumerate(report.reads):
        if (r.dataset.namespace, r.dataset.name) in missing_datasets:
            fields.append({"field": f"reads[{i}].dataset",
                           "message": f"no Dataset {r.dataset.namespace}/{r.dataset.name}"})
        if r.cluster in missing_clusters:
            fields.append({"field": f"reads[{i}].cluster", "message": f"no cluster {r.cluster!r} is registered"})
    if fields:
        raise validation_failed(f"{len(fields)} read(s) name what does not exist; nothing was recorded", fields)
    now = report_time(report.timestamp)
    doc = await merge_into(ctx.store, DATASET_ACCESS_KEY,
                           lambda stored: merge_access(stored, report, now), "access document")
    return JSONResponse({"accepted": len(report.reads), "entries": len(doc["reads"])})


@router.get("", summary="Dataset hotness now (decayed GiB/h by reading cluster)")
async def get_access(request: Request, _: Principal = Depends(authenticate)) -> JSONResponse:
    kv = await context(request).store.get(DATASET_ACCESS_KEY)
    hot = hotness(json.loads(kv.value) if kv is not None else None, time.time())
    return JSONResponse({"datasets": {ds: {"hotnessGiBPerHour": round(sum(by.values()), 4),
                                           "byCluster": {c: round(v, 4) for c, v in sorted(by.items())}}
                                      for ds, by in sorted(hot.items())}})
