"""Admission of MigrationPlans.

One running MigrationPlan per workload: a second plan for a workload that is being moved is refused
when it is written (409 ``MIGRATION_IN_PROGRESS``, naming the running one). Two creations racing past
this check are settled by the controller: the older plan runs, the newer one is Failed."""

from __future__ import annotations

from typing import Any

from pydantic import ValidationError

from drods.errors import BadRequest, Conflict, NotFound
from drods.model.kinds import MIGRATION_PLAN, Kind, by_kind
from drods.model.migration import TERMINAL, MigrationPlanSpec
from drods.model.volume_claims import workload_claims
from drods.registry.objects import ObjectRegistry


def workload_of(obj: dict[str, Any]) -> tuple[str, str, str] | None:
    ref = (obj.get("spec") or {}).get("workloadRef") or {}
    if not isinstance(ref, dict) or not ref.get("name"):
        return None
    return (str(ref.get("kind") or "StatefulSet"), str(obj["metadata"].get("namespace") or "default"),
            str(ref["name"]))


async def one_plan_per_workload(registry: ObjectRegistry, kind: Kind, obj: dict[str, Any]) -> None:
    if kind is not MIGRATION_PLAN:
        return
    target = workload_of(obj)
    if target is None:
        return
    meta = obj["metadata"]
    others, _ = await registry.list(MIGRATION_PLAN, target[1])
    for o in others:
        if o["metadata"]["name"] == meta["name"] or workload_of(o) != target:
            continue
        if str((o.get("status") or {}).get("phase") or "Pending") not in TERMINAL:
            raise Conflict(f"{target[0]} {target[1]}/{target[2]} is already being moved by MigrationPlan "
                           f"{o['metadata']['name']!r}; wait for it to finish or delete it",
                           {"name": meta["name"], "workload": list(target),
                            "existing": o["metadata"]["name"]},
                           code="MIGRATION_IN_PROGRESS")


async def data_step_declared(registry: ObjectRegistry, kind: Kind, obj: dict[str, Any]) -> None:
    """A new plan for a workload that keeps data in PersistentVolumeClaims must say how the data moves
    (``spec.data.mover``) or that it does not (``spec.data: None``): 400 ``DATA_STEP_REQUIRED``
    otherwise. Only on create (a running plan is never refused a finalizer change); a workload that
    does not exist yet is checked again when the plan starts."""
    meta = obj.get("metadata") or {}
    if kind is not MIGRATION_PLAN or meta.get("uid") or meta.get("creationTimestamp"):
        return
    try:
        spec = MigrationPlanSpec.model_validate(obj.get("spec") or {})
    except ValidationError:
        return  # validation reports it
    wkind = by_kind(spec.workloadRef.apiVersion, spec.workloadRef.kind)
    if spec.data_step() is not None or spec.data_declared_none or wkind is None:
        return
    ns = str(meta.get("namespace") or "default")
    try:
        workload = await registry.get(wkind, spec.workloadRef.name, ns)
    except NotFound:
        return
    claims = workload_claims(workload)
    if claims:
        raise BadRequest(f"{spec.workloadRef.kind} {ns}/{spec.workloadRef.name} keeps its data in "
                         f"PersistentVolumeClaims ({claims.describe()}): set spec.data.mover (VolumeCopy or Hook) "
                         "to move the data, or spec.data: None to move the workload without it",
                         {"name": meta.get("name"), "workload": [spec.workloadRef.kind, ns, spec.workloadRef.name],
                          "fields": [{"field": "spec.data", "message": "required for a workload with "
                                      "PersistentVolumeClaims: mover VolumeCopy or Hook, or None"}],
                          "choices": ["VolumeCopy", "Hook", "None"]},
                         code="DATA_STEP_REQUIRED")
