"""The WorkloadRebalancer controller (Karmada's ``apps.karmada.io``, `drods.model.rebalancer`).

For each workload a rebalancer lists and has no result for yet, it finds the workload's Binding
(the detector's name for it, and the Binding must name that very workload) and asks for a decision
from scratch through the one re-placement mechanism (`drods.controllers.rescheduler.trigger`:
``spec.rescheduleTriggeredAt`` and the reason, which the scheduler's decision record keeps). A
workload without a Binding is ``Failed`` / ``ReferencedBindingNotFound``; any other error is tried
again on the next pass. Results already recorded are kept when the spec changes (a workload added
later is rebalanced once; one removed leaves the status). When every workload has its result,
``finishTime`` is set, and ``ttlSecondsAfterFinished`` after it the rebalancer is deleted.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable
from typing import Any

from pydantic import ValidationError

from drods.controllers.rescheduler import trigger
from drods.errors import ApiError, NotFound
from drods.machinery.informer import Informer, subscribed, wait_synced
from drods.machinery.periodic import Periodic
from drods.model.detection import binding_is_for, binding_name
from drods.model.kinds import BINDING, WORKLOAD_REBALANCER
from drods.model.rebalancer import BINDING_NOT_FOUND, ObservedWorkload, WorkloadRebalancerSpec, WorkloadReference
from drods.model.timefmt import parse_rfc3339, rfc3339
from drods.registry.objects import ObjectRegistry

log = logging.getLogger(__name__)
Obj = dict[str, Any]


def _observed(status: Obj) -> dict[tuple[str, str, str, str], ObservedWorkload]:
    out: dict[tuple[str, str, str, str], ObservedWorkload] = {}
    for raw in status.get("observedWorkloads") or []:
        try:
            seen = ObservedWorkload.model_validate(raw)
        except ValidationError:
            continue
        if seen.result is not None:
            out[seen.workload.key()] = seen
    return out


class WorkloadRebalancerController:
    """One per leadership term of the member controllers; ``reconcile`` handles one object."""

    def __init__(self, registry: ObjectRegistry, rebalancers: Informer, *, interval_s: float = 1.0,
                 clock: Callable[[], float] = time.time) -> None:
        self.registry = registry
        self.rebalancers = rebalancers
        self.interval_s = interval_s
        self.clock = clock

    async def run(self) -> None:
        await wait_synced(self.rebalancers)
        changed = asyncio.Event()
        passes = Periodic("workload-rebalancer", self.tick, self.interval_s, wake=changed, first_at_start=True,
                          coalesce_s=0.05)
        with subscribed((self.rebalancers, lambda _k, _o, _n: changed.set())):
            await passes.run()

    async def tick(self) -> None:
        for obj in list(self.rebalancers.cache.values()):
            try:
                await self.reconcile(obj)
            except ApiError as e:
                log.warning("workload rebalancer %s: %s", obj["metadata"].get("name"), e.message)

    async def reconcile(self, obj: Obj) -> None:
        meta, status = obj["metadata"], obj.get("status") or {}
        if meta.get("deletionTimestamp"):
            return
        name, generation = str(meta["name"]), int(meta.get("generation") or 1)
        try:
            spec = WorkloadRebalancerSpec.model_validate(obj.get("spec") or {})
        except ValidationError:
            return
        now = self.clock()
        if status.get("observedGeneration") == generation and status.get("finishTime"):
            finished = parse_rfc3339(status["finishTime"])
            ttl = spec.ttlSecondsAfterFinished
            if ttl is not None and finished is not None and now >= finished + ttl:
                with contextlib.suppress(NotFound):  # deleted meanwhile
                    await self.registry.delete(WORKLOAD_REBALANCER, name)
            return
        known = _observed(status)
        entries: list[ObservedWorkload] = []
        fresh = False
        for w in {w.key(): w for w in spec.workloads}.values():
            entry = known.get(w.key())
            if entry is None:
                entry, fresh = await self._rebalance(name, w), True
            entries.append(entry)
        new_status: Obj = {"observedWorkloads": [e.model_dump(mode="json", exclude_none=True) for e in entries],
                           "observedGeneration": generation}
        if all(e.result is not None for e in entries):
            new_status["finishTime"] = rfc3339(now) if fresh or not status.get("finishTime") else status["finishTime"]
        if new_status != status:
            await self.registry.update_status(WORKLOAD_REBALANCER, name, new_status)

    async def _rebalance(self, rebalancer: str, w: WorkloadReference) -> ObservedWorkload:
        """Ask for ``w``'s Binding to be decided afresh; an entry without a result means try again."""
        bname = binding_name(w.kind, w.namespace or "", w.name)
        try:
            binding = await self.registry.get(BINDING, bname)
            if not binding_is_for(binding, w.kind, w.namespace or "", w.name, api_version=w.apiVersion):
                raise NotFound(f"binding {bname} places another object")
            await trigger(self.registry, bname, f"WorkloadRebalancer {rebalancer}", self.clock)
        except NotFound:
            return ObservedWorkload(workload=w, result="Failed", reason=BINDING_NOT_FOUND)
        except ApiError as e:
            log.warning("workload rebalancer %s: %s: %s", rebalancer, bname, e.message)
            return ObservedWorkload(workload=w)
        return ObservedWorkload(workload=w, result="Successful")
