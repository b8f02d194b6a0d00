"""Traffic rebalance (H1): placed workloads move nearer the traffic peers that arrived after them.

Part of the descheduler (lease ``descheduler``): every ``autoops.trafficRebalance.intervalSeconds``
one pass over the placed Bindings. It builds the view a scheduler starting now would build
(`drods.schedulerd.view.view_and_bindings`) plus what the affinity scores read — the decayed traffic
graph, where every workload runs, the workload classes and the datasets — and asks the pure verdict
(`drods.scheduler.rebalance.traffic_verdict`) per Binding that has traffic. A verdict to move is
carried out by the process's reschedule hook as a ``rebalance`` request: the `Rescheduler` marks the
Binding for re-placement (the same path as failover and evacuation) and the leading scheduler
re-places it; its ``history/schedules`` entry carries the reason. ``multicluster.io/traffic-rebalanced-at``
on the Binding holds each workload to one move per ``cooldownSeconds``, also across a new leader.
Every move is also recorded in monitoring's operations log (kind ``TrafficRebalance``).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
from pydantic import ValidationError

from drods.machinery.periodic import Periodic
from drods.model import jsondoc
from drods.model.annotations import TRAFFIC_REBALANCED_AT, placement_offers
from drods.model.binding import BindingSpec, with_offers
from drods.model.keys import TRAFFIC_KEY
from drods.model.kinds import DATASET
from drods.model.reschedule import RescheduleHook, RescheduleRequest
from drods.model.timefmt import parse_rfc3339
from drods.model.traffic import peers
from drods.registry.objects import ObjectRegistry, decode_stored
from drods.scheduler.framework import Scheduler
from drods.scheduler.profile import Profile
from drods.scheduler.rebalance import TrafficRebalancePolicy, TrafficVerdict, current_of, traffic_verdict
from drods.scheduler.snapshot import Snapshot
from drods.scheduler.task import Task
from drods.schedulerd.records import BindingRecord
from drods.schedulerd.view import view_and_bindings
from drods.store import Store

log = logging.getLogger(__name__)

KIND = "TrafficRebalance"


@dataclass(frozen=True, slots=True)
class TrafficMove:
    """One verdict to move and what the hook said."""

    binding: str
    verdict: TrafficVerdict
    outcome: str  # executed | refused | failed | no-hook


class TrafficRebalancer:
    """The traffic rebalance passes of the descheduler (its lease, its fenced registry)."""

    def __init__(self, store: Store, registry: ObjectRegistry, profile: Profile, policy: TrafficRebalancePolicy,
                 hook: RescheduleHook | None, *, clock: Callable[[], float] = time.time,
                 min_availability: float = 1.0, enabled: bool = True,
                 record: Callable[..., Awaitable[Any]] | None = None) -> None:
        self.store = store
        self.registry = registry
        self.profile = profile
        self.policy = policy
        self.hook = hook
        self.clock = clock
        self.min_availability = min_availability
        self.enabled = enabled and policy.enabled
        self.record = record

    async def run(self) -> None:
        if self.enabled:
            await Periodic("traffic-rebalance", self.pass_once, self.policy.intervalSeconds).run()

    async def _view(self, now: float) -> tuple[Snapshot, list[BindingRecord]] | None:
        """The fleet and the placed Bindings as the scheduler sees them; None without traffic between
        workloads (then there is nothing to rebalance, and no view of every Binding is built)."""
        kv = await self.store.get(TRAFFIC_KEY)
        try:
            doc = jsondoc.loads(kv.value) if kv is not None else None
        except ValueError:
            doc = None
        traffic = peers(doc if isinstance(doc, dict) else None, now, self.policy.settleSeconds)
        if not traffic:
            return None
        view, bindings = await view_and_bindings(self.store, self.profile)
        snap = view.snapshot
        snap.traffic = traffic
        kvs, _ = await self.store.range(DATASET.key_prefix())
        for d in kvs:
            obj = decode_stored(d)
            meta = (obj or {}).get("metadata") or {}
            if obj is not None:
                snap.set_dataset(f"{meta.get('namespace') or 'default'}/{meta.get('name')}", obj)
        records: list[BindingRecord] = []
        for rec in bindings:
            if not rec.placement:
                continue
            snap.workload_placements[rec.workload] = rec.placement
            if rec.workload_class:
                snap.set_class_placement(rec.name, rec.workload_class, rec.placement, rec.requirements[0])
            records.append(rec)
        return snap, records

    def _cooling(self, obj: dict[str, Any], now: float) -> bool:
        last = parse_rfc3339(((obj.get("metadata") or {}).get("annotations") or {}).get(TRAFFIC_REBALANCED_AT))
        return last is not None and now - last < self.policy.cooldownSeconds

    async def pass_once(self) -> list[TrafficMove]:
        """One pass over the placed Bindings; returns the moves asked for."""
        if not self.enabled:
            return []
        now = self.clock()
        seen = await self._view(now)
        if seen is None:
            return []
        snap, records = seen
        sched = Scheduler(self.profile)
        moves: list[TrafficMove] = []
        for rec in sorted(records, key=lambda r: r.name):
            if rec.workload not in snap.traffic or rec.pin is not None or rec.partial or \
                    rec.phase in ("Pending", "Unschedulable"):
                continue  # no traffic, pinned by a MigrationPlan, or not (fully) placed
            if rec.trigger_time is not None and (rec.scheduled_time is None or rec.trigger_time > rec.scheduled_time):
                continue  # a reschedule is already pending
            obj = rec.object()
            if self._cooling(obj, now):
                continue
            try:
                spec = with_offers(BindingSpec.model_validate(obj.get("spec") or {}), placement_offers(obj))
            except ValidationError:
                continue
            task = Task(spec, name=rec.name, current=current_of(rec.placement), workload_class=rec.workload_class,
                        workload=rec.workload)
            verdict = traffic_verdict(sched, task, snap, self.policy.minCostReduction)
            if not verdict.move:
                continue
            moves.append(TrafficMove(rec.name, verdict, await self._move(rec, verdict, now)))
            # later verdicts of this pass see it where the scheduler is about to put it
            snap.workload_placements[rec.workload] = verdict.placement
            snap.forget(key=rec.name)
            snap.assume(verdict.placement, np.asarray(rec.requirements, dtype=np.float64), key=rec.name)
            if rec.workload_class:
                snap.set_class_placement(rec.name, rec.workload_class, verdict.placement, rec.requirements[0])
        return moves

    async def _move(self, rec: BindingRecord, verdict: TrafficVerdict, now: float) -> str:
        target = max(verdict.placement, key=lambda p: (p[1], p[0]))[0]
        reason = f"traffic rebalance: {verdict.reason}"
        res = ((rec.object().get("spec") or {}).get("resource") or {})
        workload = {"kind": res.get("kind"), "namespace": res.get("namespace") or "default", "name": res.get("name")}
        details = {"binding": rec.name, "at": now, **verdict.details(), **({"workload": workload} if res else {})}
        info: dict[str, Any] = {"action": "rebalance", "trigger": details}
        if self.hook is None:
            outcome = "no-hook"
        else:
            try:
                result = await self.hook(RescheduleRequest("rebalance", target, reason, 1.0, self.min_availability,
                                                           details))
            except Exception as e:  # noqa: BLE001 - a failing hook is recorded, not fatal
                log.exception("traffic rebalance of %s failed", rec.name)
                outcome = "failed"
                info["error"] = f"{type(e).__name__}: {e}"
            else:
                outcome = "executed" if result.accepted else "refused"
                info["result"] = {"accepted": result.accepted, "moved": result.moved, "message": result.message,
                                  **({"offered": result.offered} if result.offered else {})}
        info["outcome"] = outcome
        if self.record is not None:
            await self.record(KIND, reason, cluster=target, binding=rec.name, ts=now, details=info)
        return outcome
