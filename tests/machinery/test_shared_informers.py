"""Shared informers: one list and watch per prefix, one cache per decoder, late joiners included."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest

from drods.machinery.informer import DecodingCache, KeptEncoded
from drods.machinery.shared import SharedInformers
from drods.model import jsondoc
from drods.model.packing import Packer
from drods.store import KeyValue, Put, Store, WatchEvent
from tests.monitor_e2e.conftest import eventually


class CountingStore:
    """``store`` with its watches counted by prefix (the calls that matter to sharing)."""

    def __init__(self, store: Store) -> None:
        self.store = store
        self.watches: dict[str, int] = {}

    def watch(self, prefix: str, *, start_revision: int | None = None) -> AsyncIterator[WatchEvent]:
        self.watches[prefix] = self.watches.get(prefix, 0) + 1
        return self.store.watch(prefix, start_revision=start_revision)

    async def range(self, prefix: str, *, limit: int = 0) -> tuple[list[KeyValue], int]:
        return await self.store.range(prefix, limit=limit)


def names(kv: KeyValue) -> str:
    return str(jsondoc.loads(kv.value)["name"])


def sizes(kv: KeyValue) -> int:
    return len(kv.value)


async def _true(value: bool) -> bool:
    return value


async def test_two_decoders_of_a_prefix_share_one_watch_and_a_late_one_joins(store: Store) -> None:
    await store.delete_prefix("/")
    await store.put("/things/a", jsondoc.dumps({"name": "a"}))
    counting = CountingStore(store)
    shared = SharedInformers(counting)  # type: ignore[arg-type]
    by_name = shared.informer("/things/", names)
    assert shared.informer("/things/", names) is by_name  # one cache per (prefix, decoder)
    by_size = shared.informer("/things/", sizes)
    heard: list[tuple[str, object]] = []
    by_size.on_change(lambda key, _old, new: heard.append((key, new)))
    task = asyncio.create_task(shared.run())
    try:
        await asyncio.wait_for(asyncio.gather(by_name.wait_synced(), by_size.wait_synced()), 10)
        assert by_name.cache == {"/things/a": "a"}
        await store.put("/things/b", jsondoc.dumps({"name": "bb"}))
        await eventually(lambda: _true(by_name.cache.get("/things/b") == "bb"), what="the event")
        await eventually(lambda: _true(("/things/b", len(jsondoc.dumps({"name": "bb"}))) in heard), what="heard")
        late = shared.informer("/things/", lambda kv: kv.key)  # after the first listing: lists once itself
        await asyncio.wait_for(late.wait_synced(), 10)
        await store.delete("/things/a")
        await eventually(lambda: _true(sorted(late.cache) == ["/things/b"]), what="the late one's delete")
        await eventually(lambda: _true(sorted(by_name.cache) == ["/things/b"]), what="the delete")
        assert counting.watches == {"/things/": 1}
        assert shared.decoders("/things/")[:2] == [names, sizes]
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)


async def test_every_key_of_a_transaction_reaches_the_cache(store: Store) -> None:
    """The keys one transaction writes share a revision: none of them is taken for one already seen."""
    await store.delete_prefix("/")
    shared = SharedInformers(store)
    by_name = shared.informer("/things/", names)
    task = asyncio.create_task(shared.run())
    try:
        await asyncio.wait_for(by_name.wait_synced(), 10)
        await store.txn([], [Put("/things/x", jsondoc.dumps({"name": "x"})),
                             Put("/things/y", jsondoc.dumps({"name": "y"}))])
        await eventually(lambda: _true(by_name.cache == {"/things/x": "x", "/things/y": "y"}), what="both keys")
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)


class HeldListing:
    """``store`` whose next listing, once ``hold()`` is called, is answered only after ``release()``:
    what is written meanwhile reaches the watch before the listing reaches its caller."""

    def __init__(self, store: Store) -> None:
        self.store = store
        self.listed = asyncio.Event()
        self._gate: asyncio.Event | None = None

    def hold(self) -> asyncio.Event:
        self._gate = asyncio.Event()
        return self._gate

    def watch(self, prefix: str, *, start_revision: int | None = None) -> AsyncIterator[WatchEvent]:
        return self.store.watch(prefix, start_revision=start_revision)

    async def range(self, prefix: str, *, limit: int = 0) -> tuple[list[KeyValue], int]:
        out = await self.store.range(prefix, limit=limit)
        gate, self._gate = self._gate, None
        if gate is not None:
            self.listed.set()
            await gate.wait()
        return out


async def test_a_late_joiner_keeps_what_the_watch_delivered_while_it_listed(store: Store) -> None:
    """A change written after a late joiner's listing but delivered to the shared watch before that
    listing came back is in the joiner's cache (it was lost: the watch fed only the others)."""
    await store.delete_prefix("/")
    await store.put("/things/a", jsondoc.dumps({"name": "a"}))
    held = HeldListing(store)
    shared = SharedInformers(held)  # type: ignore[arg-type]
    by_name = shared.informer("/things/", names)
    task = asyncio.create_task(shared.run())
    try:
        await asyncio.wait_for(by_name.wait_synced(), 10)
        gate = held.hold()
        late = shared.informer("/things/", lambda kv: jsondoc.loads(kv.value)["name"].upper())
        await asyncio.wait_for(held.listed.wait(), 10)
        await store.put("/things/a", jsondoc.dumps({"name": "a2"}))
        await eventually(lambda: _true(by_name.cache.get("/things/a") == "a2"), what="the watch's delivery")
        gate.set()
        await asyncio.wait_for(late.wait_synced(), 10)
        assert late.cache == {"/things/a": "A2"}
        await store.put("/things/b", jsondoc.dumps({"name": "b"}))  # and it follows the watch afterwards
        await eventually(lambda: _true(late.cache == {"/things/a": "A2", "/things/b": "B"}), what="the next one")
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)


