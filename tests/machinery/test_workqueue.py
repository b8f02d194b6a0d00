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


async def test_each_key_goes_to_one_waiting_worker_the_longest_waiting_first() -> None:
    q: WorkQueue[str] = WorkQueue()
    got: list[tuple[int, str]] = []

    async def worker(i: int) -> None:
        key = await q.get()
        got.append((i, key))

    tasks = [asyncio.create_task(worker(i)) for i in range(50)]
    await asyncio.sleep(0)  # every worker waits
    q.add("web")
    q.add("api")
    await asyncio.sleep(0)
    await asyncio.sleep(0)
    assert sorted(got) == [(0, "web"), (1, "api")]
    assert sum(t.done() for t in tasks) == 2
    q.shutdown()
    results = await asyncio.gather(*tasks, return_exceptions=True)
    assert sum(isinstance(r, asyncio.CancelledError) for r in results) == 48


async def test_a_worker_woken_and_cancelled_at_once_passes_its_key_on() -> None:
    q: WorkQueue[str] = WorkQueue()
    first = asyncio.create_task(q.get())
    second = asyncio.create_task(q.get())
    await asyncio.sleep(0)
    q.add("web")  # wakes the first waiter ...
    first.cancel()  # ... which is cancelled before it runs
    async with asyncio.timeout(2):
        assert await second == "web"
    assert first.cancelled()


async def test_a_delayed_key_wakes_a_waiting_worker_when_due_and_an_earlier_one_rearms_the_timer() -> None:
    q: WorkQueue[str] = WorkQueue()
    loop = asyncio.get_running_loop()
    q.add_after("late", 30)
    waiting = asyncio.create_task(q.get_waited())
    await asyncio.sleep(0)  # it waits on the timer for "late"
    started = loop.time()
    q.add_after("soon", 0.05)
    async with asyncio.timeout(5):
        key, waited = await waiting
    assert key == "soon"
    assert 0.04 <= loop.time() - started < 5
    assert waited < 1
    assert len(q) == 1  # "late" still waits for its time
    q.shutdown()


async def test_a_key_added_wakes_one_of_many_waiting_workers_not_all() -> None:
    """Each worker woken looks at the clock (for due keys): a key handed out among 100 waiting workers
    costs a few looks, not one per worker (the binding controller runs 128)."""
    looks = 0

    def clock() -> float:
        nonlocal looks
        looks += 1
        return 100.0

    q: WorkQueue[str] = WorkQueue(clock=clock)
    served: list[str] = []

    async def worker() -> None:
        while True:
            key = await q.get()
            served.append(key)
            q.done(key)

    tasks = [asyncio.create_task(worker()) for _ in range(100)]
    for _ in range(3):
        await asyncio.sleep(0)
    looks = 0
    for i in range(20):
        q.add(f"key-{i}")
        for _ in range(3):
            await asyncio.sleep(0)
    assert len(served) == 20
    assert looks <= 20 * 6, f"{looks} looks at the clock for 20 keys"
    q.shutdown()
    await asyncio.gather(*tasks, return_exceptions=True)


def test_a_queue_used_by_a_later_event_loop_still_hands_out_its_delayed_keys() -> None:
    q: WorkQueue[str] = WorkQueue()

    async def first() -> None:
        q.add_after("web", 0.5)
        waiting = asyncio.create_task(q.get())
        await asyncio.sleep(0)  # it waits on a timer of this loop, which then ends
        waiting.cancel()

    async def second() -> str:
        async with asyncio.timeout(5):
            return await q.get()  # "web" is not due yet: it waits, on a timer of this loop

    asyncio.run(first())
    assert asyncio.run(second()) == "web"
