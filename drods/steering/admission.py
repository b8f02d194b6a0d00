"""Admission of ServiceRegistrations: the workload a registration steers is of its own namespace
(`drods.model.steering.foreign_workload`), refused when written (422) as a MigrationPlan's workload
reference has no namespace to give."""

from __future__ import annotations

from typing import Any

from drods.errors import Invalid
from drods.model.kinds import SERVICE_REGISTRATION, Kind
from drods.model.steering import foreign_workload
from drods.registry.objects import ObjectRegistry


async def workload_of_own_namespace(registry: ObjectRegistry, kind: Kind, obj: dict[str, Any]) -> None:
    if kind is not SERVICE_REGISTRATION:
        return
    why = foreign_workload(obj)
    if why is not None:
        raise Invalid(why, {"fields": [{"field": "spec.workload.namespace", "message": why.split(": ", 1)[1]}]})
