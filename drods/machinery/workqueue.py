"""A deduplicating work queue with per-key exponential backoff (client-go's rate-limited queue).

A key is never handed to two workers at once; a key added while it is being processed is
processed again afterwards, once. That is what makes level-triggered reconcilers safe.
"""

from __future__ import annotations

import asyncio
import contextlib
import heapq
import time
from collections import deque
from collections.abc import Callable, Hashable, Sized
from typing import Generic, TypeVar

K = TypeVar("K", bound=Hashable)


class WorkQueue(Generic[K]):
    def __init__(self, *, base_delay: float = 0.05, max_delay: float = 30.0,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self._queue: deque[K] = deque()
        self._dirty: set[K] = set()
        self._processing: set[K] = set()
        self._failures: dict[K, int] = {}
        self._delayed: list[tuple[float, int, K]] = []
        self._due: dict[K, float] = {}  # when each delayed key is due: the earliest of its adds
        self._queued_at: dict[K, float] = {}  # when each key in the queue was put there
        self._seq = 0
        self._ready = asyncio.Event()
        self._base, self._max = base_delay, max_delay
        self._clock = clock
        self._shutdown = False

    def __len__(self) -> int:
        return len(self._queue) + len(self._due)

    @property
    def ready(self) -> Sized:
        """The keys ready for a worker (client-go's depth: not the delayed ones, nor those in process)."""
        return self._queue

    def add(self, key: K) -> None:
        if self._shutdown or key in self._dirty:
            return
        self._dirty.add(key)
        if key not in self._processing:
            self._enqueue(key)
        self._wake()

    def add_after(self, key: K, delay: float) -> None:
        """Add ``key`` once ``delay`` has passed; adds while it waits keep the earliest time, so a burst
        of them brings it back once (client-go's delaying queue)."""
        if delay <= 0:
            self.add(key)
            return
        at = self._clock() + delay
        if self._due.get(key, at + 1.0) <= at:
            return
        self._due[key] = at
        self._seq += 1
        heapq.heappush(self._delayed, (at, self._seq, key))
        self._wake()

    def add_rate_limited(self, key: K) -> float:
        n = self._failures.get(key, 0)
        self._failures[key] = n + 1
        delay = min(self._base * (2**n), self._max)
        self.add_after(key, delay)
        return delay

    def forget(self, key: K) -> None:
        self._failures.pop(key, None)

    def failures(self, key: K) -> int:
        return self._failures.get(key, 0)

    async def get(self) -> K:
        """Wait for the next key; raises asyncio.CancelledError on shutdown."""
        return (await self.get_waited())[0]

    async def get_waited(self) -> tuple[K, float]:
        """The next key and the seconds it waited in the queue (from the add that made it ready, or
        from when a delayed add came due) — controller-runtime's queue duration."""
        while True:
            self._promote_due()
            if self._queue:
                key = self._queue.popleft()
                self._processing.add(key)
                self._dirty.discard(key)
                return key, max(self._clock() - self._queued_at.pop(key), 0.0)
            if self._shutdown:
                raise asyncio.CancelledError
            timeout = max(self._delayed[0][0] - self._clock(), 0.0) if self._delayed else None
            self._ready.clear()
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(timeout):  # not wait_for: it may swallow a cancel before 3.12
                    await self._ready.wait()

    def done(self, key: K) -> None:
        self._processing.discard(key)
        if key in self._dirty:
            self._enqueue(key)
            self._wake()

    def shutdown(self) -> None:
        self._shutdown = True
        self._wake()

    def _promote_due(self) -> None:
        now = self._clock()
        while self._delayed and self._delayed[0][0] <= now:
            at, _, key = heapq.heappop(self._delayed)
            if self._due.get(key) != at:
                continue  # an earlier add of the key was due first
            del self._due[key]
            if key not in self._dirty:
                self._dirty.add(key)
                if key not in self._processing:
                    self._enqueue(key, at)

    def _enqueue(self, key: K, at: float | None = None) -> None:
        """Ready ``key``, waiting since ``at`` (now when None)."""
        self._queue.append(key)
        self._queued_at[key] = self._clock() if at is None else at

    def _wake(self) -> None:
        self._ready.set()
