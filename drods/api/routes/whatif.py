"""W1 ``POST /api/v1/whatif``: the placement a binding or workload would get, and why — stored nowhere.

Body: ``{"binding": <the body of POST /api/v1/bindings>}`` or ``{"workload": <a Deployment,
StatefulSet or Job>, "policy": <optional PropagationPolicy / ResourcePlacementPolicy; default: the
stored policy the resource detector would pick>}``, plus ``"changes": [...]``
(`drods.whatif.dryrun`). Answer: ``{"placement": [{cluster, replicas}], "phase": "Scheduled" |
"Unschedulable", "explanation": <one /history/schedules entry>}``.

It runs against a copy of the live scheduler's snapshot, profile and tie-break RNG, so it needs a
scheduler in this process (``drods serve``); elsewhere it answers 503 SCHEDULER_UNAVAILABLE.
"""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Body, Depends, Request
from fastapi.responses import JSONResponse
from pydantic import BaseModel, ConfigDict, Field, model_validator

from drods.api.auth import Action, Principal
from drods.api.context import context, require
from drods.api.routes.bindings import BindingRequest
from drods.api.schemas import ERROR_RESPONSES
from drods.errors import ApiError
from drods.model.binding import BindingSpec
from drods.model.kinds import BINDING, PROPAGATION_POLICY, RESOURCE_PLACEMENT_POLICY
from drods.whatif.dryrun import Change, ClusterFacts, LiveView, apply_changes, dry_run, workload_binding

router = APIRouter(tags=["whatif"], responses=ERROR_RESPONSES)


class WhatIfRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")

    binding: BindingRequest | None = None
    workload: dict[str, Any] | None = None
    policy: dict[str, Any] | None = None
    changes: list[Change] = Field(default_factory=list, max_length=1000)

    @model_validator(mode="after")
    def _one(self) -> WhatIfRequest:
        if (self.binding is None) == (self.workload is None):
            raise ValueError("give exactly one of binding or workload")
        if self.policy is not None and self.workload is None:
            raise ValueError("policy goes with workload (a binding carries its own placement)")
        return self


def live_scheduler(ctx: Any) -> Any:
    """This process's running scheduler service — the one place that knows where it lives."""
    svc = ctx.services.get("scheduler")
    if svc is None or not svc.ready.is_set():
        raise ApiError(503, "SCHEDULER_UNAVAILABLE", "no synced scheduler runs in this API server process "
                       "(what-if needs `drods serve`)", {})
    return svc


def live_view(svc: Any) -> LiveView:
    """Copy what the scheduler decides with (its snapshot, profile, RNG state and cluster facts)."""
    cache = svc.cache
    clusters: dict[str, ClusterFacts] = {}
    now = cache.clock()
    for name, rec in cache.clusters.items():
        st = cache.statuses.get(name)
        row = cache.snap.index.get(name)
        ready = bool(cache.snap.ready[row]) if row is not None else False
        floor = rec.hold.water_level if rec.hold is not None and rec.hold.active(now) else None
        clusters[name] = ClusterFacts(dict(rec.labels), rec.spec, ready, st.status if st else None, floor)
    return LiveView.of(cache.snap, svc.profile, svc.scheduler.rng, clusters)


def current_placement(svc: Any, name: str) -> dict[str, int] | None:
    """Where the binding ``name`` runs now, as the scheduler's informer has it (None: no such binding)."""
    rec = svc.bindings.cache.get(BINDING.key(name))
    if rec is None or rec.deleting:
        return None
    out: dict[str, int] = {}
    for cluster, n in rec.placement:
        out[cluster] = out.get(cluster, 0) + int(n)
    return out


@router.post("/api/v1/whatif", summary="Dry-run placement: what a binding or workload would get, and why (W1)")
async def whatif(request: Request, body: WhatIfRequest = Body(...),
                 _: Principal = Depends(require(Action.READ))) -> JSONResponse:
    ctx = context(request)
    if body.binding is not None:
        spec_doc = body.binding.model_dump(mode="json", exclude_unset=True)
        name = spec_doc.pop("name", None) or "whatif"
        spec_doc.pop("labels", None)
        spec = BindingSpec.model_validate(spec_doc)  # as the scheduler reads the stored binding
    else:
        assert body.workload is not None
        stored: list[dict[str, Any]] = []
        if body.policy is None:
            for kind in (PROPAGATION_POLICY, RESOURCE_PLACEMENT_POLICY):
                items, _rev = await ctx.registry.list(kind)
                stored.extend(o for o in items if not o["metadata"].get("deletionTimestamp"))
        name, spec = workload_binding(body.workload, body.policy, stored)
    svc = live_scheduler(ctx)
    view = live_view(svc)
    cur = current_placement(svc, name)
    if cur is not None:
        view.current[name] = cur
    apply_changes(view, body.changes)
    return JSONResponse(dry_run(view, spec, name))
