"""The manager: fenced writes, leader-only runnables, restarts, shared informers — on both backends."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Callable
from pathlib import Path

import pytest
from prometheus_client import generate_latest

from drods.machinery.controller import Controller
from drods.machinery.fence import Fence, FencedStore, LeadershipLost
from drods.machinery.leader import LeaderElector
from drods.machinery.manager import Leadership, Manager
from drods.model.kinds import CLUSTER
from drods.registry.objects import ObjectRegistry
from drods.registry.secrets import SecretBox, load_or_create_key
from drods.store import CasFailed, Store
from tests.monitor_e2e.conftest import eventually


def registry(store: Store, tmp_path: Path) -> ObjectRegistry:
    return ObjectRegistry(store, SecretBox(load_or_create_key(tmp_path / "encryption.key")))


@contextlib.asynccontextmanager
async def running(manager: Manager) -> AsyncIterator[asyncio.Task[None]]:
    task = asyncio.create_task(manager.run())
    try:
        yield task
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)


async def test_a_deposed_leader_cannot_write_even_under_the_same_identity(store: Store) -> None:
    await store.delete_prefix("/")
    first = await store.grant_lease(30)
    gen1 = await store.put("/leases/x", b"replica-1", expect_revision=0, lease=first.id)
    old = FencedStore(store, Fence("/leases/x", gen1))
    await old.put("/data/a", b"1")
    # The lease is lost; the same identity (a restarted replica reusing --id) wins again.
    await store.revoke_lease(first.id)
    second = await store.grant_lease(30)
    gen2 = await store.put("/leases/x", b"replica-1", expect_revision=0, lease=second.id)
    new = FencedStore(store, Fence("/leases/x", gen2))
    with pytest.raises(LeadershipLost):
        await old.put("/data/a", b"stale")
    with pytest.raises(LeadershipLost):
        await old.delete("/data/a")
    assert (await store.get("/data/a")).value == b"1"  # type: ignore[union-attr]
    await new.put("/data/a", b"2")
    kv = await store.get("/data/a")
    assert kv is not None and kv.value == b"2"
    # A failed object precondition is still a CasFailed, not a lost leadership.
    with pytest.raises(CasFailed):
        await new.put("/data/a", b"3", expect_revision=kv.mod_revision - 1)
    assert await new.delete("/data/a", expect_revision=kv.mod_revision) is not None
    await store.revoke_lease(second.id)


async def test_the_elector_yields_a_new_generation_each_term(store: Store) -> None:
    await store.delete_prefix("/")
    fences: list[Fence] = []

    async def lead(fence: Fence) -> None:
        fences.append(fence)

    elector = LeaderElector(store, "gen", "same-id", ttl=2)
    await elector.run(lead)
    await elector.run(lead)
    assert len(fences) == 2 and fences[0].generation < fences[1].generation
    assert not elector.is_leader


async def test_a_term_whose_write_is_refused_ends_and_the_elector_campaigns_again(store: Store) -> None:
    """A leader that learns of its loss from a refused write (before its keeper does) campaigns
    again, with a new generation, instead of crashing its runnable."""
    await store.delete_prefix("/")
    fences: list[Fence] = []

    async def lead(fence: Fence) -> None:
        fences.append(fence)
        if len(fences) == 1:
            await store.delete(fence.key)  # the key is gone: this term's writes are refused
            await FencedStore(store, fence).put("/data/a", b"stale")

    elector = LeaderElector(store, "refused", "same-id", ttl=30)
    await asyncio.wait_for(elector.run(lead), timeout=20)
    assert len(fences) == 2 and fences[0].generation < fences[1].generation
    assert await store.get("/data/a") is None


async def test_nothing_of_a_lost_term_outlives_it(store: Store) -> None:
    """A term lost to the keeper is cancelled, and its controllers' caches go with it: the campaign
    loop once held the last term's task (every cache of the member controllers) through the next."""
    import gc
    import weakref

    from drods.machinery.tasks import run_all

    await store.delete_prefix("/")

    class Caches:
        pass

    terms: list[weakref.ref[Caches]] = []
    collected: list[bool] = []

    async def hold(caches: Caches) -> None:
        await asyncio.Event().wait()

    async def lead(fence: Fence) -> None:
        if terms:  # the second term: the first one's caches are gone
            gc.collect()
            collected.append(terms[0]() is None)
            return
        caches = Caches()
        terms.append(weakref.ref(caches))
        await store.delete(fence.key)  # lost: the keeper notices and the term is cancelled
        await run_all(hold(caches), hold(caches))

    elector = LeaderElector(store, "lost", "same-id", ttl=2)
    await asyncio.wait_for(elector.run(lead), timeout=20)
    assert collected == [True]


