"""FederatedResourceQuota enforcement when placing (Karmada's quota check on a binding's decision).

Per namespace with a quota, what each binding's placement holds — placed replicas × per-replica
requests (cpu cores, memory GiB, GPUs, pods, storage GiB) — is kept up to date from the Bindings
the scheduler watches and from its own decisions. A decision is refused when, added to what the
namespace's other bindings hold, it would take a resource above a quota's ``spec.overall``: the
binding stays Unschedulable (its previous placement kept) with the reason, until a quota is raised
or another binding of the namespace frees room (both retry parked bindings).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from drods.model import jsondoc
from drods.model.federated_quota import ENFORCED, format_used, in_units
from drods.model.kinds import FEDERATED_RESOURCE_QUOTA
from drods.scheduler.framework import ScheduleResult
from drods.store import KeyValue

log = logging.getLogger(__name__)

# a binding's requirement vector (`records.requirement_tuple`): cpu, memory, gpu, pods, storage
_AXIS = {"cpu": 0, "memory": 1, "gpu": 2, "pods": 3, "storage": 4}
Held = tuple[float, float, float, float, float]
_NONE: Held = (0.0, 0.0, 0.0, 0.0, 0.0)


def held(placement: Iterable[tuple[str, int]], requirements: Sequence[float]) -> Held:
    """What ``placement`` holds: replicas placed × the per-replica vector."""
    n = sum(k for _, k in placement if k > 0)
    return (requirements[0] * n, requirements[1] * n, requirements[2] * n, requirements[3] * n,
            requirements[4] * n)


@dataclass(frozen=True, slots=True)
class Quota:
    name: str  # "namespace/name"
    limits: tuple[tuple[str, int, float], ...]  # (resource name, axis, limit in request units)


def decode_quota(kv: KeyValue) -> Quota | None:
    """A stored FederatedResourceQuota → its enforced limits (None: nothing placement can check)."""
    try:
        obj: Any = jsondoc.loads(kv.value)
    except ValueError:
        return None
    overall = ((obj.get("spec") or {}).get("overall") or {}) if isinstance(obj, Mapping) else {}
    limits = []
    for res, q in sorted(overall.items()):
        if res in ENFORCED:
            try:
                limits.append((res, _AXIS[ENFORCED[res]], in_units(res, q)))
            except (ValueError, ArithmeticError):
                continue
    ns_name = kv.key[len(FEDERATED_RESOURCE_QUOTA.key_prefix()):]
    return Quota(ns_name, tuple(limits)) if limits else None


class NamespaceQuotas:
    def __init__(self, bindings: Callable[[str], Iterable[tuple[str, Held]]]) -> None:
        """``bindings(namespace)``: every (binding, held) of the namespace, read when its first quota
        arrives (before that nothing of the namespace is kept)."""
        self._bindings = bindings
        self._quotas: dict[str, dict[str, Quota]] = {}  # namespace → quota name → quota
        self._held: dict[str, dict[str, Held]] = {}  # namespace → binding → what it holds

    def on_quota(self, key: str, old: Quota | None, new: Quota | None) -> bool:
        """Follow a quota's change; True: limits went up or away (parked bindings should retry)."""
        ns_name = key[len(FEDERATED_RESOURCE_QUOTA.key_prefix()):]
        ns = ns_name.partition("/")[0]
        quotas = self._quotas.setdefault(ns, {})
        if new is None:
            quotas.pop(ns_name, None)
        else:
            if ns not in self._held:
                self._held[ns] = {b: h for b, h in self._bindings(ns) if h != _NONE}
            quotas[ns_name] = new
        if not quotas:
            self._quotas.pop(ns, None)
            self._held.pop(ns, None)
        return old is not None and (new is None or new.limits != old.limits)

    def hold(self, namespace: str, binding: str, now: Held) -> bool:
        """``binding`` holds ``now``; True: it holds less than before in a namespace with a quota."""
        kept = self._held.get(namespace)
        if kept is None:
            return False
        before = kept.get(binding, _NONE)
        if now == _NONE:
            kept.pop(binding, None)
        else:
            kept[binding] = now
        return any(b > a for a, b in zip(now, before, strict=True))

    def refusal(self, namespace: str, binding: str, wants: Held) -> str | None:
        """Why ``binding`` may not hold ``wants`` (None: every quota of the namespace allows it)."""
        quotas = self._quotas.get(namespace)
        if not quotas:
            return None
        kept = self._held.get(namespace, {})
        others = [sum(h[i] for b, h in kept.items() if b != binding) for i in range(5)]
        for q in sorted(quotas.values(), key=lambda q: q.name):
            for res, axis, limit in q.limits:
                total = others[axis] + wants[axis]
                if wants[axis] > 0 and total > limit + 1e-9:
                    return (f"FederatedResourceQuota {q.name}: {res} would be {format_used(res, total)} of "
                            f"{format_used(res, limit)} overall ({format_used(res, others[axis])} held by the "
                            f"namespace's other workloads, {format_used(res, wants[axis])} asked by this one)")
        return None


def within_quota(quotas: NamespaceQuotas, namespace: str, binding: str, requirements: Sequence[float],
                 result: ScheduleResult) -> ScheduleResult:
    """``result`` when it is not a placement or every quota allows it, else the refusal: nothing placed,
    the quota's reason as the message (the caller keeps the binding's previous placement)."""
    if result.phase != "Scheduled":
        return result
    why = quotas.refusal(namespace, binding, held(result.pairs, requirements))
    if why is None:
        return result
    return ScheduleResult(name=result.name, phase="Unschedulable", requested=result.requested, placed=0,
                          message=why, clusters=result.clusters, feasible=result.feasible, division=result.division)
