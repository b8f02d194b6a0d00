"""FederatedResourceQuota status (Karmada's): ``overall`` (the enforced limits), ``overallUsed`` (what
the namespace's placed workloads request in all) and ``aggregatedStatus`` (per cluster: the static
assignment's ``hard``, when there is one, and what is placed there as ``used``).

"Used" counts what placements hold — placed replicas × per-replica requests of every Binding of the
namespace (`drods.schedulerd.quota` refuses decisions by the same measure), for the resources a
placement can check (`drods.model.federated_quota.ENFORCED`); a pass runs when a Binding or a quota
changes (coalesced) and every ``RESYNC_SECONDS``, and writes a status only when it changed.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Iterable, Mapping
from typing import Any

from drods.controllers.fleet import MemberFleet
from drods.errors import AlreadyExists, Conflict, Invalid, NotFound
from drods.machinery.informer import Informer, subscribed
from drods.machinery.periodic import Periodic
from drods.model.federated_quota import ENFORCED, format_used
from drods.model.kinds import FEDERATED_RESOURCE_QUOTA

log = logging.getLogger(__name__)
Obj = dict[str, Any]

RESYNC_SECONDS = 15.0
COALESCE_SECONDS = 0.5
# a binding's per-replica request (spec.resources) behind each enforced unit
_REQUEST = {"cpu": "cpu", "memory": "memory", "gpu": "gpu", "storage": "storage"}


def placed_use(bindings: Iterable[Obj], namespaces: set[str]) -> dict[str, dict[str, dict[str, float]]]:
    """namespace → cluster → unit (cpu, memory, gpu, storage, pods) → amount placed there."""
    out: dict[str, dict[str, dict[str, float]]] = {}
    for b in bindings:
        spec = b.get("spec") or {}
        ns = (spec.get("resource") or {}).get("namespace") or "default"
        if ns not in namespaces:
            continue
        res = spec.get("resources") or {}
        for t in (b.get("status") or {}).get("placement") or []:
            n = int(t.get("replicas") or 0)
            if n <= 0:
                continue
            use = out.setdefault(ns, {}).setdefault(str(t.get("cluster")), {})
            for unit, field in _REQUEST.items():
                use[unit] = use.get(unit, 0.0) + n * float(res.get(field) or 0)
            use["pods"] = use.get("pods", 0.0) + n
    return out


def quota_status(spec: Mapping[str, Any], by_cluster: Mapping[str, Mapping[str, float]]) -> Obj:
    """The status of a quota with ``spec`` over what its namespace has placed on each cluster."""
    # quantities as Kubernetes serializes a ResourceList: strings, as `used` is (`cpu: 100` read back "100")
    overall = {r: str(q) for r, q in (spec.get("overall") or {}).items()}
    names = [r for r in overall if r in ENFORCED]

    def used(amounts: Iterable[Mapping[str, float]]) -> dict[str, str]:
        totals = list(amounts)
        return {r: format_used(r, sum(a.get(ENFORCED[r], 0.0) for a in totals)) for r in names}

    hard = {a["clusterName"]: {r: str(q) for r, q in (a.get("hard") or {}).items()}
            for a in spec.get("staticAssignments") or []}
    per_cluster = [{"clusterName": c, **({"hard": hard[c]} if c in hard else {}), "used": used([by_cluster.get(c, {})])}
                   for c in sorted(set(hard) | set(by_cluster))]
    return {"overall": overall, "overallUsed": used(by_cluster.values()), "aggregatedStatus": per_cluster}


class FederatedQuotaStatus:
    def __init__(self, fleet: MemberFleet, quotas: Informer) -> None:
        self.fleet = fleet
        self.quotas = quotas

    async def run(self) -> None:
        await self.fleet.synced.wait()
        changed = asyncio.Event()
        passes = Periodic("federated-quota-status", self.tick, RESYNC_SECONDS, wake=changed, first_at_start=True,
                          coalesce_s=COALESCE_SECONDS)

        def wake(_key: str, _old: Obj | None, _new: Obj | None) -> None:
            if self.quotas.cache:
                changed.set()

        with subscribed((self.fleet.bindings, wake), (self.quotas, wake)):
            await passes.run()

    async def tick(self) -> int:
        """One pass; returns how many statuses it wrote."""
        quotas = list(self.quotas.cache.values())
        if not quotas:
            return 0
        use = placed_use(self.fleet.bindings.cache.values(),
                         {str(q["metadata"].get("namespace")) for q in quotas})
        written = 0
        for q in quotas:
            meta = q["metadata"]
            status = quota_status(q.get("spec") or {}, use.get(str(meta.get("namespace")), {}))
            if status == q.get("status"):
                continue
            with contextlib.suppress(NotFound, Conflict, AlreadyExists, Invalid):
                await self.fleet.registry.update_status(FEDERATED_RESOURCE_QUOTA, meta["name"], status,
                                                        meta.get("namespace"),
                                                        resource_version=int(meta["resourceVersion"]), current=q)
                written += 1
        return written
