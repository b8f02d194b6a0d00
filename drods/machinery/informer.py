"""List + watch a key prefix into local caches and tell handlers what changed (client-go's informer).

A `Reflector` holds the one list and watch of a prefix and feeds every `Informer` of it — one per
decoder, each with its own cache — so a process watches a prefix once however many components
read it (`drods.machinery.shared`). The watch resumes from the last revision it saw; if that
history was compacted, the reflector lists again and each informer reports the difference, so
handlers never miss a final state. An informer that joins later lists for itself; what the watch
delivers while that listing is on its way is kept for it and applied after the listing, so a change
written in between is not lost to it.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable, Iterable, Iterator, MutableMapping
from dataclasses import dataclass, replace
from typing import Any

from drods.machinery.tasks import YIELD_EVERY, stop_tasks, yielding
from drods.model.packing import Packer
from drods.store import Compacted, EventType, KeyValue, Store, Unavailable

log = logging.getLogger(__name__)

Decode = Callable[[KeyValue], Any]
Handler = Callable[[str, Any, Any], Awaitable[None] | None]  # (key, old, new); new None = deleted


@dataclass(frozen=True)
class KeptEncoded:
    """A decoder whose informer keeps each object as stored and decodes it on every read. For
    prefixes whose objects are many and each rarely read: a workload template is read when its
    Binding is planned, and 200,000 Deployments and ConfigMaps decoded take ~5x their bytes. With a
    ``packer`` the stored bytes are kept packed (`drods.model.packing`), a fraction of their size."""

    decode: Decode
    packer: Packer | None = None

    def keep(self, kv: KeyValue) -> KeyValue:
        """What the cache holds of ``kv``."""
        return kv if self.packer is None else replace(kv, value=self.packer.pack(kv.value))

    def __call__(self, kv: KeyValue) -> Any:
        """``kv`` (as ``keep`` made it) decoded."""
        return self.decode(kv if self.packer is None else replace(kv, value=self.packer.unpack(kv.value)))


class DecodingCache(MutableMapping[str, Any]):
    """An informer's cache of stored key-values that hands out each one decoded, a new object per
    read (what a reader changes is its own)."""

    def __init__(self, decode: Decode, kept: dict[str, KeyValue] | None = None) -> None:
        self._decode = decode
        self.kept: dict[str, KeyValue] = kept if kept is not None else {}

    def __getitem__(self, key: str) -> Any:
        return self._decode(self.kept[key])

    def __setitem__(self, key: str, kv: KeyValue) -> None:
        self.kept[key] = kv

    def __delitem__(self, key: str) -> None:
        del self.kept[key]

    def __contains__(self, key: object) -> bool:
        return key in self.kept

    def __iter__(self) -> Iterator[str]:
        return iter(self.kept)

    def __len__(self) -> int:
        return len(self.kept)


class Informer:
    """One decoded cache of a prefix and the handlers told of its changes; fed by a `Reflector`.
    With a `KeptEncoded` decoder the cache is a `DecodingCache`."""

    def __init__(self, store: Store, prefix: str, decode: Decode) -> None:
        self.store = store
        self.prefix = prefix
        self.decode = decode
        self._kept_encoded = decode if isinstance(decode, KeptEncoded) else None
        self.cache: MutableMapping[str, Any] = DecodingCache(decode) if self._kept_encoded is not None else {}
        self.revision = 0
        self._listed_at = 0  # the revision of the last listing: events up to it are in the cache
        self._handlers: list[Handler] = []
        self._synced = asyncio.Event()

    def on_change(self, handler: Handler) -> Callable[[], None]:
        """Call ``handler`` on every change; returns what removes it (a component that stops leading
        must not keep reacting through a shared informer)."""
        self._handlers.append(handler)
        return lambda: self._handlers.remove(handler) if handler in self._handlers else None

    async def replay(self, handler: Handler) -> None:
        """Tell a handler that subscribed late what the cache holds, as additions: a shared informer
        may have listed long before. It is told each key's current object, so changes it hears of
        meanwhile are never undone by an older one."""
        async for key in yielding(list(self.cache)):
            if key in self.cache:
                result = handler(key, None, self.cache[key])
                if result is not None:
                    await result

    @property
    def synced(self) -> bool:
        return self._synced.is_set()

    async def wait_synced(self) -> None:
        await self._synced.wait()

    async def run(self) -> None:
        """Watch the prefix for this informer alone (tools, tests); under a manager the process's
        shared reflector feeds it instead."""
        await Reflector(self.store, self.prefix, [self]).run()

    def keep(self, kv: KeyValue) -> Any:
        """What the cache holds for ``kv``: its decoded object, or ``kv`` itself when kept encoded."""
        return self.decode(kv) if self._kept_encoded is None else self._kept_encoded.keep(kv)

    def _held(self) -> dict[str, Any]:
        return self.cache.kept if isinstance(self.cache, DecodingCache) else self.cache  # type: ignore[return-value]

    async def replace(self, fresh: dict[str, Any], revision: int) -> None:
        """Take a listing (values made by ``keep``) as the cache and report what differs from the one
        it replaces."""
        old = self._held()
        self.cache = DecodingCache(self.decode, fresh) if self._kept_encoded is not None else fresh
        self.revision = revision
        self._listed_at = revision
        async for key, held in yielding(list(fresh.items())):
            if old.get(key) != held:
                await self._notify(key, old.get(key), held)
        async for key in yielding(old.keys() - fresh.keys()):
            await self._notify(key, old[key], None)
        self._synced.set()

    async def apply(self, ev_type: EventType, kv: KeyValue) -> None:
        """One watch event; one this cache already holds (listed after it) is skipped. Not compared
        with the last event's revision: the keys a transaction writes share one."""
        if kv.mod_revision <= self._listed_at:
            return
        key = kv.key
        held = self._held()
        old = held.get(key)
        if ev_type is EventType.DELETE:
            held.pop(key, None)
            new = None
        else:
            new = held[key] = self.keep(kv)
        self.revision = kv.mod_revision
        await self._notify(key, old, new)

    async def _notify(self, key: str, old: Any, new: Any) -> None:
        """Tell the handlers of a change between two held values (decoded once for all of them)."""
        if not self._handlers:
            return
        if self._kept_encoded is not None:
            old = None if old is None else self.decode(old)
            new = None if new is None else self.decode(new)
        for h in tuple(self._handlers):
            try:
                result = h(key, old, new)
                if result is not None:
                    await result
            except Exception:
                log.exception("informer handler failed for %s", key)