@pytest.mark.parametrize("packed", [False, True])
async def test_a_cache_kept_encoded_decodes_each_read_anew_and_tells_handlers_decoded(
        store: Store, packed: bool) -> None:
    """Templates are kept as stored (packed, or not): a read decodes (a new object each time, so a
    reader's change is its own), handlers hear decoded objects, and a relist reports only what changed."""
    await store.delete_prefix("/")
    await store.put("/things/a", jsondoc.dumps({"name": "a"}))
    shared = SharedInformers(store)
    packer = Packer() if packed else None
    encoded = shared.informer("/things/", KeptEncoded(jsondoc_kv, packer))
    assert shared.informer("/things/", KeptEncoded(jsondoc_kv, packer)) is encoded  # equal decoders share one cache
    heard: list[tuple[str, object, object]] = []
    encoded.on_change(lambda key, old, new: heard.append((key, old, new)))
    task = asyncio.create_task(shared.run())
    try:
        await asyncio.wait_for(encoded.wait_synced(), 10)
        assert isinstance(encoded.cache, DecodingCache)
        held = encoded.cache.kept["/things/a"]
        assert isinstance(held, KeyValue)  # held as stored, or packed
        stored = jsondoc.dumps({"name": "a"})
        assert (held.value == stored) != packed and (packer is None or packer.unpack(held.value) == stored)
        first = encoded.cache["/things/a"]
        assert first == {"name": "a"}
        first["name"] = "changed by a reader"
        assert encoded.cache.get("/things/a") == {"name": "a"}
        await store.put("/things/a", jsondoc.dumps({"name": "a2"}))
        await eventually(lambda: _true(("/things/a", {"name": "a"}, {"name": "a2"}) in heard), what="decoded change")
        await store.delete("/things/a")
        await eventually(lambda: _true(("/things/a", {"name": "a2"}, None) in heard), what="decoded delete")
        assert "/things/a" not in encoded.cache and len(encoded.cache) == 0
        await store.put("/things/b", jsondoc.dumps({"name": "b"}))
        await eventually(lambda: _true(list(encoded.cache.items()) == [("/things/b", {"name": "b"})]), what="b")
        heard.clear()
        kvs, revision = await store.range("/things/")
        await encoded.replace({kv.key: encoded.keep(kv) for kv in kvs}, revision)  # a relist of the same
        assert heard == []
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)


def jsondoc_kv(kv: KeyValue) -> object:
    return jsondoc.loads(kv.value)
