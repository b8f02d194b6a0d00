"""List + watch a key prefix into a local cache and tell handlers what changed (client-go's informer).

The watch resumes from the last revision it saw; if that history was compacted, the informer
lists again and reports the difference, so handlers never miss a final state.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable, Iterator
from typing import Any

from drods.store import Compacted, EventType, KeyValue, Store

log = logging.getLogger(__name__)

Decode = Callable[[KeyValue], Any]
Handler = Callable[[str, Any, Any], Awaitable[None] | None]  # (key, old, new); new None = deleted


class Informer:
    def __init__(self, store: Store, prefix: str, decode: Decode) -> None:
        self.store = store
        self.prefix = prefix
        self.decode = decode
        self.cache: dict[str, Any] = {}
        self.revision = 0
        self._handlers: list[Handler] = []
        self._synced = asyncio.Event()

    def on_change(self, handler: Handler) -> Callable[[], None]:
        """Call ``handler`` on every change; returns what removes it (a component that stops leading
        must not keep reacting through a shared informer)."""
        self._handlers.append(handler)
        return lambda: self._handlers.remove(handler) if handler in self._handlers else None

    @property
    def synced(self) -> bool:
        return self._synced.is_set()

    async def wait_synced(self) -> None:
        await self._synced.wait()

    async def run(self) -> None:
        backoff = 0.1
        while True:
            try:
                await self._relist()
                self._synced.set()
                backoff = 0.1
                async for ev in self.store.watch(self.prefix, start_revision=self.revision + 1):
                    key = ev.kv.key
                    old = self.cache.get(key)
                    if ev.type is EventType.DELETE:
                        self.cache.pop(key, None)
                        new = None
                    else:
                        new = self.decode(ev.kv)
                        self.cache[key] = new
                    self.revision = ev.kv.mod_revision
                    await self._notify(key, old, new)
            except asyncio.CancelledError:
                raise
            except Compacted:
                log.info("watch on %s compacted; relisting", self.prefix)
            except Exception:
                log.exception("watch on %s failed; relisting in %.1fs", self.prefix, backoff)
                await asyncio.sleep(backoff)
                backoff = min(backoff * 2, 5.0)

    async def _relist(self) -> None:
        kvs, revision = await self.store.range(self.prefix)
        pending = kvs[::-1]  # decoded from the end, so each stored value can go once it is decoded:
        del kvs  # 100,000 Bindings' bytes and their decoded documents are not all held at once
        fresh: dict[str, Any] = {}
        while pending:
            kv = pending.pop()
            fresh[kv.key] = self.decode(kv)
        old_cache, self.cache, self.revision = self.cache, fresh, revision
        for key, obj in fresh.items():
            if old_cache.get(key) != obj:
                await self._notify(key, old_cache.get(key), obj)
        for key in old_cache.keys() - fresh.keys():
            await self._notify(key, old_cache[key], None)

    async def _notify(self, key: str, old: Any, new: Any) -> None:
        for h in tuple(self._handlers):
            try:
                result = h(key, old, new)
                if result is not None:
                    await result
            except Exception:
                log.exception("informer handler failed for %s", key)


@contextlib.contextmanager
def subscribed(*handlers: tuple[Informer, Handler]) -> Iterator[None]:
    """``handlers`` registered for the body of the block: a controller's run, which must stop
    reacting through the shared informers the moment it stops (e.g. loses its lease)."""
    stops = [inf.on_change(handler) for inf, handler in handlers]
    try:
        yield
    finally:
        for stop in stops:
            stop()


async def wait_synced(*informers: Informer) -> None:
    """Until every one of ``informers`` has listed its prefix once."""
    for inf in informers:
        await inf.wait_synced()
