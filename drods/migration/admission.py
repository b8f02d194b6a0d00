"""One running MigrationPlan per workload: a second plan for a workload that is being moved is refused
when it is written (409 ``MIGRATION_IN_PROGRESS``, naming the running one). Two creations racing past
this check are settled by the controller: the older plan runs, the newer one is Failed."""

from __future__ import annotations

from typing import Any

from drods.errors import Conflict
from drods.model.kinds import MIGRATION_PLAN, Kind
from drods.model.migration import TERMINAL
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
