"""Small waiting helpers: every wait in the store tests has a deadline, none sleeps and hopes."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable

from drods.store import WatchEvent

DEADLINE = 10.0


async def next_event(it: AsyncIterator[WatchEvent], within: float = DEADLINE) -> WatchEvent:
    return await asyncio.wait_for(anext(it), within)


async def take(it: AsyncIterator[WatchEvent], n: int, within: float = DEADLINE) -> list[WatchEvent]:
    """The next ``n`` events, or TimeoutError if they do not all arrive within ``within`` seconds."""

    async def collect() -> list[WatchEvent]:
        return [await anext(it) for _ in range(n)]

    return await asyncio.wait_for(collect(), within)


async def wait_for_condition(
    check: Callable[[], Awaitable[bool]], within: float = DEADLINE, interval: float = 0.05
) -> None:
    """Poll ``check`` until it is true; fail with TimeoutError after ``within`` seconds."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + within
    while not await check():
        if loop.time() > deadline:
            raise TimeoutError(f"condition not met within {within}s")
        await asyncio.sleep(interval)
