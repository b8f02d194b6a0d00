"""Long-lived streams end when their caller's token dies, through one timer for all of them."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest

from drods.api import streaming
from drods.api.streaming import until_stopped


async def _never() -> AsyncIterator[int]:
    await asyncio.Event().wait()  # an idle watch: nothing happens
    yield 0


async def test_idle_streams_end_when_their_token_dies_and_leave_no_timer(monkeypatch: pytest.MonkeyPatch) -> None:
    """Of 200 idle streams, those whose ``alive`` turns false end within the sweep's period, the rest
    stream on; the server stopping ends them; then no sweep task is left on the loop."""
    monkeypatch.setattr(streaming, "ALIVE_EVERY_SECONDS", 0.02)
    stop = asyncio.Event()
    valid = [True] * 200
    ended: list[int] = []
    half_ended = asyncio.Event()

    async def follow(i: int) -> None:
        async for _ in until_stopped(stop, _never(), lambda: valid[i]):
            pass
        ended.append(i)
        if len(ended) == 100:
            half_ended.set()

    tasks = [asyncio.create_task(follow(i)) for i in range(200)]
    await asyncio.sleep(0.05)
    assert ended == []
    for i in range(0, 200, 2):
        valid[i] = False
    async with asyncio.timeout(5):
        await half_ended.wait()
    assert sorted(ended) == list(range(0, 200, 2))
    stop.set()
    async with asyncio.timeout(5):
        await asyncio.gather(*tasks)
    assert len(ended) == 200
    await asyncio.sleep(0)
    assert [t for t in asyncio.all_tasks() if t is not asyncio.current_task()] == []


async def test_a_stream_yields_its_items_and_ends_with_them() -> None:
    async def three() -> AsyncIterator[int]:
        for i in range(3):
            yield i

    got = [i async for i in until_stopped(asyncio.Event(), three(), lambda: True)]
    assert got == [0, 1, 2]
    assert [i async for i in until_stopped(asyncio.Event(), three())] == [0, 1, 2]
    assert [i async for i in until_stopped(asyncio.Event(), three(), lambda: False)] == []
