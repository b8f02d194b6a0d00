"""The store contract, run against every backend (``store`` is parametrised in tests/conftest.py).

Tests never assume absolute revisions (the etcd server is shared by the session) and keep their
keys under a fresh prefix ``ns``.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Callable

import pytest

from drods.store import (
    CasFailed,
    Compacted,
    Compare,
    Delete,
    EventType,
    Get,
    LeaseNotFound,
    Put,
    Store,
)
from tests.store.util import next_event, take, wait_for_condition


@pytest.fixture
def ns() -> str:
    return f"/t/{uuid.uuid4().hex[:10]}/"


# ---------------------------------------------------------------- get / put / range


async def test_put_get_versions(store: Store, ns: str) -> None:
    assert await store.get(ns + "missing") is None
    r1 = await store.put(ns + "a", b"one")
    kv = await store.get(ns + "a")
    assert kv is not None
    assert (kv.key, kv.value, kv.create_revision, kv.mod_revision, kv.version, kv.lease) == (
        ns + "a", b"one", r1, r1, 1, 0,
    )
    r2 = await store.put(ns + "a", b"two")
    assert r2 > r1
    kv = await store.get(ns + "a")
    assert kv is not None
    assert (kv.value, kv.create_revision, kv.mod_revision, kv.version) == (b"two", r1, r2, 2)
    # Recreated after delete: a new life, version restarts.
    await store.delete(ns + "a")
    r3 = await store.put(ns + "a", b"three")
    kv = await store.get(ns + "a")
    assert kv is not None
    assert (kv.create_revision, kv.mod_revision, kv.version) == (r3, r3, 1)


async def test_range_order_and_prefix_boundaries(store: Store, ns: str) -> None:
    inside = [ns + "r/a", ns + "r/b", ns + "r/a/x", ns + "r/", ns + "r/\u00e9", ns + "r/Z", ns + "r/a0"]
    outside = [ns + "r", ns + "r0", ns + "rb", ns + "q/a", ns + "s"]
    for k in inside + outside:
        await store.put(k, k.encode())
    kvs, rev = await store.range(ns + "r/")
    assert [kv.key for kv in kvs] == sorted(inside, key=lambda k: k.encode())
    assert all(kv.value == kv.key.encode() for kv in kvs)
    assert rev == await store.current_revision()
    assert rev >= max(kv.mod_revision for kv in kvs)

    limited, _ = await store.range(ns + "r/", limit=3)
    assert [kv.key for kv in limited] == [kv.key for kv in kvs[:3]]
    # pages: each goes on after the last key of the one before, and all of them are the whole range
    pages: list[str] = []
    after = ""
    while True:
        page, _ = await store.range(ns + "r/", limit=3, after=after)
        pages += [kv.key for kv in page]
        if len(page) < 3:
            break
        after = page[-1].key
    assert pages == [kv.key for kv in kvs]
    after_a, _ = await store.range(ns + "r/", after=ns + "r/a")  # strictly after: "r/a" itself is not in it
    assert [kv.key for kv in after_a] == [kv.key for kv in kvs if kv.key.encode() > (ns + "r/a").encode()]
    before_prefix, _ = await store.range(ns + "r/", after=ns + "q/z")  # a key before the prefix: the whole range
    assert [kv.key for kv in before_prefix] == [kv.key for kv in kvs]
    past_prefix, _ = await store.range(ns + "r/", after=ns + "s")  # past it: nothing
    assert past_prefix == []

    everything, _ = await store.range(ns)
    assert {kv.key for kv in everything} == set(inside + outside)
    empty, _ = await store.range(ns + "nothing/")
    assert empty == []


# ---------------------------------------------------------------- compare-and-swap


async def test_cas_create_only(store: Store, ns: str) -> None:
    rev = await store.put(ns + "c", b"first", expect_revision=0)
    with pytest.raises(CasFailed) as err:
        await store.put(ns + "c", b"second", expect_revision=0)
    assert err.value.key == ns + "c"
    assert err.value.current is not None
    assert (err.value.current.value, err.value.current.mod_revision) == (b"first", rev)
    kv = await store.get(ns + "c")
    assert kv is not None and kv.value == b"first"


async def test_cas_on_revision_and_stale(store: Store, ns: str) -> None:
    r1 = await store.put(ns + "c", b"v1")
    r2 = await store.put(ns + "c", b"v2", expect_revision=r1)
    assert r2 > r1
    with pytest.raises(CasFailed) as err:
        await store.put(ns + "c", b"stale", expect_revision=r1)
    assert err.value.current is not None
    assert (err.value.current.value, err.value.current.mod_revision) == (b"v2", r2)
    # CAS on a key that does not exist with a non-zero revision fails with current None.
    with pytest.raises(CasFailed) as err:
        await store.put(ns + "nope", b"x", expect_revision=r2)
    assert err.value.current is None
    assert await store.get(ns + "nope") is None


async def test_concurrent_cas_exactly_one_wins(store: Store, ns: str) -> None:
    base = await store.put(ns + "race", b"0")

    async def attempt(i: int) -> bool:
        try:
            await store.put(ns + "race", str(i).encode(), expect_revision=base)
            return True
        except CasFailed:
            return False

    results = await asyncio.gather(*(attempt(i) for i in range(16)))
    assert sum(results) == 1


async def test_delete_with_and_without_cas(store: Store, ns: str) -> None:
    assert await store.delete(ns + "missing") is None
    r1 = await store.put(ns + "d", b"v")
    gone = await store.delete(ns + "d")
    assert gone is not None and (gone.key, gone.value, gone.mod_revision) == (ns + "d", b"v", r1)
    assert await store.get(ns + "d") is None

    r2 = await store.put(ns + "d", b"v2")
    with pytest.raises(CasFailed) as err:
        await store.delete(ns + "d", expect_revision=r2 - 1)
    assert err.value.current is not None and err.value.current.mod_revision == r2
    assert await store.get(ns + "d") is not None
    gone = await store.delete(ns + "d", expect_revision=r2)
    assert gone is not None and gone.value == b"v2"
    with pytest.raises(CasFailed) as err:
        await store.delete(ns + "d", expect_revision=r2)
    assert err.value.current is None


async def test_delete_prefix(store: Store, ns: str) -> None:
    for k in ("p/a", "p/b", "p/c/d", "p", "p0", "pa"):
        await store.put(ns + k, b"x")
    assert await store.delete_prefix(ns + "p/") == 3
    kvs, _ = await store.range(ns)
    assert sorted(kv.key for kv in kvs) == sorted([ns + "p", ns + "p0", ns + "pa"])
    assert await store.delete_prefix(ns + "p/") == 0


# ---------------------------------------------------------------- txn


async def test_txn_compares_and_branches(store: Store, ns: str) -> None:
    k = ns + "k"
    r1 = await store.put(k, b"abc")

    async def holds(*compares: Compare) -> bool:
        return (await store.txn(list(compares), [], [])).succeeded

    assert await holds(Compare(k, "mod", "=", r1))
    assert await holds(Compare(k, "mod", "!=", r1 + 1))
    assert await holds(Compare(k, "mod", "<", r1 + 1))
    assert await holds(Compare(k, "mod", ">", r1 - 1))
    assert not await holds(Compare(k, "mod", ">", r1))
    assert await holds(Compare(k, "create", "=", r1))
    assert await holds(Compare(k, "version", "=", 1))
    assert await holds(Compare(k, "version", ">", 0))
    assert await holds(Compare(k, "value", "=", b"abc"))
    assert await holds(Compare(k, "value", "<", b"abd"))
    assert await holds(Compare(k, "value", ">", b"abb"))
    assert await holds(Compare(k, "value", "!=", b"x"))
    assert not await holds(Compare(k, "value", "=", b"x"))
    # A missing key has zero revisions and version (etcd semantics).
    assert await holds(Compare(ns + "none", "create", "=", 0))
    assert await holds(Compare(ns + "none", "mod", "=", 0))
    assert await holds(Compare(ns + "none", "version", "=", 0))
    # All compares must hold.
    assert not await holds(Compare(k, "version", "=", 1), Compare(k, "value", "=", b"nope"))


async def test_txn_success_and_failure_ops(store: Store, ns: str) -> None:
    a, b = ns + "a", ns + "b"
    r1 = await store.put(a, b"1")
    await store.put(ns + "list/x", b"x")
    await store.put(ns + "list/y", b"y")

    res = await store.txn(
        [Compare(a, "mod", "=", r1)],
        [Put(a, b"2"), Put(b, b"new"), Get(a), Get(ns + "list/", prefix=True), Delete(ns + "list/x")],
        [Put(a, b"failed")],
    )
    assert res.succeeded
    assert res.revision == await store.current_revision()
    put_a, put_b, get_a, get_list, deleted = res.responses
    assert put_a == put_b == res.revision
    assert isinstance(get_a, list) and [kv.value for kv in get_a] == [b"2"]
    assert isinstance(get_list, list) and [kv.key for kv in get_list] == [ns + "list/x", ns + "list/y"]
    assert isinstance(deleted, list) and [(kv.key, kv.value) for kv in deleted] == [(ns + "list/x", b"x")]
    kv_a, kv_b = await store.get(a), await store.get(b)
    assert kv_a is not None and kv_b is not None
    assert kv_a.mod_revision == kv_b.mod_revision == res.revision  # one revision for the whole txn

    res = await store.txn(
        [Compare(a, "mod", "=", r1)],  # stale now
        [Put(a, b"never")],
        [Get(a), Delete(ns + "list/", prefix=True), Put(ns + "flag", b"failed")],
    )
    assert not res.succeeded
    got, deleted, put_rev = res.responses
    assert isinstance(got, list) and [kv.value for kv in got] == [b"2"]
    assert isinstance(deleted, list) and [kv.key for kv in deleted] == [ns + "list/y"]
    assert put_rev == res.revision
    kv_a = await store.get(a)
    assert kv_a is not None and kv_a.value == b"2"
    kv_f = await store.get(ns + "flag")
    assert kv_f is not None and kv_f.value == b"failed"


async def test_txn_batch_with_one_stale_guard_writes_nothing(store: Store, ns: str) -> None:
    """A batch write (one guard per key) is all or nothing: one stale key fails the whole txn and
    the failure branch reports what each key holds, so the caller can retry that one alone."""
    keys = [f"{ns}batch/{i}" for i in range(20)]
    revs = [await store.put(k, b"v1") for k in keys]
    await store.put(keys[7], b"moved")
    before = await store.current_revision()
    res = await store.txn([Compare(k, "mod", "=", r) for k, r in zip(keys, revs, strict=True)],
                          [Put(k, b"v2") for k in keys], [Get(k) for k in keys])
    assert not res.succeeded
    assert await store.current_revision() == before
    stale = [k for k, r, got in zip(keys, revs, res.responses, strict=True)
             if isinstance(got, list) and got[0].mod_revision != r]
    assert stale == [keys[7]]
    res = await store.txn([Compare(k, "mod", "=", r) for k, r in zip(keys, revs, strict=True) if k != keys[7]],
                          [Put(k, b"v2") for k in keys if k != keys[7]])
    assert res.succeeded
    values = {kv.key: kv.value for kv in (await store.range(ns + "batch/"))[0]}
    assert values == {k: (b"moved" if k == keys[7] else b"v2") for k in keys}


async def test_txn_put_with_missing_lease_fails_cleanly(store: Store, ns: str) -> None:
    before = await store.current_revision()
    with pytest.raises(LeaseNotFound):
        await store.txn([], [Put(ns + "a", b"x"), Put(ns + "b", b"y", lease=12345)])
    with pytest.raises(LeaseNotFound):
        await store.put(ns + "c", b"z", lease=12345)
    assert await store.get(ns + "a") is None
    assert await store.current_revision() == before


async def test_bad_request_fails_alone(store: Store, ns: str) -> None:
    before = await store.current_revision()
    with pytest.raises(ValueError):
        await store.txn([Compare(ns + "k", "bogus", "=", 1)], [Put(ns + "k", b"x")])
    assert await store.get(ns + "k") is None
    assert await store.current_revision() == before
    assert await store.put(ns + "k", b"y") == before + 1  # the store carries on


# ---------------------------------------------------------------- revisions


async def test_one_revision_per_write(store: Store, ns: str) -> None:
    r0 = await store.current_revision()
    r1 = await store.put(ns + "a", b"1")
    assert r1 == r0 + 1
    r2 = await store.put(ns + "b", b"2")
    assert r2 == r1 + 1
    with pytest.raises(CasFailed):
        await store.put(ns + "a", b"x", expect_revision=0)
    assert await store.current_revision() == r2  # a failed CAS takes no revision
    res = await store.txn([], [Put(ns + "c", b"3"), Put(ns + "d", b"4"), Delete(ns + "a")])
    assert res.revision == r2 + 1
    assert (await store.txn([], [Get(ns + "c")])).revision == r2 + 1  # read-only txn: no revision
    assert await store.delete(ns + "missing") is None
    assert await store.delete_prefix(ns + "nothing/") == 0
    assert await store.current_revision() == r2 + 1  # deleting nothing takes no revision
    assert await store.delete_prefix(ns) == 3
    assert await store.current_revision() == r2 + 2


# ---------------------------------------------------------------- watch


async def test_watch_from_now(store: Store, ns: str) -> None:
    await store.put(ns + "w/before", b"old")
    it = store.watch(ns + "w/")
    try:
        r1 = await store.put(ns + "w/a", b"1")
        await store.put(ns + "other", b"not watched")
        await store.put(ns + "w", b"not under the prefix")
        r2 = await store.put(ns + "w/a", b"2")
        r3 = (await store.txn([], [Put(ns + "w/b", b"3"), Put(ns + "w/c", b"4")])).revision
        gone = await store.delete(ns + "w/before")
        assert gone is not None
        events = await take(it, 5)
        assert [(e.type, e.kv.key, e.kv.value, e.kv.mod_revision) for e in events] == [
            (EventType.PUT, ns + "w/a", b"1", r1),
            (EventType.PUT, ns + "w/a", b"2", r2),
            (EventType.PUT, ns + "w/b", b"3", r3),
            (EventType.PUT, ns + "w/c", b"4", r3),
            (EventType.DELETE, ns + "w/before", b"", r3 + 1),
        ]
        assert events[1].kv.version == 2 and events[1].kv.create_revision == r1
    finally:
        await it.aclose()  # type: ignore[attr-defined]


async def test_watch_replays_from_past_revision(store: Store, ns: str) -> None:
    r1 = await store.put(ns + "h/a", b"1")
    await store.put(ns + "h/b", b"2")
    await store.delete(ns + "h/a")
    await store.put(ns + "x", b"elsewhere")
    it = store.watch(ns + "h/", start_revision=r1)
    try:
        events = await take(it, 3)
        assert [(e.type, e.kv.key) for e in events] == [
            (EventType.PUT, ns + "h/a"), (EventType.PUT, ns + "h/b"), (EventType.DELETE, ns + "h/a"),
        ]
        assert events[0].kv.mod_revision == r1
        # The replay continues seamlessly into live events.
        r = await store.put(ns + "h/c", b"3")
        live = await next_event(it)
        assert (live.kv.key, live.kv.mod_revision) == (ns + "h/c", r)
    finally:
        await it.aclose()  # type: ignore[attr-defined]


async def test_watch_prev_kv(store: Store, ns: str) -> None:
    # "From now" means after the last revision this client has seen; make sure it has seen one.
    await store.current_revision()
    it = store.watch(ns)
    try:
        r1 = await store.put(ns + "k", b"v1")
        r2 = await store.put(ns + "k", b"v2")
        await store.delete(ns + "k")
        created, updated, deleted = await take(it, 3)
        assert created.prev_kv is None
        assert updated.prev_kv is not None
        prev = updated.prev_kv
        assert (prev.value, prev.mod_revision, prev.version) == (b"v1", r1, 1)
        assert deleted.type is EventType.DELETE and deleted.kv.value == b""
        assert deleted.prev_kv is not None
        prev = deleted.prev_kv
        assert (prev.value, prev.mod_revision, prev.version, prev.create_revision) == (b"v2", r2, 2, r1)
    finally:
        await it.aclose()  # type: ignore[attr-defined]


async def test_large_values_round_trip(store: Store, ns: str) -> None:
    """Documents of tens of kilobytes, compressible or not, read back byte for byte from every
    path: get, range, a value compare, live and replayed watch events with their previous values."""
    doc = b'{"routes": [' + b",".join(b'{"clientSite": "site-%03d", "weight": 1.0}' % n for n in range(600)) + b"]}"
    noise = uuid.uuid4().bytes * 1500  # 24 KB that compresses poorly
    await store.current_revision()
    live = store.watch(ns)
    try:
        r1 = await store.put(ns + "doc", doc)
        r2 = await store.put(ns + "doc", noise)
        r3 = await store.put(ns + "doc", doc + b" ")
        ok = await store.txn([Compare(ns + "doc", "value", "=", doc + b" ")], [Put(ns + "doc", noise + b"!")])
        assert ok.succeeded
        kv = await store.get(ns + "doc")
        assert kv is not None and kv.value == noise + b"!"
        (ranged,), _ = await store.range(ns)
        assert ranged.value == noise + b"!"
        await store.delete(ns + "doc")
        seen = await take(live, 5)
    finally:
        await live.aclose()  # type: ignore[attr-defined]
    replay = store.watch(ns, start_revision=r1)
    try:
        replayed = await take(replay, 5)
    finally:
        await replay.aclose()  # type: ignore[attr-defined]
    for events in (seen, replayed):
        assert [e.kv.value for e in events[:4]] == [doc, noise, doc + b" ", noise + b"!"]
        assert [e.prev_kv.value if e.prev_kv else None for e in events] == [None, doc, noise, doc + b" ", noise + b"!"]
        assert [e.prev_kv.mod_revision for e in events[1:4] if e.prev_kv] == [r1, r2, r3]


async def test_watch_after_compaction(store: Store, ns: str) -> None:
    r1 = await store.put(ns + "c/a", b"1")
    await store.put(ns + "c/a", b"2")
    r3 = await store.put(ns + "c/b", b"3")
    await store.compact(r3)
    await store.compact(r3)  # compacting again is harmless
    it = store.watch(ns + "c/", start_revision=r1)
    with pytest.raises(Compacted) as err:
        await next_event(it)
    assert err.value.compact_revision == r3
    # History from the compaction revision on is still there; so is live data.
    it = store.watch(ns + "c/", start_revision=r3)
    try:
        ev = await next_event(it)
        assert (ev.kv.key, ev.kv.mod_revision) == (ns + "c/b", r3)
    finally:
        await it.aclose()  # type: ignore[attr-defined]
    kv = await store.get(ns + "c/a")
    assert kv is not None and kv.value == b"2"


async def test_two_clients_see_each_other(store_factory: Callable[[], Store], ns: str) -> None:
    a, b = store_factory(), store_factory()
    try:
        await b.current_revision()  # b has now seen a revision: its watch starts right after it
        it = b.watch(ns)
        rev = await a.put(ns + "k", b"from a")
        ev = await next_event(it)
        assert (ev.kv.key, ev.kv.mod_revision) == (ns + "k", rev)
        with pytest.raises(CasFailed):
            await b.put(ns + "k", b"from b", expect_revision=0)
        await it.aclose()  # type: ignore[attr-defined]
    finally:
        await a.close()
        await b.close()


# ---------------------------------------------------------------- leases


async def test_lease_expiry_deletes_keys(store: Store, ns: str) -> None:
    lease = await store.grant_lease(1)
    assert lease.ttl >= 1
    it = store.watch(ns)
    try:
        await store.put(ns + "l/a", b"x", lease=lease.id)
        await store.put(ns + "l/b", b"y", lease=lease.id)
        await store.put(ns + "keep", b"z")
        kv = await store.get(ns + "l/a")
        assert kv is not None and kv.lease == lease.id
        await take(it, 3)
        deletions = await take(it, 2, within=lease.ttl + 8)
        assert {(e.type, e.kv.key) for e in deletions} == {
            (EventType.DELETE, ns + "l/a"), (EventType.DELETE, ns + "l/b"),
        }
        assert deletions[0].prev_kv is not None and deletions[0].prev_kv.lease == lease.id
    finally:
        await it.aclose()  # type: ignore[attr-defined]
    assert await store.get(ns + "l/a") is None
    assert await store.get(ns + "keep") is not None
    with pytest.raises(LeaseNotFound):
        await store.keep_alive(lease.id)


async def test_keep_alive_extends_lease(store: Store, ns: str) -> None:
    lease = await store.grant_lease(1)
    await store.put(ns + "hb", b"alive", lease=lease.id)
    loop = asyncio.get_running_loop()
    until = loop.time() + lease.ttl * 2.5  # well past the original expiry
    try:
        while loop.time() < until:
            assert await store.keep_alive(lease.id) == lease.ttl
            assert await store.get(ns + "hb") is not None
            await asyncio.sleep(lease.ttl / 4)  # the heartbeat period under test, not a wait
    except BaseException:
        await store.revoke_lease(lease.id)
        raise

    async def gone() -> bool:
        return await store.get(ns + "hb") is None

    await wait_for_condition(gone, within=lease.ttl + 8)  # no more heartbeats: it expires


async def test_revoke_deletes_keys(store: Store, ns: str) -> None:
    lease = await store.grant_lease(60)
    await store.put(ns + "a", b"1", lease=lease.id)
    await store.put(ns + "b", b"2", lease=lease.id)
    before = await store.current_revision()
    await store.revoke_lease(lease.id)
    assert await store.get(ns + "a") is None and await store.get(ns + "b") is None
    assert await store.current_revision() == before + 1  # one revision for the whole revoke
    with pytest.raises(LeaseNotFound):
        await store.keep_alive(lease.id)
    with pytest.raises(LeaseNotFound):
        await store.put(ns + "c", b"3", lease=lease.id)
    await store.revoke_lease(lease.id)  # revoking twice is harmless


# ---------------------------------------------------------------- lifecycle


def test_usable_from_several_event_loops(store_factory: Callable[[], Store]) -> None:
    s = store_factory()
    key = f"/t/{uuid.uuid4().hex[:10]}/loops"

    async def write(value: bytes) -> int:
        return await s.put(key, value)

    async def read() -> bytes | None:
        kv = await s.get(key)
        return kv.value if kv else None

    asyncio.run(write(b"first"))
    asyncio.run(write(b"second"))
    assert asyncio.run(read()) == b"second"
    asyncio.run(s.close())
