"""Long-lived responses that end when the server stops (`ApiContext.stopping`)."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from typing import Any, TypeVar, cast

T = TypeVar("T")


async def until_stopped(stop: asyncio.Event, items: AsyncIterator[T]) -> AsyncIterator[T]:
    """The items of ``items`` until ``stop`` is set (then the stream just ends, like a watch timeout)."""
    stopper: asyncio.Future[Any] = asyncio.ensure_future(stop.wait())
    read: asyncio.Future[Any] | None = None
    try:
        while True:
            read = asyncio.ensure_future(anext(items))
            done, _ = await asyncio.wait((read, stopper), return_when=asyncio.FIRST_COMPLETED)
            if read not in done:
                return
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
