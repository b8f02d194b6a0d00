"""The demand steering sees: requests per client site for each service, counted where
flows are resolved (``GET /api/v1/steering/services/{id}/resolve``) and shared through the store.
A resolve with ``?dryRun=All`` only looks (an operator checking a route, a dashboard) and is not
counted: it is nobody's demand, and counting it would move replicas towards whoever looked.

Each API server counts in memory and writes its cumulative counts per service to
``/steering/demand/<serviceId>/<process>`` at most once per ``flush_seconds`` (on the next request
after that; an idle service costs nothing). Counts only grow, so whoever reads them (`users.py`)
takes differences; a restarted process starts again from 0, which reads as a reset, not a loss.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field

from drods.model import jsondoc
from drods.model.keys import demand_key
from drods.store import Store


@dataclass(slots=True)
class _Counts:
    sites: dict[str, int] = field(default_factory=dict)
    flushed_at: float = float("-inf")
    dirty: bool = False


class DemandRecorder:
    """One API server's request counts per (service, client site)."""

    def __init__(self, store: Store, flush_seconds: float = 1.0, clock: Callable[[], float] = time.time) -> None:
        self.store = store
        self.flush_seconds = flush_seconds
        self.clock = clock
        self.process = uuid.uuid4().hex[:12]
        self._services: dict[str, _Counts] = {}

    async def count(self, service_id: str, client_site: str, n: int = 1) -> None:
        """Count ``n`` requests; writes this process's counts when the last write is old enough."""
        c = self._services.setdefault(service_id, _Counts())
        c.sites[client_site] = c.sites.get(client_site, 0) + n
        c.dirty = True
        now = self.clock()
        if now - c.flushed_at >= self.flush_seconds:
            await self.flush(service_id, now)

    async def flush(self, service_id: str, now: float | None = None) -> None:
        c = self._services.get(service_id)
        if c is None or not c.dirty:
            return
        c.flushed_at = self.clock() if now is None else now
        c.dirty = False
        body = {"counts": dict(c.sites), "at": c.flushed_at}
        await self.store.put(demand_key(service_id, self.process), jsondoc.dumps(body))
