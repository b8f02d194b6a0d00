"""Long-lived responses that end when the server stops (`ApiContext.stopping`)."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from typing import TypeVar, cast

T = TypeVar("T")


async def until_stopped(stop: asyncio.Event, items: AsyncIterator[T]) -> AsyncIterator[T]:
    """The items of ``items`` until ``stop`` is set (then the stream just ends, like a watch timeout)."""
    stopper: asyncio.Future[object] = asyncio.ensure_future(stop.wait())
    try:
        while True:
            nxt: asyncio.Future[object] = asyncio.ensure_future(anext(items))  # type: ignore[arg-type]
            done, _ = await asyncio.wait((nxt, stopper), return_when=asyncio.FIRST_COMPLETED)
            if nxt not in done:
                nxt.cancel()
                with contextlib.suppress(asyncio.CancelledError, StopAsyncIteration):
                    await nxt
                return
            try:
                item = cast(T, nxt.result())
            except StopAsyncIteration:
                return
            yield item
    finally:
        stopper.cancel()
