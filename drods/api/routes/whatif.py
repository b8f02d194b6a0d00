"""W1 ``POST /api/v1/whatif``: the placement a binding or workload would get, and why — stored nowhere.

Body: ``{"binding": <the body of POST /api/v1/bindings>}`` or ``{"workload": <a Deployment,
StatefulSet or Job>, "policy": <optional PropagationPolicy / ResourcePlacementPolicy; default: the
stored policy the resource detector would pick>}``, plus ``"changes": [...]``
(`drods.whatif.dryrun`). Answer: ``{"placement": [{cluster, replicas}], "phase": "Scheduled" |
"Unschedulable", "explanation": <one /history/schedules entry>}``.

It runs against a copy of the live scheduler's snapshot, profile and tie-break RNG when this process
runs the scheduler (``drods serve``). An API server without one (``drods apiserver``) builds the
view a scheduler starting now would have, from the store, with the scheduler's own cache code; its
tie-breaks then come from a fresh RNG, so exact ties may fall differently than the running scheduler's.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from fastapi import APIRouter, Body, Depends, Request
from fastapi.responses import JSONResponse
from pydantic import BaseModel, ConfigDict, Field, model_validator

from drods.api.auth import Action, Principal
from drods.api.context import ApiContext, context, require
from drods.api.routes.bindings import BindingRequest
from drods.api.schemas import ERROR_RESPONSES
from drods.model.binding import BindingSpec
from drods.model.kinds import BINDING, CLUSTER, PROPAGATION_POLICY, RESOURCE_PLACEMENT_POLICY
from drods.whatif.dryrun import Change, ClusterFacts, LiveView, apply_changes, dry_run, workload_binding

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
    return _view(svc.cache, svc.profile, svc.scheduler.rng)


def _view(cache: Any, profile: Any, rng: Any) -> LiveView:
    clusters: dict[str, ClusterFacts] = {}
    now = cache.clock()
    for name, rec in cache.clusters.items():
        st = cache.statuses.get(name)
        row = cache.snap.index.get(name)
        ready = bool(cache.snap.ready[row]) if row is not None else False
        floor = rec.hold.water_level if rec.hold is not None and rec.hold.active(now) else None
        clusters[name] = ClusterFacts(dict(rec.labels), rec.spec, ready, st.status if st else None, floor)
    return LiveView.of(cache.snap, profile, rng, clusters)


async def store_view(ctx: ApiContext) -> tuple[LiveView, dict[str, dict[str, int]]]:
    """Without a scheduler in this process (``drods apiserver``): the view a scheduler starting now
    would build, with the scheduler's own cache and decoders over the store, its profile, and a
    fresh RNG seeded as the profile says. Placements per binding come with it."""
    import numpy as np

    from drods.model.keys import STATUS_PREFIX
    from drods.scheduler.profile import Profile
    from drods.schedulerd.cache import SchedulerCache, decode_cluster, status_decoder
    from drods.schedulerd.records import decode_binding

    store = ctx.store
    profile = ctx.profile or Profile.default()
    cache = SchedulerCache()
    kvs, _ = await store.range(CLUSTER.key_prefix())
    for kv in kvs:
        rec = decode_cluster(kv)
        if rec is not None:
            cache.on_cluster(rec.name, rec)
    decode_status = status_decoder(cache.clock)
    kvs, _ = await store.range(STATUS_PREFIX)
    for kv in kvs:
        name = kv.key[len(STATUS_PREFIX):]
        if "/" not in name:
            cache.on_status(name, decode_status(kv))
    placements: dict[str, dict[str, int]] = {}
    kvs, _ = await store.range(BINDING.key_prefix())
    for kv in kvs:
        b = decode_binding(kv.key, kv.value, kv.mod_revision)
        if b is None or b.deleting:
            continue
        cache.observe(b.name, b.placement, b.scheduled_time, b.requirements)
        placements[b.name] = _summed(b.placement)
    return _view(cache, profile, np.random.default_rng(profile.spec.defaults.seed)), placements


def _summed(placement: Any) -> dict[str, int]:
    out: dict[str, int] = {}
    for cluster, n in placement:
        out[cluster] = out.get(cluster, 0) + int(n)
    return out


def current_placement(svc: SchedulerService, name: str) -> dict[str, int] | None:
    """Where the binding ``name`` runs now, as the scheduler's informer has it (None: no such binding)."""
    rec = svc.bindings.cache.get(BINDING.key(name))
    return None if rec is None or rec.deleting else _summed(rec.placement)


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
    if svc is not None:
        view = live_view(svc)
        cur = current_placement(svc, name)
    else:
        view, placements = await store_view(ctx)
        cur = placements.get(name)
    if cur is not None:
        view.current[name] = cur
    apply_changes(view, body.changes)
    return JSONResponse(dry_run(view, spec, name))