class Recorder:
    def __init__(self, leadership: Leadership, log: list[tuple[str, int]], name: str) -> None:
        self.leadership = leadership
        self.log = log
        self.name = name

    async def run(self) -> None:
        self.log.append((self.name, self.leadership.generation))
        await self.leadership.store.put(f"/written/{self.name}", str(self.leadership.generation).encode())
        await asyncio.Event().wait()


async def test_one_leader_at_a_time_and_a_standby_takes_over(store_factory: Callable[[], Store],
                                                              tmp_path: Path) -> None:
    stores = [store_factory(), store_factory()]
    await stores[0].delete_prefix("/")
    log: list[tuple[str, int]] = []
    managers = [Manager(s, registry(s, tmp_path), identity=f"m{i}", lease_ttl=2) for i, s in enumerate(stores)]
    for i, m in enumerate(managers):
        m.add_leader("work", lambda lead, i=i: Recorder(lead, log, f"m{i}"))  # type: ignore[misc]
    async with running(managers[0]) as first, running(managers[1]):
        await eventually(lambda: _async(len(log) == 1), what="a leader")
        leader = 0 if managers[0].fence("work") is not None else 1
        assert log[0][0] == f"m{leader}"
        assert managers[1 - leader].fence("work") is None
        # which replica leads, read from either one's /metrics
        held = [generate_latest(m.metrics.registry).decode() for m in managers]
        assert 'drods_leader{lease="work"} 1.0' in held[leader], held[leader]
        assert 'drods_leader{lease="work"} 0.0' in held[1 - leader], held[1 - leader]
        if leader == 0:
            first.cancel()
            await asyncio.gather(first, return_exceptions=True)
            await eventually(lambda: _async(len(log) == 2), within_s=15, what="the standby to take over")
            assert log[1][0] == "m1" and log[1][1] > log[0][1]
    for s in stores:
        await s.close()


async def test_a_standby_waits_through_a_compaction_and_takes_over_within_the_ttl(
        store_factory: Callable[[], Store]) -> None:
    """A kept-alive lease never rewrites its key: a standby watched from the key's own revision, which the
    compactor had passed (controllers compact every 10 minutes), failed with Compacted in a restart loop
    and took over 25-35 s after the leader died instead of within the TTL (walkthrough AR)."""
    stores = [store_factory(), store_factory()]
    await stores[0].delete_prefix("/")
    leading = asyncio.Event()

    async def hold(fence: Fence) -> None:
        leading.set()
        await asyncio.Event().wait()

    first = asyncio.create_task(LeaderElector(stores[0], "compacted", "a", ttl=2).run(hold))
    try:
        await asyncio.wait_for(leading.wait(), 10)
        for i in range(20):  # history moves on past the lease key's revision, and is compacted
            await stores[0].put(f"/data/{i}", b"x")
        await stores[0].compact(await stores[0].current_revision())
        took: list[Fence] = []

        async def take(fence: Fence) -> None:
            took.append(fence)

        standby = asyncio.create_task(LeaderElector(stores[1], "compacted", "b", ttl=2).run(take))
        await asyncio.sleep(0.5)  # the standby is waiting (a crash would end its run with Compacted)
        assert not standby.done() or standby.exception() is None, standby.exception()
        first.cancel()
        await asyncio.gather(first, return_exceptions=True)
        await asyncio.wait_for(standby, 10)  # the lease ends within its TTL (2 s) and b takes it
        assert len(took) == 1
    finally:
        first.cancel()
        await asyncio.gather(first, return_exceptions=True)
        for st in stores:
            await st.close()


async def test_a_crashing_runnable_is_restarted(store: Store, tmp_path: Path) -> None:
    runs: list[int] = []

    class Flaky:
        async def run(self) -> None:
            runs.append(1)
            if len(runs) < 3:
                raise RuntimeError("boom")
            await asyncio.Event().wait()

    manager = Manager(store, registry(store, tmp_path), max_backoff=0.05)
    manager.add("flaky", Flaky())
    async with running(manager):
        await eventually(lambda: _async(len(runs) == 3), within_s=10, what="two restarts")


