"""The work queue: a key is handed out once however often it was added, and delayed adds of a key
while it waits keep the earliest time (a burst of them brings it back once)."""

from __future__ import annotations

import asyncio

from drods.machinery.workqueue import WorkQueue


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


async def handed_out(q: WorkQueue[str]) -> list[str]:
    out: list[str] = []
    while True:
        try:
            async with asyncio.timeout(0.01):
                key = await q.get()
        except TimeoutError:
            return out
        out.append(key)
        q.done(key)


async def test_delayed_adds_of_a_waiting_key_come_back_once_at_the_earliest_time() -> None:
    clock = Clock()
    q: WorkQueue[str] = WorkQueue(clock=clock)
    q.add_after("web", 2)
    q.add_after("web", 2)  # a burst of status events: one pass
    q.add_after("web", 5)
    q.add_after("api", 5)
    q.add_after("api", 1)  # an earlier time wins
    assert len(q) == 2
    assert await handed_out(q) == []
    clock.now += 1
    assert await handed_out(q) == ["api"]
    clock.now += 1
    assert await handed_out(q) == ["web"]
    clock.now += 10
    assert await handed_out(q) == []  # the later adds were folded into the earlier ones
    assert len(q) == 0
    q.add_after("web", 2)  # once handed out, the key can wait again
    clock.now += 2
    assert await handed_out(q) == ["web"]


async def test_a_key_added_at_once_while_it_waits_is_handed_out_once() -> None:
    clock = Clock()
    q: WorkQueue[str] = WorkQueue(clock=clock)
    q.add_after("web", 2)
    q.add("web")
    q.add("web")
    assert await handed_out(q) == ["web"]
    clock.now += 2
    assert await handed_out(q) == ["web"]  # the delayed add still comes: it may carry news after the pass


async def test_a_key_waits_from_when_it_became_ready() -> None:
    """The queue duration a controller reports: from the add that made the key ready (or from when
    a delayed add came due), not from a later add of the same key, nor from the add's request."""
    clock = Clock()
    q: WorkQueue[str] = WorkQueue(clock=clock)
    q.add("web")
    clock.now += 3
    q.add("web")  # folded into the first: the wait counts from the first
    q.add_after("api", 2)
    assert len(q.ready) == 1
    clock.now += 1
    assert await q.get_waited() == ("web", 4.0)
    clock.now += 5  # "api" came due 4 s ago
    assert len(q.ready) == 0  # due, but not promoted until someone asks
    assert await q.get_waited() == ("api", 4.0)
    q.add("web")  # while "web" is processed: ready again only once it is done
    clock.now += 2
    q.done("web")
    clock.now += 1
    assert await q.get_waited() == ("web", 1.0)
