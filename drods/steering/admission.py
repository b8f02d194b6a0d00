"""Admission of ServiceRegistrations, refused when written (422, nothing stored):

* the workload a registration steers is of its own namespace (`drods.model.steering.foreign_workload`),
  as a MigrationPlan's workload reference has no namespace to give;
* ``spec.evaluation`` names a registered evaluation function (`drods.steering.evaluation.EVALUATIONS`,
  known at admission): an unknown one was accepted, the registration went Invalid and its
  ServiceRoute was deleted. A stored registration whose function has since gone (a plugin not
  loaded) may still be written unchanged in that field (a finalizer, a label), as Kubernetes
  ratchets a field it tightened; the controller keeps it Invalid.
"""

from __future__ import annotations

from typing import Any

from drods.errors import Invalid
from drods.model.kinds import SERVICE_REGISTRATION, Kind
from drods.model.steering import foreign_workload
from drods.registry.objects import ObjectRegistry

DEFAULT_EVALUATION = "e2eDelay"  # ServiceRegistrationSpec's default


async def workload_of_own_namespace(registry: ObjectRegistry, kind: Kind, obj: dict[str, Any]) -> None:
    """Both checks above (the API's admission chain names this one)."""
    if kind is not SERVICE_REGISTRATION:
        return
    why = foreign_workload(obj)
    if why is not None:
        raise Invalid(why, {"fields": [{"field": "spec.workload.namespace", "message": why.split(": ", 1)[1]}]})
    await known_evaluation(registry, kind, obj)


def _evaluation(obj: dict[str, Any] | None) -> Any:
    spec = (obj or {}).get("spec")
    return spec.get("evaluation", DEFAULT_EVALUATION) if isinstance(spec, dict) else DEFAULT_EVALUATION


async def known_evaluation(registry: ObjectRegistry, kind: Kind, obj: dict[str, Any]) -> None:
    """422 on ``spec.evaluation`` when it names no registered function (unless the stored object
    already named the same one)."""
    if kind is not SERVICE_REGISTRATION:
        return
    # imported here: the evaluation functions bring NumPy, and `drods sim`, which admits objects through
    # the same chain, must not load it (tests/sim/test_footprint.py)
    from drods.steering.evaluation import EVALUATIONS, unknown_evaluation

    name = _evaluation(obj)
    if not isinstance(name, str) or name in EVALUATIONS:
        return
    meta = obj.get("metadata") or {}
    if meta.get("name"):
        stored = await registry.try_get(kind, str(meta["name"]), meta.get("namespace"))
        if stored is not None and _evaluation(stored) == name:
            return
    why = unknown_evaluation(name)
    raise Invalid(f"spec.evaluation: {why}", {"fields": [{"field": "spec.evaluation", "message": why}]})
