"""One etcd watch on a gRPC stream of its own.

aetcd multiplexes every watch of a client over one stream and pairs each "created" answer with
whichever creation is waiting *when the answer arrives*. A creation abandoned while its answer is on
the way (our per-call timeout under load, a cancelled task) therefore hands that answer to the next
creation on the stream: the next watch then receives the abandoned watch's key range — from the
abandoned start revision — and its own watch, answered later, is cancelled as expired. An informer
fed by it silently misses every change of its prefix (a scaled Deployment whose Binding never
follows). etcd's own Go client does not share the flaw: it matches answers to requests.

Here each watch opens its own stream (HTTP/2 streams on the member's one channel, so a few dozen
cost nothing) and closing the watch ends the stream, so an abandoned creation's answer has no one
to reach.
"""

from __future__ import annotations

import asyncio
from typing import Any

import aetcd
import aetcd.watcher
from aetcd import rpc


class WatchStream:
    """A watch of ``[key, range_end)`` from ``start_revision`` with previous values, on its own stream."""

    def __init__(self, client: aetcd.Client) -> None:
        self._watcher = aetcd.watcher.Watcher(rpc.WatchStub(client.channel), timeout=None,
                                              metadata=client.metadata)
        # what the stream delivers: an event, an error ending the watch, or None (the stream was closed)
        self._events: asyncio.Queue[Any] = asyncio.Queue()

    async def open(self, key: bytes, range_end: bytes, start_revision: int | None) -> None:
        """Create the watch; raises what etcd answered (e.g. ``RevisionCompactedError``)."""
        await self._watcher.add_callback(key, self._events.put, range_end=range_end,
                                         start_revision=start_revision, prev_kv=True)

    async def next(self) -> Any:
        """The next event (an ``aetcd.rtypes.Event``); raises the error that ended the stream, or
        ``StopAsyncIteration`` once it was closed."""
        item = await self._events.get()
        if item is None:
            self._events.put_nowait(None)  # closed for good: every later call says so too
            raise StopAsyncIteration
        if isinstance(item, BaseException):
            self._events.put_nowait(item)
            raise item
        return item

    async def close(self) -> None:
        """End the stream (and with it any creation still unanswered)."""
        await self._watcher.shutdown()
