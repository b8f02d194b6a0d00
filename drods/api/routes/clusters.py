"""API1 ``/api/v1/clusters`` and API2 ``/api/v1/propagationpolicies``: flat views of two kinds; and
``POST /api/v1/clusters/{name}/drain`` (S11, F3), the one drain the CLI and the dashboard call."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from fastapi import APIRouter, Body, Depends, Request
from pydantic import BaseModel, ConfigDict, Field

from drods.api.auth import Principal
from drods.api.context import ApiContext, authenticate, context
from drods.api.dryrun import dry_run_param
from drods.api.json_response import JSONResponse
from drods.api.routes.flat import flat_router
from drods.api.routes.whatif import live_scheduler, live_view, store_view
from drods.api.schemas import ERROR_RESPONSES, ClusterRegistration, PropagationPolicyBody
from drods.controllers.rescheduler import Rescheduler
from drods.model.keys import status_key
from drods.model.kinds import CLUSTER, PROPAGATION_POLICY
from drods.whatif.drain import Forecast, forecast_drain


async def _with_live_status(ctx: ApiContext, flat: dict[str, Any]) -> None:
    kv = await ctx.store.get(status_key(flat["name"]))
    if kv is not None:
        flat["status"]["resources"] = json.loads(kv.value).get("status")


clusters = flat_router(CLUSTER, "/api/v1/clusters", ClusterRegistration,
                       conflict_code="CLUSTER_ALREADY_EXISTS", conflict_detail="clusterName",
                       decorate=_with_live_status)
propagation_policies = flat_router(PROPAGATION_POLICY, "/api/v1/propagationpolicies", PropagationPolicyBody,
                                   conflict_code="POLICY_CONFLICT", conflict_detail="policyName",
                                   conflict_message="Policy name already exists")  # the draft's example, as written

drain = APIRouter(prefix="/api/v1/clusters", tags=["clusters"], responses=ERROR_RESPONSES)


class DrainRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")

    reason: str = Field(default="", max_length=1024)


@drain.post("/{name}/drain", summary="Cordon a cluster and move everything off it (S11, F3)")
async def drain_cluster(request: Request, name: str, body: DrainRequest | None = Body(default=None),
                        _: Principal = Depends(authenticate),
                        dry_run: bool = Depends(dry_run_param)) -> JSONResponse:
    """Cordon, then every binding with replicas there is re-placed (graceful: new copies first); a
    workload with PersistentVolumeClaims or a declared data step moves with its data by a MigrationPlan
    (the default VolumeCopy mover when it declares none), or stays when its data cannot move
    (``refused``: each binding with why). A dry run answers that plan (``migrationPlans`` names the
    workloads) and changes nothing, with a ``forecast`` of where each re-placed binding would go and how
    many replicas would wait for room (`drods.whatif.drain`)."""
    ctx = context(request)
    rescheduler = ctx.rescheduler or Rescheduler(ctx.registry)
    result = await rescheduler.drain(name, body.reason if body else "", dry_run=dry_run)
    out: dict[str, Any] = {"cluster": name, "cordoned": not dry_run, "rescheduled": list(result.bindings),
                           "migrationPlans": list(result.plans), "refused": list(result.refused),
                           "replicas": result.moved, "message": result.message}
    if not dry_run:
        return JSONResponse(out)
    forecast = await _forecast(ctx, name, result.as_read)
    pending = sum(f.pending for f in forecast)
    if pending:
        out["message"] += f"; {pending} replica(s) would wait for room (see forecast)"
    return JSONResponse({**out, "dryRun": True, "forecast": {
        "pendingReplicas": pending, "bindings": [f.as_json() for f in forecast],
        "basis": "the scheduler's view now; each binding re-placed as a drain's reschedule is, one after another"}})


async def _forecast(ctx: ApiContext, cluster: str, bindings: Sequence[Mapping[str, Any]]) -> list[Forecast]:
    """Where the re-placed bindings would go, on a copy of what the scheduler decides with."""
    svc = live_scheduler(ctx)
    view = live_view(svc) if svc is not None else (await store_view(ctx))[0]
    return forecast_drain(view, cluster, bindings)
