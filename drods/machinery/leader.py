"""Leader election on a store lease (A6): the holder's key lives only as long as its lease.

Winning writes ``/leases/<name>`` (attached to a lease) and yields a `Fence`: the key's revision
at that moment. Writes made under it are refused once the key is gone or re-taken (`FencedStore`).

A write the store cannot fence — an apply to a member cluster — is guarded by `LeaderElector.fresh`
instead: true only while the lease cannot have expired yet by this process's own monotonic clock
(its TTL from before the last grant or keep-alive the store answered). A leader paused or cut off
past its TTL finds it false the moment it runs again, before its keeper has heard of the loss.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable, Coroutine
from typing import Any

from drods.machinery.fence import Fence, LeadershipLost
from drods.model.keys import lease_key
from drods.store import CasFailed, Compacted, EventType, LeaseNotFound, Store

log = logging.getLogger(__name__)

Lead = Callable[[Fence], Coroutine[Any, Any, None]]


class LeaderElector:
    """Campaign for ``name``; run ``lead(fence)`` while leader and cancel it the moment leadership is lost."""

    def __init__(self, store: Store, name: str, identity: str, *, ttl: int = 10,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.store = store
        self.name = name
        self.key = lease_key(name)
        self.identity = identity
        self.ttl = ttl
        self.fence: Fence | None = None
        self.clock = clock  # monotonic: it goes on while the process is stopped
        self._valid_until = 0.0  # by ``clock``: the lease cannot have expired before then

    def fresh(self) -> bool:
        """This process leads and its lease cannot have expired yet (`time.monotonic`, which goes on
        while the process is stopped): what a write outside the store checks just before it is sent."""
        return self.fence is not None and self.clock() < self._valid_until

    @property
    def is_leader(self) -> bool:
        return self.fence is not None

    async def run(self, lead: Lead) -> None:
        """Campaign, lead, and campaign again after losing; returns when ``lead`` returns normally."""
        while True:
            asked = self.clock()
            lease = await self.store.grant_lease(self.ttl)
            self._valid_until = asked + self.ttl
            try:
                revision = await self.store.put(self.key, self.identity.encode(), expect_revision=0, lease=lease.id)
            except CasFailed:
                await self.store.revoke_lease(lease.id)
                await self._wait_vacant()
                continue
            fence = Fence(self.key, revision)
            log.info("%s became leader of %s (generation %d)", self.identity, self.key, revision)
            if await self._term(lead, fence, lease.id):
                return

    async def _term(self, lead: Lead, fence: Fence, lease_id: int) -> bool:
        """One term: ``lead`` until it ends or leadership is lost. True: ``lead`` returned; False:
        campaign again; what ``lead`` raised but `LeadershipLost` is raised. Its own frame, so
        nothing of the term outlives it: the campaign loop once kept the last term's task (and
        every cache of its controllers) alive through the whole of the next term."""
        self.fence = fence
        leading = asyncio.create_task(lead(fence), name=f"lead-{self.name}")
        keeper = asyncio.create_task(self._keep(lease_id, fence), name=f"lease-{self.name}")
        try:
            await asyncio.wait({leading, keeper}, return_when=asyncio.FIRST_COMPLETED)
            ended = leading.done() and not leading.cancelled()
        finally:
            self.fence = None
            for t in (leading, keeper):
                t.cancel()
            await asyncio.gather(leading, keeper, return_exceptions=True)
            with contextlib.suppress(Exception):
                await self.store.revoke_lease(lease_id)
        if not ended:
            return False
        error = leading.exception()
        if isinstance(error, LeadershipLost):  # a refused write noticed it before the keeper
            log.warning("%s lost leadership of %s: %s", self.identity, self.key, error)
            return False
        if error is not None:
            raise error
        return True

    async def _keep(self, lease_id: int, fence: Fence) -> None:
        interval = max(self.ttl / 3, 0.2)
        while True:
            await asyncio.sleep(interval)
            asked = self.clock()
            try:
                await self.store.keep_alive(lease_id)
            except LeaseNotFound:
                log.warning("%s lost leadership of %s", self.identity, self.key)
                return
            kv = await self.store.get(self.key)
            if kv is None or kv.mod_revision != fence.generation:
                return
            self._valid_until = asked + self.ttl

    async def _wait_vacant(self) -> None:
        """Until the holder's key is gone. The watch starts from the store's revision as read before the
        key, not from the key's own: a lease kept alive never rewrites its key, so once the compactor
        passed that revision a standby's watch from it failed (`Compacted`) and the standby crash-looped
        in its restart backoff, taking over 25-35 s after the leader died instead of within the TTL."""
        while True:
            revision = await self.store.current_revision()
            kv = await self.store.get(self.key)
            if kv is None:
                return
            try:
                async for ev in self.store.watch(self.key, start_revision=revision + 1):
                    if ev.type is EventType.DELETE and ev.kv.key == self.key:
                        return
            except Compacted:  # compacted past the revision between the read and the watch: read again
                continue
