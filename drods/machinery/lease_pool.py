"""Short-lived keys written with one shared store lease: monitoring's threshold and sustained events,
Kubernetes Events (`drods.machinery.event_log`), a journal's entries (`drods.machinery.journal`)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable

from drods.store import LeaseNotFound, Store


class LeasePool:
    """One shared lease for short-lived keys, renewed by replacement after ``renew_after`` of its TTL:
    keys written with it live between ``1 - renew_after`` and all of the TTL, and no keep-alive traffic
    is needed."""

    def __init__(self, store: Store, ttl: int, clock: Callable[[], float], renew_after: float = 0.1) -> None:
        self.store = store
        self.ttl = ttl
        self.clock = clock
        self.renew_after = renew_after
        self._id: int | None = None
        self._granted = 0.0
        self._lock = asyncio.Lock()

    async def get(self) -> int:
        async with self._lock:
            if self._id is None or self.clock() - self._granted >= self.ttl * self.renew_after:
                lease = await self.store.grant_lease(self.ttl)
                self._id, self._granted = lease.id, self.clock()
            return self._id

    def invalidate(self, lease_id: int) -> None:
        if self._id == lease_id:
            self._id = None

    async def put(self, key: str, value: bytes, store: Store | None = None) -> None:
        """``store``: a view of this pool's store to write through (a leader's fence)."""
        for _ in range(2):
            lease = await self.get()
            try:
                await (store or self.store).put(key, value, lease=lease)
                return
            except LeaseNotFound:
                self.invalidate(lease)
        raise LeaseNotFound(f"could not attach {key} to a fresh lease")
