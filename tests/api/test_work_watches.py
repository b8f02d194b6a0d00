"""The pull-mode agents' Work watches share one watch of the store (`drods.api.work_watches`): each
agent gets its own cluster's events, in order, from the revision it listed at — from the backlog when
it starts a little behind, from a watch of its own when further — and the store is watched once
however many agents watch."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from drods.api.work_watches import WorkWatches
from drods.model.kinds import WORK
from drods.model.selector import parse_selector
from drods.model.work import work_labels, work_name
from drods.registry.objects import ObjectRegistry
from drods.registry.secrets import SecretBox, load_or_create_key
from drods.store import Compacted, Store
from drods.store.base import WatchEvent
from drods.store.delegating import DelegatingStore
from drods.store.sqlite import SqliteStore


class CountingStore(DelegatingStore):
    """The store, counting the watches opened on it."""

    def __init__(self, inner: Store) -> None:
        super().__init__(inner)
        self.watches = 0

    def watch(self, prefix: str, *, start_revision: int | None = None) -> AsyncIterator[WatchEvent]:
        self.watches += 1
        return super().watch(prefix, start_revision=start_revision)


def work(binding: str, cluster: str, hash_: str = "h1") -> dict[str, Any]:
    return {"apiVersion": "multicluster.io/v1alpha1", "kind": "Work",
            "metadata": {"name": work_name(binding, cluster), "labels": work_labels(binding, cluster)},
            "spec": {"cluster": cluster, "binding": binding, "manifests": [], "hash": hash_}}


@pytest.fixture
async def registry(tmp_path: Path) -> AsyncIterator[tuple[ObjectRegistry, CountingStore]]:
    store = CountingStore(SqliteStore(str(tmp_path / "db")))
    yield ObjectRegistry(store, SecretBox(load_or_create_key(tmp_path / "k"))), store
    await store.close()


async def events(stream: AsyncIterator[tuple[str, dict[str, Any]]], n: int) -> list[tuple[str, str, str]]:
    out = []
    async with asyncio.timeout(10):
        async for etype, obj in stream:
            out.append((etype, obj["spec"]["binding"], obj["spec"]["hash"]))
            if len(out) == n:
                return out
    return out


async def revision(registry: ObjectRegistry) -> int:
    return (await registry.list(WORK))[1]


async def test_each_cluster_gets_its_own_events_through_one_store_watch(
        registry: tuple[ObjectRegistry, CountingStore]) -> None:
    reg, store = registry
    watches = WorkWatches(reg, asyncio.Event())
    await reg.create(WORK, work("old", "a"))
    rv = await revision(reg)
    opened = store.watches
    a1, a2, b = watches.watch("a", rv), watches.watch("a", rv), watches.watch("b", rv)
    await reg.create(WORK, work("w1", "b"))
    await reg.create(WORK, work("w1", "a"))
    await reg.update(WORK, {**work("w1", "a", "h2"), "metadata": {
        **work("w1", "a")["metadata"], "resourceVersion": str(await revision(reg))}})
    await reg.delete(WORK, work_name("old", "a"))
    want_a = [("ADDED", "w1", "h1"), ("MODIFIED", "w1", "h2"), ("DELETED", "old", "h1")]
    assert await events(a1, 3) == want_a and await events(a2, 3) == want_a
    assert await events(b, 1) == [("ADDED", "w1", "h1")]
    assert store.watches == opened + 1  # three agents, one watch of the store


async def test_a_stream_starts_from_its_listed_revision_from_the_backlog_or_its_own_watch(
        registry: tuple[ObjectRegistry, CountingStore]) -> None:
    reg, store = registry
    watches = WorkWatches(reg, asyncio.Event(), backlog=3)
    start = await revision(reg)
    live = watches.watch("a", start)
    for i in range(5):
        await reg.create(WORK, work(f"w{i}", "a"))
    assert [e[1] for e in await events(live, 5)] == ["w0", "w1", "w2", "w3", "w4"]
    # listed after w2: w3 and w4 are in the backlog, no store watch of its own
    listed = start + 3
    opened = store.watches
    assert [e[1] for e in await events(watches.watch("a", listed), 2)] == ["w3", "w4"]
    assert store.watches == opened
    # listed before w0: further behind than the backlog keeps, so a watch of its own from there
    behind = watches.watch("a", start)
    assert [e[1] for e in await events(behind, 5)] == ["w0", "w1", "w2", "w3", "w4"]
    assert store.watches == opened + 1


async def test_a_label_selector_is_matched_and_a_reader_far_behind_is_ended(
        registry: tuple[ObjectRegistry, CountingStore]) -> None:
    reg, _ = registry
    watches = WorkWatches(reg, asyncio.Event(), max_queued=2)
    rv = await revision(reg)
    picky = watches.watch("a", rv, parse_selector("multicluster.io/binding=w3"))
    slow = watches.watch("a", rv)
    for i in range(4):
        await reg.create(WORK, work(f"w{i}", "a"))
    assert await events(picky, 1) == [("ADDED", "w3", "h1")]  # only what it selects was queued for it
    # by now every event was handed on: the reader that read none is two behind, and ended
    with pytest.raises(Compacted):  # it lists again (a 410 to the agent)
        await events(slow, 4)


class CountingRegistry(ObjectRegistry):
    """The registry, counting the Works it decodes."""

    decoded = 0

    def decode(self, kind: Any, kv: Any, *, reveal: bool = False) -> dict[str, Any]:
        self.decoded += 1
        return super().decode(kind, kv, reveal=reveal)


async def test_agents_relisting_at_once_decode_only_their_own_works(tmp_path: Path) -> None:
    """A control plane's restart makes every agent list its Works: the first list decodes them all, the
    others only their own cluster's, and what each gets is exactly what a full decode would give."""
    store = SqliteStore(str(tmp_path / "db"))
    try:
        reg = CountingRegistry(store, SecretBox(load_or_create_key(tmp_path / "k")))
        clusters = [f"m{i}" for i in range(10)]
        await reg.batch_upsert([(WORK, work(f"w{j}", c)) for c in clusters for j in range(20)], results=False)
        await reg.create(WORK, {**work("extra", "m1"), "metadata": {
            "name": work_name("extra", "m1"), "labels": {"other": "x"}}})
        watches = WorkWatches(reg, asyncio.Event())
        everything, rv = await reg.list(WORK)
        reg.decoded = 0
        lists = [await watches.list(c, parse_selector(f"multicluster.io/cluster={c}")) for c in clusters]
        assert reg.decoded == 201 + 8 * 20 + 21  # the first list decodes all 201, each other its own (m1: 21)
        for c, (items, listed_rv) in zip(clusters, lists, strict=True):
            assert listed_rv == rv
            assert sorted(o["metadata"]["name"] for o in items) == sorted(
                o["metadata"]["name"] for o in everything
                if o["spec"]["cluster"] == c and o["metadata"]["labels"].get("multicluster.io/cluster") == c)
        assert len(lists[1][0]) == 20  # "extra" is m1's but not under the selector
        assert len((await watches.list("m1"))[0]) == 21  # no selector: every Work of the cluster
    finally:
        await store.close()


async def test_a_work_changed_since_it_was_seen_is_decoded_again(tmp_path: Path) -> None:
    """The cluster remembered for a Work is trusted only at the revision it was seen at: a Work moved to
    another cluster behind the list (no shared watch running) is listed under its new cluster, and a
    deleted one is forgotten."""
    store = SqliteStore(str(tmp_path / "db"))
    try:
        reg = CountingRegistry(store, SecretBox(load_or_create_key(tmp_path / "k")))
        watches = WorkWatches(reg, asyncio.Event())
        await reg.create(WORK, work("w", "a"))
        await reg.create(WORK, work("gone", "a"))
        assert [o["spec"]["binding"] for o in (await watches.list("a"))[0]] == ["gone", "w"]
        moved = await reg.get(WORK, work_name("w", "a"))
        moved["spec"]["cluster"] = "b"
        await reg.update(WORK, moved)
        await reg.delete(WORK, work_name("gone", "a"))
        reg.decoded = 0
        assert (await watches.list("a"))[0] == []
        assert reg.decoded == 1  # the moved Work, read again
        assert [o["spec"]["binding"] for o in (await watches.list("b"))[0]] == ["w"]
        assert len(watches._cluster_of) == 1
    finally:
        await store.close()
