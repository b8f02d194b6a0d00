"""Writing Events (`drods.model.events`) beside the changes they tell of: every key under one store
lease of the events' TTL, renewed every quarter of it (each Event lives 3/4 to 1 × the TTL with no
pruning job, as kube-apiserver's do in etcd). An Event told again (the same object, type, reason and
message) is the same Event with its count raised and its last time moved, as client-go's recorder
does, while this process remembers it (the last ``remembered`` distinct ones). Never audited (an
Event changes nothing) and never allowed to hold back or fail the change it tells of."""

from __future__ import annotations

import asyncio
import logging
import time
from collections import OrderedDict
from collections.abc import Mapping
from typing import Any

from drods.machinery.lease_pool import LeasePool
from drods.model import jsondoc
from drods.model.events import EVENT, EVENT_TTL_S, EventType, Occurrence, correlation_key, event
from drods.store import Put, Store, StoreError

log = logging.getLogger(__name__)


class EventLog:
    max_in_flight = 256  # `tell`'s writes under way; beyond it an event is dropped (counted), as a full
    # recorder's queue drops in Kubernetes' client
    remembered = 4096  # client-go's correlator cache size

    def __init__(self, store: Store, component: str, instance: str = "", ttl_s: int = EVENT_TTL_S) -> None:
        self.store = store
        self.component = component
        self.instance = instance
        self.leases = LeasePool(store, ttl_s, time.time, renew_after=0.25)  # store leases run on wall time
        self.dropped = 0  # events not written (the store refused or was away, or too many under way)
        self._in_flight: set[asyncio.Task[None]] = set()
        self._seen: OrderedDict[tuple[str, ...], Occurrence] = OrderedDict()

    def tell(self, involved: Mapping[str, Any], type_: EventType, reason: str, message: str) -> None:
        """`record` without waiting for it: the pass that saw the change goes on (a controller's latency
        is the workload's), the write follows."""
        if len(self._in_flight) >= self.max_in_flight:
            self.dropped += 1
            return
        task = asyncio.create_task(self.record(involved, type_, reason, message, time.time()))
        self._in_flight.add(task)
        task.add_done_callback(self._in_flight.discard)

    async def lease(self) -> int:
        return await self.leases.get()

    def put(self, involved: Mapping[str, Any], type_: EventType, reason: str, message: str, ts: float,
            lease: int) -> Put:
        """The write of one Event, for a transaction of the caller's (its change's own)."""
        key = correlation_key(involved, type_, reason, message)
        seen = self._seen.pop(key, None)
        if seen is not None:
            seen.count += 1
        ev = event(involved, type_, reason, message, ts, self.component, self.instance, seen)
        meta = ev["metadata"]
        self._seen[key] = seen or Occurrence(meta["name"], meta["uid"], ev["firstTimestamp"])
        if len(self._seen) > self.remembered:
            self._seen.popitem(last=False)
        return Put(EVENT.key(meta["name"], meta["namespace"]), jsondoc.dumps(ev), lease)

    async def record(self, involved: Mapping[str, Any], type_: EventType, reason: str, message: str,
                     ts: float | None = None) -> None:
        """One Event on its own (a change made elsewhere, a member's refusal): best effort."""
        try:
            p = self.put(involved, type_, reason, message, time.time() if ts is None else ts, 0)
            await self.leases.put(p.key, p.value)
        except (StoreError, OSError) as e:
            self.dropped += 1
            log.debug("event %s about %s not written: %s", reason, involved.get("name"), e)
