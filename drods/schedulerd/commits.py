"""Group commit of decided bindings: what is decided while a status write is in flight goes in the
next one, so transactions carry many decisions whenever writes take time.

Decisions are cheap next to a store round trip (an etcd transaction waits for a quorum's fsync), and
bindings often arrive one watch event at a time, so a scheduler that wrote each burst of decisions at
once would write one binding per transaction. Here a write starts at once only when none is in
flight; otherwise decisions wait for the running one and go together (the database technique of the
same name). Another write may start alongside only when a full batch waits, up to ``max_inflight``;
when those are all busy and a full batch waits, the decision loop waits too (back-pressure).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine
from typing import Generic, TypeVar

from drods.machinery.tasks import stop_tasks

T = TypeVar("T")


class GroupCommit(Generic[T]):
    """Batches ``T`` for ``write`` (which must handle its own errors: a failed write is its business)."""

    def __init__(self, write: Callable[[list[T]], Coroutine[object, object, None]], *, batch_size: int,
                 max_inflight: int) -> None:
        self._write = write
        self.batch_size = batch_size
        self.max_inflight = max_inflight
        self._pending: list[T] = []
        self._inflight: dict[asyncio.Task[None], list[T]] = {}
        self._room = asyncio.Event()
        self._closed = False

    @property
    def pending(self) -> int:
        """Items waiting for a write to start."""
        return len(self._pending)

    @property
    def writing(self) -> int:
        """Writes in flight."""
        return len(self._inflight)

    def add(self, item: T) -> None:
        """Queue ``item``; it is written by the next write that starts (see `flush`)."""
        self._pending.append(item)

    async def put(self, item: T) -> None:
        """`add`, and when that fills a batch, start its write if allowed and wait for room."""
        self.add(item)
        if len(self._pending) >= self.batch_size:
            self.flush()
            await self.wait_for_room()

    def flush(self) -> None:
        """Start the writes the rule allows: one when none is in flight, more only for full batches."""
        while (self._pending and not self._closed and len(self._inflight) < self.max_inflight
               and (not self._inflight or len(self._pending) >= self.batch_size)):
            batch = self._pending[: self.batch_size]
            del self._pending[: self.batch_size]
            task = asyncio.create_task(self._write(batch))
            self._inflight[task] = batch
            task.add_done_callback(self._finished)

    def _finished(self, task: asyncio.Task[None]) -> None:
        self._inflight.pop(task, None)
        self.flush()  # what was decided meanwhile goes now
        self._room.set()

    async def wait_for_room(self) -> None:
        """Return when a full batch no longer waits behind ``max_inflight`` busy writes."""
        while len(self._pending) >= self.batch_size and len(self._inflight) >= self.max_inflight:
            self._room.clear()
            await self._room.wait()

    async def abandon(self) -> list[T]:
        """Stop: cancel the writes in flight and return every item not known to be written (theirs
        and the waiting ones); nothing starts afterwards."""
        self._closed = True
        running = dict(self._inflight)
        await stop_tasks(list(running))
        items = [item for task, batch in running.items()
                 if not task.done() or task.cancelled() or task.exception() is not None for item in batch]
        items.extend(self._pending)
        self._pending.clear()
        return items
