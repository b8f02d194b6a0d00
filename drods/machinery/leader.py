"""Leader election on a store lease (A6): the holder's key lives only as long as its lease."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable, Coroutine
from typing import Any

from drods.store import CasFailed, EventType, LeaseNotFound, Store

log = logging.getLogger(__name__)

PREFIX = "/leases/"


class LeaderElector:
    """Campaign for ``name``; run ``lead()`` while leader and cancel it the moment leadership is lost."""

    def __init__(self, store: Store, name: str, identity: str, *, ttl: int = 10) -> None:
        self.store = store
        self.key = f"{PREFIX}{name}"
        self.identity = identity
        self.ttl = ttl
        self.is_leader = False

    async def run(self, lead: Callable[[], Coroutine[Any, Any, None]]) -> None:
        while True:
            lease = await self.store.grant_lease(self.ttl)
            try:
                await self.store.put(self.key, self.identity.encode(), expect_revision=0, lease=lease.id)
            except CasFailed:
                await self.store.revoke_lease(lease.id)
                await self._wait_vacant()
                continue
            log.info("%s became leader of %s", self.identity, self.key)
            self.is_leader = True
            leading = asyncio.create_task(lead())
            keeper = asyncio.create_task(self._keep(lease.id))
            try:
                done, _ = await asyncio.wait({leading, keeper}, return_when=asyncio.FIRST_COMPLETED)
            finally:
                self.is_leader = False
                for t in (leading, keeper):
                    t.cancel()
                await asyncio.gather(leading, keeper, return_exceptions=True)
                with contextlib.suppress(Exception):
                    await self.store.revoke_lease(lease.id)
            if leading in done and leading.exception() is None:
                return

    async def _keep(self, lease_id: int) -> None:
        interval = max(self.ttl / 3, 0.2)
        while True:
            await asyncio.sleep(interval)
            try:
                await self.store.keep_alive(lease_id)
            except LeaseNotFound:
                log.warning("%s lost leadership of %s", self.identity, self.key)
                return
            kv = await self.store.get(self.key)
            if kv is None or kv.value != self.identity.encode():
                return

    async def _wait_vacant(self) -> None:
        kv = await self.store.get(self.key)
        if kv is None:
            return
        async for ev in self.store.watch(self.key, start_revision=kv.mod_revision + 1):
            if ev.type is EventType.DELETE and ev.kv.key == self.key:
                return
