"""Long-lived responses that end when the server stops (`ApiContext.stopping`)."""

from __future__ import annotations

import asyncio
import contextlib
import weakref
from collections.abc import AsyncIterator, Callable
from typing import Any, TypeVar, cast

T = TypeVar("T")


ALIVE_EVERY_SECONDS = 1.0  # how soon a stream notices its caller's token was revoked or expired


class _AliveSweep:
    """Every `ALIVE_EVERY_SECONDS`, asks each open stream's ``alive`` and ends those it says no to: one
    timer for all of an event loop's streams. (A wait with a one-second timeout in each stream woke every
    idle watch once a second — 600 of them in a member serving a control plane's watches.)"""

    def __init__(self) -> None:
        self.streams: dict[asyncio.Future[None], Callable[[], bool]] = {}
        self.task: asyncio.Task[None] | None = None

    def add(self, ended: asyncio.Future[None], alive: Callable[[], bool]) -> None:
        self.streams[ended] = alive
        if self.task is None or self.task.done():
            self.task = asyncio.ensure_future(self._run())

    def leave(self, ended: asyncio.Future[None]) -> None:
        self.streams.pop(ended, None)
        ended.cancel()
        if not self.streams and self.task is not None:
            self.task.cancel()  # none left: no timer outlives the streams (nor the loop they ran on)
            self.task = None

    async def _run(self) -> None:
        while self.streams:
            await asyncio.sleep(ALIVE_EVERY_SECONDS)
            for ended, alive in list(self.streams.items()):
                if not ended.done() and not alive():
                    ended.set_result(None)


_sweeps: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, _AliveSweep] = weakref.WeakKeyDictionary()


async def until_stopped(stop: asyncio.Event, items: AsyncIterator[T],
                        alive: Callable[[], bool] | None = None) -> AsyncIterator[T]:
    """The items of ``items`` until ``stop`` is set or ``alive()`` (looked at every
    `ALIVE_EVERY_SECONDS`) says the caller may no longer read: then the stream just ends, like a
    watch timeout, and the client's next request meets the refusal."""
    if alive is not None and not alive():
        return
    stopper: asyncio.Future[Any] = asyncio.ensure_future(stop.wait())
    ended: asyncio.Future[None] | None = None
    sweep: _AliveSweep | None = None
    if alive is not None:
        loop = asyncio.get_running_loop()
        sweep = _sweeps.get(loop) or _sweeps.setdefault(loop, _AliveSweep())
        ended = loop.create_future()
        sweep.add(ended, alive)
    waits: tuple[asyncio.Future[Any], ...] = (stopper,) if ended is None else (stopper, ended)
    read: asyncio.Future[Any] | None = None
    try:
        while True:
            read = asyncio.ensure_future(anext(items))
            done, _ = await asyncio.wait((read, *waits), return_when=asyncio.FIRST_COMPLETED)
            if stopper in done or (ended is not None and ended in done):
                return
            try:
                item = cast(T, read.result())
            except StopAsyncIteration:
                return
            yield item
    finally:
        stopper.cancel()
        if sweep is not None and ended is not None:
            sweep.leave(ended)
        if read is not None:
            # Settle the pending read before the caller closes ``items`` (an async generator cannot
            # be closed while another task is still inside it).
            read.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await read
