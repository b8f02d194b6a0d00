"""What only the etcd backend has to prove: it survives losing (or hanging) the member it talks
to, and says Unavailable (instead of hanging) when no member answers."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from drods.store import EventType, Unavailable, WatchEvent
from drods.store.etcd import EtcdStore
from tests.etcd_server import EtcdCluster, EtcdMember, etcd_binary
from tests.free_port import free_port
from tests.store.util import next_event, wait_for_condition


@pytest.fixture
def cluster() -> Iterator[EtcdCluster]:
    """A fresh 3-member cluster per test: each test kills a member."""
    if etcd_binary() is None:
        if os.environ.get("DRODS_REQUIRE_ETCD") == "1":
            pytest.fail("etcd binary not found")
        pytest.skip("etcd binary not found")
    with EtcdCluster(3) as c:
        yield c


@pytest.mark.parametrize("victim_role", ["leader", "follower"])
async def test_survives_killing_the_member_in_use(cluster: EtcdCluster, victim_role: str) -> None:
    # Point the client at the leader first (harder: the survivors must elect a new one) or at a
    # follower; either way it is the member the client talks to that dies.
    leader = await asyncio.to_thread(cluster.leader)
    first = leader if victim_role == "leader" else next(m for m in cluster.members if m is not leader)
    endpoints = [first.endpoint] + [m.endpoint for m in cluster.members if m is not first]
    store = EtcdStore(endpoints, deadline=20)
    seen: list[WatchEvent] = []
    arrived = asyncio.Event()
    try:
        await store.put("/ha/0", b"0")
        it = store.watch("/ha/")

        async def consume() -> None:
            async for ev in it:
                seen.append(ev)
                arrived.set()

        consumer = asyncio.create_task(consume())

        async def wait_seen(n: int) -> None:
            async with asyncio.timeout(20):
                while len(seen) < n:
                    arrived.clear()
                    await arrived.wait()

        written = [await store.put(f"/ha/{i}", str(i).encode()) for i in range(1, 11)]
        await wait_seen(10)

        assert store.current_endpoint == first.endpoint
        victim = first
        victim.kill()

        # Writes (CAS ones too, whose lost answers must be resolved) and reads keep working
        # through another member...
        written += [await store.put(f"/ha/{i}", str(i).encode(), expect_revision=0) for i in range(11, 21)]
        kvs, _ = await store.range("/ha/")
        assert len(kvs) == 21
        assert store.current_endpoint != victim.endpoint
        # ...and the running watch resumes where it stopped: nothing lost, nothing twice.
        await wait_seen(20)
        assert [e.kv.mod_revision for e in seen] == written
        assert [e.kv.key for e in seen] == [f"/ha/{i}" for i in range(1, 21)]
        assert all(e.type is EventType.PUT for e in seen)
        consumer.cancel()
    finally:
        await store.close()


async def test_unreachable_cluster_raises_unavailable() -> None:
    store = EtcdStore([f"127.0.0.1:{free_port()}", f"127.0.0.1:{free_port()}"], deadline=4.0, timeout=0.5)
    started = time.monotonic()
    try:
        with pytest.raises(Unavailable):
            await store.get("/x")
        first = time.monotonic() - started  # the whole deadline: it may have been a blip
        started = time.monotonic()
        with pytest.raises(Unavailable):
            await store.put("/x", b"1")
        then = time.monotonic() - started  # known unreachable: one RPC timeout, not the deadline again
        assert first >= 3.5 and then < first / 2, (first, then)
    finally:
        await store.close()


async def test_watch_moves_off_a_hung_member(cluster: EtcdCluster) -> None:
    # SIGSTOP keeps the member's sockets open but silent: only the idle check can notice.
    leader = await asyncio.to_thread(cluster.leader)
    hung, other = (m for m in cluster.members if m is not leader)
    store = EtcdStore([hung.endpoint, other.endpoint, leader.endpoint], timeout=1, watch_check=1)
    writer = EtcdStore([leader.endpoint])
    try:
        it = store.watch("/hung/", start_revision=await store.put("/hung/a", b"1"))
        assert (await next_event(it)).kv.key == "/hung/a"
        assert hung.proc is not None
        hung.proc.send_signal(signal.SIGSTOP)
        rev = await writer.put("/hung/b", b"2")
        ev = await next_event(it, within=15)
        assert (ev.kv.key, ev.kv.mod_revision) == ("/hung/b", rev)
        assert store.current_endpoint != hung.endpoint
        await it.aclose()  # type: ignore[attr-defined]
    finally:
        if hung.proc is not None:
            hung.proc.send_signal(signal.SIGCONT)
        await store.close()
        await writer.close()


async def test_a_watch_given_up_while_created_does_not_take_over_the_next(etcd_endpoint: str) -> None:
    # A watch creation abandoned (timed out, cancelled) while etcd's "created" answer is on its way:
    # on a stream shared by every watch that answer went to the next creation, which then watched
    # the abandoned range while its own watch was cancelled as expired (a Deployments informer fed
    # Jobs, a scale never seen). The loop is held so the answer arrives after the abandonment.
    store = EtcdStore([etcd_endpoint])
    try:
        for i in range(3):
            given_up = asyncio.ensure_future(anext(store.watch(f"/given-up{i}/")))
            for _ in range(3):
                await asyncio.sleep(0)  # its creation request is sent
            time.sleep(0.02)  # noqa: ASYNC251 - the loop is busy: the answer waits in the socket
            given_up.cancel()
            it = store.watch(f"/wanted{i}/")
            first = asyncio.ensure_future(anext(it))
            await store.put(f"/given-up{i}/k", b"not mine")  # (a watch from now: created before the puts)
            await asyncio.sleep(0.3)
            rev = await store.put(f"/wanted{i}/k", b"mine")
            ev = await asyncio.wait_for(first, 10)
            assert (ev.kv.key, ev.kv.mod_revision) == (f"/wanted{i}/k", rev)
            await it.aclose()  # type: ignore[attr-defined]
    finally:
        await store.close()


async def test_back_within_seconds_of_etcd_returning_after_a_long_outage(tmp_path: Path) -> None:
    # gRPC reconnects a channel with backoff growing x1.6 (±20 %) from 1 s up to 120 s: after a 40 s
    # outage an API server's next attempt came up to half a minute after etcd was back, and /readyz
    # (one current_revision) said 503 all along. The store caps that backoff at `reconnect_backoff`.
    binary = etcd_binary()
    if binary is None:
        pytest.skip("etcd binary not found")
    member = EtcdMember("m0", tmp_path, free_port(), free_port())
    initial, token = f"m0={member.peer_url}", f"outage-{os.getpid()}-{time.monotonic_ns()}"

    member.start(binary, initial, token)
    await wait_for_condition(lambda: asyncio.to_thread(member.healthy), within=30)
    store = EtcdStore([member.endpoint])  # the defaults, as `open_store` builds it
    attempts: list[float] = []
    try:
        await store.put("/outage/a", b"1")
        member.kill()
        killed = time.monotonic()
        # During the outage every call fails within the deadline (5 s), then within one RPC timeout (3 s).
        for bound in (5.0, 3.0):
            started = time.monotonic()
            with pytest.raises(Unavailable):
                await store.get("/outage/a")
            assert time.monotonic() - started < bound + 0.5

        # Meanwhile a listener on etcd's port notes each reconnect attempt of the client (and fails it,
        # as a refused one), so etcd can come back just after one: the next must not be far off.
        late_attempt = asyncio.Event()

        async def attempted(_r: asyncio.StreamReader, w: asyncio.StreamWriter) -> None:
            attempts.append(time.monotonic() - killed)
            w.close()
            if attempts[-1] >= 12:  # 12 s into the outage an uncapped backoff is ≥ 8.4 s (the 5th or later)
                late_attempt.set()

        listener = await asyncio.start_server(attempted, "127.0.0.1", member.client_port, reuse_address=True)

        async def keep_calling() -> None:  # as /readyz polled by a load balancer
            while True:
                with contextlib.suppress(Unavailable, TimeoutError):
                    async with asyncio.timeout(2):
                        await store.current_revision()
                await asyncio.sleep(0.1)

        caller = asyncio.create_task(keep_calling())
        try:
            await asyncio.wait_for(late_attempt.wait(), 30)
        finally:
            caller.cancel()
            listener.close()
            await listener.wait_closed()
        member.start(binary, initial, token)  # the same data dir and port
        back = time.monotonic()
        async with asyncio.timeout(30):
            while True:
                with contextlib.suppress(Unavailable, TimeoutError):
                    async with asyncio.timeout(2):
                        assert (await store.get("/outage/a")) is not None
                        break
                await asyncio.sleep(0.1)
        assert time.monotonic() - back <= 5.0, (time.monotonic() - back, attempts)
    finally:
        await store.close()
        member.stop()