class Reflector:
    """The one list + watch of ``prefix``, decoded into each of its informers."""

    def __init__(self, store: Store, prefix: str, informers: Iterable[Informer] = ()) -> None:
        self.store = store
        self.prefix = prefix
        self.informers: list[Informer] = list(informers)
        self.revision = 0
        self._listed = False
        self._joins: set[asyncio.Task[None]] = set()
        self._joining: list[list[tuple[EventType, KeyValue]]] = []  # what the watch delivered during joins
        self._listing = asyncio.Lock()  # a join lists after a relist, never between its listing and its watch

    def add(self, informer: Informer) -> None:
        """Feed ``informer`` too; one added after the first listing lists for itself once."""
        if not self._listed:
            self.informers.append(informer)
            return
        task = asyncio.create_task(self._join(informer), name=f"informer join {self.prefix}")
        self._joins.add(task)
        task.add_done_callback(self._joins.discard)

    async def _join(self, informer: Informer) -> None:
        """List for ``informer`` and feed it from then on. The watch may deliver a change written after
        the listing before the listing comes back: such events are kept for it meanwhile and applied
        after the listing (``apply`` skips those the listing already holds)."""
        async with self._listing:
            delivered: list[tuple[EventType, KeyValue]] = []
            self._joining.append(delivered)
            try:
                kvs, revision = await self.store.range(self.prefix)
                fresh = {kv.key: informer.keep(kv) for kv in kvs}
                del kvs
                await informer.replace(fresh, revision)
                while delivered:
                    ev_type, kv = delivered.pop(0)
                    await informer.apply(ev_type, kv)
                self.informers.append(informer)  # no await since the last one kept: the watch feeds it now
            finally:
                self._joining.remove(delivered)

    async def run(self) -> None:
        backoff = 0.1
        try:
            while True:
                try:
                    await self._relist()
                    backoff = 0.1
                    async for ev in self.store.watch(self.prefix, start_revision=self.revision + 1):
                        self.revision = ev.kv.mod_revision
                        for kept in self._joining:
                            kept.append((ev.type, ev.kv))
                        for inf in tuple(self.informers):
                            await inf.apply(ev.type, ev.kv)
                except asyncio.CancelledError:
                    raise
                except Compacted:
                    log.info("watch on %s compacted; relisting", self.prefix)
                except Unavailable as e:  # the store away: one line when it goes, none per retry
                    log.log(logging.WARNING if backoff == 0.1 else logging.DEBUG,
                            "watch on %s: the store is unavailable (%s); relisting once it answers", self.prefix, e)
                    await asyncio.sleep(backoff)
                    backoff = min(backoff * 2, 5.0)
                except Exception:
                    log.exception("watch on %s failed; relisting in %.1fs", self.prefix, backoff)
                    await asyncio.sleep(backoff)
                    backoff = min(backoff * 2, 5.0)
        finally:
            self._listed = False
            await stop_tasks(self._joins)

    async def _relist(self) -> None:
        async with self._listing:
            kvs, revision = await self.store.range(self.prefix)
            pending = kvs[::-1]  # decoded from the end, so each stored value can go once it is decoded:
            del kvs  # 100,000 Bindings' bytes and their decoded documents are not all held at once
            informers = tuple(self.informers)
            fresh: list[dict[str, Any]] = [{} for _ in informers]
            while pending:
                if len(pending) % YIELD_EVERY == 0:
                    await asyncio.sleep(0)  # decoding 100,000 objects must not hold the loop (leases)
                kv = pending.pop()
                for cache, inf in zip(fresh, informers, strict=True):
                    cache[kv.key] = inf.keep(kv)
            self.revision = revision
            self._listed = True
        for inf, cache in zip(informers, fresh, strict=True):
            await inf.replace(cache, revision)


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
