"""One autoscaler per workload (SPEC F5): a second FederatedHPA or workload-targeted
CronFederatedHPA for the same workload is refused when it is written, with the owner's name.

A cron that drives a FederatedHPA is an input of that one and is always admitted. Two creations
racing past this check are settled by the controllers (`drods.model.autoscaling.owner`: the oldest
owns, the other reports ``AmbiguousTarget``).
"""

from __future__ import annotations

from typing import Any

from drods.errors import Conflict
from drods.model.autoscaling import scaled_workload
from drods.model.kinds import AUTOSCALER_KINDS, CRON_FEDERATED_HPA, FEDERATED_HPA, Kind
from drods.registry.objects import ObjectRegistry


async def one_autoscaler_per_workload(registry: ObjectRegistry, kind: Kind, obj: dict[str, Any]) -> None:
    if kind.key_prefix() not in (FEDERATED_HPA.key_prefix(), CRON_FEDERATED_HPA.key_prefix()):
        return  # (Karmada's autoscaling.karmada.io kinds are stored as these: the same objects)
    target = scaled_workload(obj)
    if target is None:
        return
    meta = obj["metadata"]
    for other_kind in AUTOSCALER_KINDS:
        others, _ = await registry.list(other_kind, target[2])
        for o in others:
            if other_kind.kind == kind.kind and o["metadata"]["name"] == meta["name"]:
                continue
            if scaled_workload(o) == target:
                raise Conflict(f"{target[1]} {target[2]}/{target[3]} is already scaled by "
                               f"{other_kind.kind} {o['metadata']['name']!r}; one autoscaler per workload "
                               f"(drive it with a CronFederatedHPA whose scaleTargetRef is that FederatedHPA)",
                               {"kind": kind.kind, "name": meta["name"], "workload": list(target),
                                "existing": {"kind": other_kind.kind, "name": o["metadata"]["name"]}},
                               code="AUTOSCALER_EXISTS")
