"""Group commit of decisions: what is decided during a write goes in the next one; full batches may
write alongside up to a bound, and then deciding waits; stopping hands back everything unwritten."""

from __future__ import annotations

import asyncio
from collections.abc import Callable

from drods.schedulerd.commits import GroupCommit


class Writes:
    """A store whose writes finish when the test says so."""

    def __init__(self) -> None:
        self.started: list[list[int]] = []
        self.written: list[list[int]] = []
        self.gates: list[asyncio.Event] = []

    async def write(self, batch: list[int]) -> None:
        gate = asyncio.Event()
        self.started.append(batch)
        self.gates.append(gate)
        await gate.wait()
        self.written.append(batch)

    def finish(self, k: int) -> None:
        self.gates[k].set()


async def until(cond: Callable[[], bool], within: float = 5.0) -> None:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + within
    while not cond():
        if loop.time() > deadline:
            raise TimeoutError(f"condition not met within {within}s")
        await asyncio.sleep(0)


async def test_what_is_decided_during_a_write_goes_in_the_next_one() -> None:
    w = Writes()
    gc = GroupCommit(w.write, batch_size=100, max_inflight=4)
    gc.add(1)
    gc.flush()  # nothing in flight: written at once
    await until(lambda: len(w.started) == 1)
    for i in (2, 3, 4):
        gc.add(i)
        gc.flush()  # a write is in flight and no batch is full: they wait for it
    await asyncio.sleep(0)
    assert w.started == [[1]] and gc.pending == 3
    w.finish(0)
    await until(lambda: len(w.started) == 2)
    assert w.started[1] == [2, 3, 4] and gc.pending == 0
    w.finish(1)
    await until(lambda: gc.writing == 0)
    assert w.written == [[1], [2, 3, 4]]


async def test_full_batches_write_alongside_up_to_the_bound_then_deciding_waits() -> None:
    w = Writes()
    gc = GroupCommit(w.write, batch_size=2, max_inflight=2)
    for i in range(7):
        gc.add(i)
    gc.flush()
    await until(lambda: len(w.started) == 2)
    assert w.started == [[0, 1], [2, 3]] and gc.pending == 3
    room = asyncio.create_task(gc.wait_for_room())
    await asyncio.sleep(0.01)
    assert not room.done()  # a full batch waits behind two busy writes
    w.finish(0)
    await until(room.done)
    await until(lambda: len(w.started) == 3)
    assert w.started[2] == [4, 5] and gc.pending == 1
    w.finish(1)
    w.finish(2)
    await until(lambda: len(w.started) == 4)
    assert w.started[3] == [6]
    w.finish(3)
    await until(lambda: gc.writing == 0)
    assert sorted(i for b in w.written for i in b) == list(range(7))


async def test_stopping_hands_back_what_was_not_written_and_starts_nothing() -> None:
    w = Writes()
    gc = GroupCommit(w.write, batch_size=10, max_inflight=2)
    gc.add(1)
    gc.flush()
    await until(lambda: len(w.started) == 1)
    w.finish(0)
    await until(lambda: gc.writing == 0)  # written: not handed back
    gc.add(2)
    gc.flush()
    await until(lambda: len(w.started) == 2)
    gc.add(3)
    gc.add(4)
    assert sorted(await gc.abandon()) == [2, 3, 4]
    assert w.written == [[1]]
    gc.add(5)
    gc.flush()
    await asyncio.sleep(0.01)
    assert len(w.started) == 2  # closed: nothing starts


async def test_put_writes_a_full_batch_and_waits_while_the_bound_is_busy() -> None:
    w = Writes()
    gc = GroupCommit(w.write, batch_size=2, max_inflight=1)
    await gc.put(0)
    assert w.started == [] and gc.pending == 1  # not a full batch: written at the end of the burst
    await gc.put(1)
    await until(lambda: len(w.started) == 1)
    assert w.started == [[0, 1]]
    await gc.put(2)
    third = asyncio.create_task(gc.put(3))  # a full batch behind the one busy write: waits
    await asyncio.sleep(0.01)
    assert not third.done() and len(w.started) == 1
    w.finish(0)
    await until(third.done)
    await until(lambda: len(w.started) == 2)
    assert w.started[1] == [2, 3]
    w.finish(1)
    await until(lambda: gc.writing == 0)
