"""Writing the scheduler's decisions (API5): each with its history entry in one transaction, many
per transaction, every one fenced on the scheduler's lease; a transaction whose guard fails falls
back to one read-modify-write per binding on the binding as it is now.

Outcomes per decision: ``ok``, ``gone`` (the binding was deleted), ``stale`` (its spec moved on:
the newer generation is queued by its own watch event), ``not-leader``, ``conflict`` (the retry
budget ran out) or ``error``.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from drods.errors import Conflict
from drods.machinery.event_log import EventLog
from drods.machinery.fence import Fence, LeadershipLost
from drods.machinery.journal import Journal
from drods.model import jsondoc
from drods.model.timefmt import rfc3339_ms
from drods.scheduler.framework import ScheduleResult
from drods.schedulerd.metrics import SchedulerMetrics
from drods.schedulerd.queue import QueueEntry
from drods.schedulerd.records import BindingRecord, Decision, decode_binding, encode_object, merge_status
from drods.store import CasFailed, Compare, KeyValue, Put, Store, StoreError
from drods.store.cas import read_modify_write

log = logging.getLogger(__name__)


@dataclass(slots=True)
class Plan:
    """One decision waiting for its status write."""

    entry: QueueEntry
    rec: BindingRecord
    result: ScheduleResult
    decision: Decision
    value: bytes
    schedule_type: str
    trigger: dict[str, Any] | None
    written: BindingRecord | None = None  # what ``value`` decodes to (but its revision)
    unknown: int = 0  # registered clusters not yet known (no status, no Ready condition) at the decision
    involved: dict[str, Any] | None = None  # what the decision's Event is about (its template)


class DecisionWriter:
    def __init__(self, store: Store, history: Journal, metrics: SchedulerMetrics, term: Callable[[], Fence | None],
                 lease_key: str, events: EventLog | None = None) -> None:
        self.store = store
        self.history = history
        self.metrics = metrics
        self.term = term  # the fence of the scheduler's current term (None: not leading)
        self.lease_key = lease_key
        self.events = events

    def _event(self, p: Plan, lease: int) -> list[Put]:
        """The decision's Event, in Karmada's words (``kubectl describe`` of the template shows it)."""
        if self.events is None or p.involved is None:
            return []
        d = p.decision
        if d.scheduled:
            result = ", ".join(f"{c}:{n}" for c, n in sorted(d.placement))
            return [self.events.put(p.involved, "Normal", "ScheduleBindingSucceed",
                                    f"Binding has been scheduled successfully. Result: {{{result}}}. {d.message}",
                                    d.time, lease)]
        return [self.events.put(p.involved, "Warning", "ScheduleBindingFailed", d.message, d.time, lease)]

    @property
    def _fence(self) -> Compare:
        term = self.term()
        if term is None:
            raise LeadershipLost(Fence(self.lease_key, 0))
        return term.compare()

    async def write(self, plans: list[Plan], records: list[dict[str, Any]]) -> list[str]:
        """Each decision and its history entry in one transaction (so a decided status is always
        explained), many decisions per transaction, each guarded by the binding's revision."""
        lease = await self.history.lease()
        event_lease = await self.events.lease() if self.events is not None else 0
        chunk = max(1, (self.store.max_txn_ops - 1) * 3 // (8 if self.events is not None else 4))
        outcomes: list[str] = [""] * len(plans)
        fallback: list[int] = []
        for start in range(0, len(plans), chunk):
            part = range(start, min(start + chunk, len(plans)))
            try:
                res = await self.store.txn(
                    [self._fence, *(Compare(plans[i].rec.key, "mod", "=", plans[i].rec.mod_revision) for i in part)],
                    [*(Put(plans[i].rec.key, plans[i].value) for i in part),
                     *self.history.puts([(plans[i].decision.time, records[i]) for i in part], lease),
                     *(put for i in part for put in self._event(plans[i], event_lease))])
                ok = res.succeeded
            except StoreError as e:
                log.warning("status transaction failed (%s); writing one by one", e)
                ok = False
            if ok:
                for i in part:
                    outcomes[i] = "ok"
            else:
                fallback.extend(part)
        if fallback:
            if not await self._still_leader():
                for i in fallback:
                    outcomes[i] = "not-leader"
                return outcomes
            results = await asyncio.gather(*(self._write_one(plans[i], [*self.history.puts(
                [(plans[i].decision.time, records[i])], lease), *self._event(plans[i], event_lease)])
                for i in fallback),
                                           return_exceptions=True)
            for i, r in zip(fallback, results, strict=True):
                outcomes[i] = r if isinstance(r, str) else "error"
        return outcomes

    async def _still_leader(self) -> bool:
        fence = self.term()
        kv = await self.store.get(self.lease_key)
        return fence is not None and kv is not None and kv.mod_revision == fence.generation

    async def _write_one(self, p: Plan, hist: list[Put]) -> str:
        """CAS write of one decision on the binding as it is now (read-modify-write, retried)."""
        when = rfc3339_ms(p.decision.time)

        async def attempt(_: int) -> str:
            kv: KeyValue | None = await self.store.get(p.rec.key)
            if kv is None:
                return "gone"
            cur = decode_binding(kv.key, kv.value, kv.mod_revision)
            if cur is None or cur.deleting:
                return "gone"
            obj = jsondoc.loads(kv.value)
            status = obj.get("status") or {}
            if status.get("scheduledTime") == when and cur.scheduled_generation == p.decision.generation:
                return "ok"  # the batch write went through after all
            if cur.generation != p.rec.generation or cur.trigger_time != p.rec.trigger_time:
                return "stale"
            obj["status"] = merge_status(status, p.decision)
            res = await self.store.txn([self._fence, Compare(kv.key, "mod", "=", kv.mod_revision)],
                                       [Put(kv.key, encode_object(obj)), *hist])
            if res.succeeded:
                return "ok"
            if not await self._still_leader():
                return "not-leader"
            self.metrics.write_conflicts.inc()
            raise CasFailed(kv.key, None)

        try:
            return await read_modify_write(attempt)
        except Conflict:
            return "conflict"

