"""Long-lived responses that end when the server stops (`ApiContext.stopping`)."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Callable
from typing import Any, TypeVar, cast

T = TypeVar("T")


ALIVE_EVERY_SECONDS = 1.0  # how soon a stream notices its caller's token was revoked or expired


async def until_stopped(stop: asyncio.Event, items: AsyncIterator[T],
                        alive: Callable[[], bool] | None = None) -> AsyncIterator[T]:
    """The items of ``items`` until ``stop`` is set or ``alive()`` (looked at every
    `ALIVE_EVERY_SECONDS`) says the caller may no longer read: then the stream just ends, like a
    watch timeout, and the client's next request meets the refusal."""
    stopper: asyncio.Future[Any] = asyncio.ensure_future(stop.wait())
    read: asyncio.Future[Any] | None = None
    try:
        while True:
            if alive is not None and not alive():
                return
            if read is None or read.done():
                read = asyncio.ensure_future(anext(items))
            done, _ = await asyncio.wait((read, stopper), return_when=asyncio.FIRST_COMPLETED,
                                         timeout=None if alive is None else ALIVE_EVERY_SECONDS)
            if stopper in done:
                return
            if read not in done:
                continue
            try:
                item = cast(T, read.result())
            except StopAsyncIteration:
                return
            yield item
    finally:
        stopper.cancel()
        if read is not None:
            # Settle the pending read before the caller closes ``items`` (an async generator cannot
            # be closed while another task is still inside it).
            read.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await read
