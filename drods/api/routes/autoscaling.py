"""Application feedback and the autoscaler's decisions (SPEC H3, F5).

* ``PUT /api/v1/feedback`` — an application says how well it does::

      {"workload": {"apiVersion", "kind", "namespace", "name"},
       "metrics": {"latencyP99Ms", "throughput", "errorRate"}, "timestamp"?: RFC 3339 (absent: now), "cluster"?}

  With ``cluster``, the report is how the application does in that cluster (kept per cluster at
  ``/feedback/<namespace>/<kind>/<name>/<cluster>``): it moves the per-cluster weights
  (`drods.autoscaling.cluster_weights`); 404 for a cluster that is not registered.

  The latest report per workload is kept at ``/feedback/<namespace>/<kind>/<name>``, where the
  autoscaler (possibly in another process) reads it against its FederatedHPA's ``spec.feedback``.
  200 ``{"accepted": true}``; 202 ``{"accepted": false, "code": "OUT_OF_ORDER_REPORT"}`` for a report
  not newer than the stored one; 404 for a workload that does not exist; 422 for a bad body.
* ``GET /api/v1/autoscaling/history`` — scaling decisions with their inputs, newest first.
"""

from __future__ import annotations

import json
import time
from typing import Any

from fastapi import APIRouter, Depends, Query, Request
from pydantic import BaseModel, ConfigDict, Field

from drods.api.auth import Action, Principal, Role
from drods.api.context import authenticate, context
from drods.api.json_response import JSONResponse
from drods.api.schemas import ERROR_RESPONSES
from drods.errors import Conflict, Forbidden, not_found, validation_failed
from drods.machinery.journal import Journal
from drods.model.keys import AUTOSCALING_PREFIX, cluster_feedback_key, feedback_key
from drods.model.kinds import CLUSTER, WORKLOAD_KINDS, by_kind
from drods.model.timefmt import parse_rfc3339, rfc3339_ms
from drods.store.cas import read_modify_write

router = APIRouter(prefix="/api/v1", tags=["autoscaling"], responses=ERROR_RESPONSES)


class WorkloadRef(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)

    apiVersion: str = Field(min_length=1)
    kind: str = Field(min_length=1)
    namespace: str = Field(default="default", min_length=1)
    name: str = Field(min_length=1)


class FeedbackMetrics(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=False)

    latencyP99Ms: float | None = Field(default=None, ge=0)
    throughput: float | None = Field(default=None, ge=0)
    errorRate: float | None = Field(default=None, ge=0, le=1)


class Feedback(BaseModel):
    model_config = ConfigDict(extra="forbid")

    workload: WorkloadRef
    metrics: FeedbackMetrics
    timestamp: str | None = Field(default=None, json_schema_extra={"format": "date-time"})  # absent: now
    # how the application does in one cluster (per-cluster weights); absent: the workload as a whole
    cluster: str | None = Field(default=None, min_length=1, max_length=253)


@router.put("/feedback", summary="An application reports how well it does (H3)")
async def put_feedback(request: Request, body: Feedback,
                       principal: Principal = Depends(authenticate)) -> JSONResponse:
    ctx = context(request)
    if principal.role is Role.CLUSTER_AGENT and body.cluster is None:
        raise Forbidden(f"a cluster-agent token reports feedback for its own cluster only: set cluster: "
                        f"{principal.cluster}", {"role": principal.role.value, "tokenCluster": principal.cluster})
    principal.require(Action.REPORT, body.cluster)  # a cluster agent: only for the cluster it is bound to
    ts = time.time() if body.timestamp is None else parse_rfc3339(body.timestamp)
    if ts is None:
        raise validation_failed("timestamp must be RFC 3339", [{"field": "timestamp", "message": "not RFC 3339"}])
    if ts > time.time() + 300:
        raise validation_failed("timestamp is more than 5 minutes in the future",
                                [{"field": "timestamp", "message": "in the future"}])
    m = body.metrics
    if m.latencyP99Ms is None and m.throughput is None and m.errorRate is None:
        raise validation_failed("metrics: report at least one of latencyP99Ms, throughput, errorRate",
                                [{"field": "metrics", "message": "empty"}])
    ref = body.workload
    kind = by_kind(ref.apiVersion, ref.kind)
    if kind is None or kind not in WORKLOAD_KINDS:
        raise validation_failed(f"{ref.apiVersion} {ref.kind} is not a workload kind",
                                [{"field": "workload.kind", "message": "unknown workload kind"}])
    if await ctx.registry.try_get(kind, ref.name, ref.namespace) is None:
        raise not_found(ref.kind, f"{ref.namespace}/{ref.name}")
    if body.cluster is not None and await ctx.registry.try_get(CLUSTER, body.cluster) is None:
        raise not_found("Cluster", body.cluster)
    key = feedback_key(ref.namespace, ref.kind, ref.name) if body.cluster is None else \
        cluster_feedback_key(ref.namespace, ref.kind, ref.name, body.cluster)
    doc = {"workload": ref.model_dump(), "metrics": m.model_dump(exclude_none=True), "timestamp": rfc3339_ms(ts),
           **({"cluster": body.cluster} if body.cluster else {})}
    async def attempt(_: int) -> JSONResponse:
        current = await ctx.store.get(key)
        if current is not None:
            before = parse_rfc3339(json.loads(current.value).get("timestamp"))
            if before is not None and ts <= before:
                return JSONResponse({"accepted": False, "code": "OUT_OF_ORDER_REPORT",
                                     "reason": f"a report of {rfc3339_ms(before)} is already stored"}, status_code=202)
        await ctx.store.put(key, json.dumps(doc).encode(), expect_revision=current.mod_revision if current else 0)
        return JSONResponse({"accepted": True, "workload": ref.model_dump(), "timestamp": rfc3339_ms(ts)})

    try:
        return await read_modify_write(attempt)
    except Conflict:
        return JSONResponse({"accepted": False, "code": "OUT_OF_ORDER_REPORT", "reason": "concurrent reports"},
                            status_code=202)


@router.get("/autoscaling/history", summary="Scaling decisions with their inputs (F5)")
async def autoscaling_history(
    request: Request,
    workload: str | None = Query(default=None, max_length=600, pattern=r"^[^/\s]+/[^/\s]+/[^/\s]+$",
                                 description="KIND/NAMESPACE/NAME"),
    maxEntries: int = Query(default=100, ge=1, le=10_000),
    seconds: float = Query(default=86_400.0, gt=0, le=30 * 86_400.0, description="how far back"),
    _: Principal = Depends(authenticate),
) -> JSONResponse:
    journal = Journal(context(request).store, AUTOSCALING_PREFIX)
    now = time.time()

    def match(e: dict[str, Any]) -> bool:
        return workload is None or e.get("workload") == workload

    page = await journal.query(now - seconds, now, maxEntries, match)
    return JSONResponse({"items": page.items, "truncated": page.truncated})
