"""W1 ``POST /api/v1/whatif``: the placement a binding or workload would get, and why — stored nowhere.

Body: ``{"binding": <the body of POST /api/v1/bindings>}`` or ``{"workload": <a Deployment,
StatefulSet or Job>, "policy": <optional PropagationPolicy / ResourcePlacementPolicy; default: the
stored policy the resource detector would pick>}``, plus ``"changes": [...]``
(`drods.whatif.dryrun`). Answer: ``{"placement": [{cluster, replicas}], "phase": "Scheduled" |
"Unschedulable", "explanation": <one /history/schedules entry>}``; the explanation's ``unknownClusters``
counts the cluster names the placement gives that no cluster has (``unknownClusterNames``,
``unknownClusterFields``: reported, not refused — Karmada accepts them).

A binding that exists is decided as a change of itself, as the scheduler would decide it once the
change is stored (a placement change as a ReconcileSchedule, replicas alone as a ScaleSchedule; its
learned users as the stored Binding carries them).

It runs against a copy of the live scheduler's snapshot, profile and tie-break RNG when this process
runs the scheduler (``drods serve``). An API server without one (``drods apiserver``) builds the
view a scheduler starting now would have, from the store, with the scheduler's own cache code; its
tie-breaks then come from a fresh RNG, so exact ties may fall differently than the running scheduler's.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from fastapi import APIRouter, Body, Depends, Request
from pydantic import BaseModel, ConfigDict, Field, model_validator

from drods.api.auth import Principal
from drods.api.context import ApiContext, authenticate, context
from drods.api.json_response import JSONResponse
from drods.api.routes.bindings import BindingRequest
from drods.api.schemas import ERROR_RESPONSES
from drods.model.binding import BindingSpec
from drods.model.kinds import (
    AUTOSCALER_KINDS,
    BINDING,
    PLACEMENT_POLICY_KINDS,
)
from drods.schedulerd.view import LiveView, summed, view_from_store, view_of_cache
from drods.whatif.dryrun import Change, apply_changes, dry_run, workload_binding

if TYPE_CHECKING:
    from drods.schedulerd.service import SchedulerService

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


def live_scheduler(ctx: ApiContext) -> SchedulerService | None:
    """This process's running, synced scheduler service (None when it has none) — the one place
    that knows where it lives."""
    svc = ctx.scheduler
    return svc if svc is not None and svc.ready.is_set() else None


def live_view(svc: SchedulerService) -> LiveView:
    """Copy what the scheduler decides with (its snapshot, profile, RNG state and cluster facts)."""
    return view_of_cache(svc.cache, svc.profile, svc.scheduler.rng)


async def store_view(ctx: ApiContext) -> tuple[LiveView, dict[str, dict[str, int]]]:
    """Without a scheduler in this process (``drods apiserver``): the view a scheduler starting now
    would build from the store (`drods.schedulerd.view.view_from_store`)."""
    from drods.scheduler.profile import Profile

    return await view_from_store(ctx.store, ctx.profile or Profile.default())


def current_placement(svc: SchedulerService, name: str) -> dict[str, int] | None:
    """Where the binding ``name`` runs now, as the scheduler's informer has it (None: no such binding)."""
    rec = svc.bindings.cache.get(BINDING.key(name))
    return None if rec is None or rec.deleting else summed(rec.placement)


@router.post("/api/v1/whatif", summary="Dry-run placement: what a binding or workload would get, and why (W1)")
async def whatif(request: Request, body: WhatIfRequest = Body(...),
                 _: Principal = Depends(authenticate)) -> JSONResponse:
    ctx = context(request)
    if body.binding is not None:
        spec_doc = body.binding.model_dump(mode="json", exclude_unset=True)
        name = spec_doc.pop("name", None) or "whatif"
        spec_doc.pop("labels", None)
        spec = BindingSpec.model_validate(spec_doc)  # as the scheduler reads the stored binding
    else:
        assert body.workload is not None
        policies: list[dict[str, Any]] = []
        if body.policy is None:
            for kind in PLACEMENT_POLICY_KINDS:
                items, _rev = await ctx.registry.list(kind)
                policies.extend(o for o in items if not o["metadata"].get("deletionTimestamp"))
        autoscalers: list[dict[str, Any]] = []
        for kind in AUTOSCALER_KINDS:  # an autoscaler owning the replicas decides them
            items, _rev = await ctx.registry.list(kind)
            autoscalers.extend(items)
        name, spec = workload_binding(body.workload, body.policy, policies, autoscalers)
    svc = live_scheduler(ctx)
    stored: dict[str, Any] | None = None  # the Binding the answer would replace
    if svc is not None:
        view = live_view(svc)
        cur = current_placement(svc, name)
        if cur is not None:
            stored = svc.bindings.cache[BINDING.key(name)].object()
    else:
        view, placements = await store_view(ctx)
        cur = placements.get(name)
        if cur is not None:
            stored = await ctx.registry.try_get(BINDING, name)
    if cur is not None:
        view.current[name] = cur
    apply_changes(view, body.changes)
    return JSONResponse(dry_run(view, spec, name, stored=stored))
