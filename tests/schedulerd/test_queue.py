"""Scheduling queue: priority then FIFO, dedup, per-key exponential backoff, cluster events."""

from __future__ import annotations

import asyncio

from drods.schedulerd.queue import SchedulingQueue


class Clock:
    def __init__(self) -> None:
        self.t = 1000.0

    def __call__(self) -> float:
        return self.t


def drain(q: SchedulingQueue) -> list[str]:
    out = []
    while (e := q.pop_nowait()) is not None:
        out.append(e.key)
    return out


def test_priority_then_fifo() -> None:
    q = SchedulingQueue(clock=Clock())
    q.add("a", priority=0)
    q.add("b", priority=5)
    q.add("c", priority=0)
    q.add("d", priority=5)
    assert drain(q) == ["b", "d", "a", "c"]


def test_dedup_and_priority_update() -> None:
    q = SchedulingQueue(clock=Clock())
    q.add("a", item=1)
    q.add("b")
    q.add("a", item=2)  # same key: updated in place, keeps its FIFO slot
    assert len(q) == 2
    e = q.pop_nowait()
    assert e is not None and e.key == "a" and e.item == 2
    q.add("c", priority=0)
    q.add("c", priority=9)
    assert drain(q) == ["c", "b"]


def test_backoff_is_exponential_per_key() -> None:
    clock = Clock()
    q = SchedulingQueue(clock=clock, initial_backoff=1.0, max_backoff=8.0)
    assert [q.backoff_for(n) for n in range(1, 7)] == [1, 2, 4, 8, 8, 8]
    q.add("a")
    for attempt, wait in enumerate([1.0, 2.0, 4.0], start=1):
        e = q.pop_nowait()
        assert e is not None and e.attempts == attempt
        q.retry("a")
        assert q.where("a") == "backoff"
        clock.t += wait - 0.01
        assert q.pop_nowait() is None
        clock.t += 0.02
    assert q.pop_nowait() is not None


def test_unschedulable_waits_for_cluster_event() -> None:
    clock = Clock()
    q = SchedulingQueue(clock=clock, initial_backoff=2.0, max_unschedulable=300)
    q.add("a")
    q.add("b")
    assert q.pop_nowait().key == "a"  # type: ignore[union-attr]
    q.unschedulable("a")
    assert q.where("a") == "unschedulable"
    clock.t += 10
    assert drain(q) == ["b"]  # a stays parked without an event, even after its backoff
    q.unschedulable("b")  # b failed at t+10, backoff 2 s
    assert q.on_cluster_event("added") == 2
    # a's backoff expired → active at once; b still backing off
    assert q.where("a") == "active" and q.where("b") == "backoff"
    assert drain(q) == ["a"]
    clock.t += 2
    assert drain(q) == ["b"]


def test_parked_entries_retry_after_max_duration() -> None:
    clock = Clock()
    q = SchedulingQueue(clock=clock, max_unschedulable=60)
    q.add("a")
    q.pop_nowait()
    q.unschedulable("a")
    clock.t += 61
    assert drain(q) == ["a"]


def test_success_resets_and_dirty_requeues() -> None:
    q = SchedulingQueue(clock=Clock())
    q.add("a", item="v1")
    e = q.pop_nowait()
    assert e is not None
    q.add("a", item="v2")  # updated while being processed
    assert q.pop_nowait() is None
    q.done("a")
    e = q.pop_nowait()
    assert e is not None and e.item == "v2"
    q.done("a")
    assert len(q) == 0 and q.where("a") is None


def test_update_of_parked_entry_activates_it() -> None:
    q = SchedulingQueue(clock=Clock())
    q.add("a")
    q.pop_nowait()
    q.unschedulable("a")
    q.add("a", item="new spec")
    assert q.where("a") == "active"


async def test_async_get_wakes_on_add() -> None:
    q = SchedulingQueue()
    got: list[str] = []

    async def consumer() -> None:
        e = await q.get()
        got.append(e.key)

    t = asyncio.create_task(consumer())
    await asyncio.sleep(0.01)
    assert not got
    q.add("x")
    await asyncio.wait_for(t, 1.0)
    assert got == ["x"]


async def test_async_get_waits_out_backoff() -> None:
    q = SchedulingQueue(initial_backoff=0.05)
    q.add("a")
    e = await q.get()
    q.retry(e.key)
    e2 = await asyncio.wait_for(q.get(), 1.0)
    assert e2.key == "a" and e2.attempts == 2
