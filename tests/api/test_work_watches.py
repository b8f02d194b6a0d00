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
