"""One ClusterTaintPolicy per taint: a policy that would add a taint (key and effect) another policy
already adds is refused when it is written, naming that policy — as Karmada's validating webhook
refuses it. Two would each rewrite the taint's value on the same clusters, the last write winning.
"""

from __future__ import annotations

from typing import Any

from drods.errors import Conflict
from drods.model.kinds import CLUSTER_TAINT_POLICY, Kind
from drods.registry.objects import ObjectRegistry


def _taints(obj: dict[str, Any]) -> set[tuple[str, str]]:
    return {(str(t.get("key")), str(t.get("effect"))) for t in (obj.get("spec") or {}).get("taints") or []
            if isinstance(t, dict)}


async def one_policy_per_taint(registry: ObjectRegistry, kind: Kind, obj: dict[str, Any]) -> None:
    if kind is not CLUSTER_TAINT_POLICY:
        return
    name = obj["metadata"]["name"]
    mine = _taints(obj)
    policies, _ = await registry.list(CLUSTER_TAINT_POLICY)
    for other in policies:
        if other["metadata"]["name"] == name:
            continue
        if both := sorted(mine & _taints(other)):
            key, effect = both[0]
            raise Conflict(f"the taint {key}:{effect} is already added by ClusterTaintPolicy "
                           f"{other['metadata']['name']!r}; one policy per taint",
                           {"kind": kind.kind, "name": name, "taint": {"key": key, "effect": effect},
                            "existing": other["metadata"]["name"]}, code="TAINT_CONFLICT")
