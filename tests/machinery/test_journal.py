"""The journal behind the audit log and every history: order, windows, dedup, groups, retention."""

from __future__ import annotations

from drods.machinery.journal import Journal
from drods.store import Store

T0 = 1_700_000_000.0  # 2023-11-14T22:13:20Z


async def test_newest_first_windows_filters_and_truncation(store: Store) -> None:
    await store.delete_prefix("/")
    j = Journal(store, "/j/")
    # Spread over days, hours, minutes and within one second.
    times = [T0 + dt for dt in (0, 0.25, 0.5, 59, 3600, 86_400, 2 * 86_400 + 1)]
    for i, t in enumerate(times):
        assert await j.append({"i": i, "odd": i % 2 == 1}, ts=t)
    page = await j.query(0, T0 + 10 * 86_400, 100)
    assert [e["i"] for e in page.items] == list(range(len(times) - 1, -1, -1)) and not page.truncated
    assert page.items[-1]["time"] == "2023-11-14T22:13:20.000Z"
    page = await j.query(T0 + 0.25, T0 + 3600, 100)
    assert [e["i"] for e in page.items] == [4, 3, 2, 1]
    page = await j.query(0, T0 + 10 * 86_400, 2, lambda e: bool(e["odd"]))
    assert [e["i"] for e in page.items] == [5, 3] and page.truncated
    assert (await j.query(T0 + 10, T0 + 20, 10)).items == []


async def test_dedup_groups_and_prune(store: Store) -> None:
    await store.delete_prefix("/")
    j = Journal(store, "/j/")
    assert await j.append({"fact": 1}, ts=T0, dedup="cluster-a/stale")
    assert not await j.append({"fact": 2}, ts=T0, dedup="cluster-a/stale")  # the first write wins
    puts = j.puts([(T0 + 5.1, {"n": 1}), (T0 + 5.2, {"n": 2}), (T0 + 6.0, {"n": 3})])
    assert len(puts) == 2  # one key per second
    for p in puts:
        await store.put(p.key, p.value)
    assert [e.get("n", e.get("fact")) for e in (await j.query(0, T0 + 86_400, 10)).items] == [3, 2, 1, 1]
    await j.append({"late": True}, ts=T0 + 2 * 86_400)
    assert await j.prune(T0 + 86_400) == 3  # the keys of the first day
    assert [e for e in (await j.query(0, T0 + 3 * 86_400, 10)).items] == [
        {"time": "2023-11-16T22:13:20.000Z", "late": True}]


async def test_leased_retention_attaches_every_entry(store: Store) -> None:
    await store.delete_prefix("/")
    j = Journal(store, "/j/", retention_s=60)
    await j.append({"x": 1}, ts=T0)
    kvs, _ = await store.range("/j/")
    assert len(kvs) == 1 and kvs[0].lease != 0
    assert (await j.lease()) == kvs[0].lease  # reused until a quarter of the retention has passed


async def test_a_window_far_in_the_future_is_cheap(store: Store) -> None:
    await store.delete_prefix("/")
    j = Journal(store, "/j/")
    await j.append({"x": 1})
    reads = 0
    real_range = store.range

    async def counting(prefix: str, *, limit: int = 0) -> object:
        nonlocal reads
        reads += 1
        return await real_range(prefix, limit=limit)

    store.range = counting  # type: ignore[method-assign]
    page = await j.query(0, 2_524_608_000, 10)  # 2050
    assert [e["x"] for e in page.items] == [1] and reads < 400, reads