async def test_informers_are_shared_per_prefix_and_decoder(store: Store, tmp_path: Path) -> None:
    await store.delete_prefix("/")
    manager = Manager(store, registry(store, tmp_path))

    def decode(kv: object) -> object:
        return kv

    a = manager.informer(CLUSTER.key_prefix(), decode)
    assert manager.informer(CLUSTER.key_prefix(), decode) is a
    seen: list[str] = []
    stop = a.on_change(lambda key, _o, _n: seen.append(key))
    async with running(manager):
        await store.put(CLUSTER.key("c1"), b"{}")
        await eventually(lambda: _async(seen == [CLUSTER.key("c1")]), what="the change")
        stop()
        await store.put(CLUSTER.key("c2"), b"{}")
        await eventually(lambda: _async(CLUSTER.key("c2") in a.cache), what="the cache")
        assert seen == [CLUSTER.key("c1")]  # unsubscribed handlers are not called


async def _async(value: object) -> object:
    return value


async def test_readiness_waits_for_the_informers_and_warm_runnables_and_reconciles_are_counted(
        store: Store, tmp_path: Path) -> None:
    await store.delete_prefix("/")
    manager = Manager(store, registry(store, tmp_path))
    manager.informer(CLUSTER.key_prefix(), lambda kv: kv.key)
    reconciled: list[object] = []

    async def reconcile(key: object) -> float | None:
        reconciled.append(key)
        return None

    class Warm:
        """Ready once its controller has reconciled one key."""

        def __init__(self) -> None:
            self.ready = asyncio.Event()
            self.controller = Controller("warm", reconcile, workers=1)

        async def run(self) -> None:
            self.controller.queue.add("k")
            task = asyncio.create_task(self.controller.run())
            await eventually(lambda: _async(reconciled == ["k"]), what="the reconcile")
            self.ready.set()
            await task

    manager.add("warm", Warm())
    assert manager.readiness() == {"informers": False, "warm": False}
    async with running(manager):
        await eventually(lambda: _async(manager.readiness() == {"informers": True, "warm": True}), what="ready")
        assert manager.metrics.registry.get_sample_value(
            "drods_controller_reconcile_total", {"controller": "warm", "result": "success"}) == 1


async def test_the_elector_is_fresh_only_while_its_lease_cannot_have_expired(store: Store) -> None:
    """What guards writes the store cannot fence (applies to members): a leader stopped past its TTL
    finds itself stale the moment it runs again, before its keeper has heard of the loss."""
    await store.delete_prefix("/")
    now = [1000.0]
    elector = LeaderElector(store, "fresh", "same-id", ttl=30, clock=lambda: now[0])
    seen: list[bool] = []

    async def lead(fence: Fence) -> None:
        seen.append(elector.fresh())
        now[0] += 29.0
        seen.append(elector.fresh())
        now[0] += 2.0  # as after a SIGSTOP longer than the TTL: no keep-alive since the grant
        seen.append(elector.fresh())

    await asyncio.wait_for(elector.run(lead), timeout=20)
    assert seen == [True, True, False] and not elector.fresh()


def test_the_restart_backoff_starts_over_after_a_good_run_and_a_store_outage_waits_little() -> None:
    """After one etcd outage the scheduler waited 30 s at the first crash of the next one (the delay was never
    reset), so nothing led for 24 s after etcd was back."""
    from drods.machinery.manager import RestartBackoff

    b = RestartBackoff(first=0.5, cap=30.0, store_cap=4.0)
    assert [b.after(0.1, store_away=False) for _ in range(8)] == [0.5, 1, 2, 4, 8, 16, 30, 30]
    assert b.after(240.0, store_away=False) == 0.5  # ran four minutes: a fresh fault
    assert b.after(0.1, store_away=False) == 1
    outage = RestartBackoff(first=0.5, cap=30.0, store_cap=4.0)
    assert [outage.after(2.6, store_away=True) for _ in range(6)] == [0.5, 1, 2, 4, 4, 4]
    assert outage.after(600.0, store_away=True) == 0.5  # the next outage starts over too
