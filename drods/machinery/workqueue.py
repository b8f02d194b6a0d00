"""A deduplicating work queue with per-key exponential backoff (client-go's rate-limited queue).

A key is never handed to two workers at once; a key added while it is being processed is
processed again afterwards, once. That is what makes level-triggered reconcilers safe.

A key made ready wakes one waiting worker, not all of them: with the binding controller's 128
workers on one event, each add resumed 128 coroutines to hand out one key (a fifth of a pull-mode
control plane's time holding the interpreter lock went to that). Delayed keys come due on one timer
armed for the earliest of them.
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
        self._waiters: deque[asyncio.Future[None]] = deque()  # workers waiting for a key, oldest first
        self._timer: asyncio.TimerHandle | None = None  # wakes a waiter when the earliest delayed key is due
        self._timer_at = 0.0
        self._timer_loop: asyncio.AbstractEventLoop | None = None
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
            self._wake_one()

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
        self._arm()

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
            waiter: asyncio.Future[None] = asyncio.get_running_loop().create_future()
            self._waiters.append(waiter)
            self._arm()
            try:
                await waiter
            except asyncio.CancelledError:
                if waiter.done() and not waiter.cancelled():
                    self._wake_one()  # woken and cancelled at once: the key it was woken for is another's
                else:
                    with contextlib.suppress(ValueError):
                        self._waiters.remove(waiter)
                raise

    def done(self, key: K) -> None:
        self._processing.discard(key)
        if key in self._dirty:
            self._enqueue(key)
            self._wake_one()

    def shutdown(self) -> None:
        self._shutdown = True
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        while self._waiters:
            self._wake_one()

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
                    self._wake_one()

    def _enqueue(self, key: K, at: float | None = None) -> None:
        """Ready ``key``, waiting since ``at`` (now when None)."""
        self._queue.append(key)
        self._queued_at[key] = self._clock() if at is None else at

    def _wake_one(self) -> None:
        while self._waiters:
            waiter = self._waiters.popleft()
            if not waiter.done():
                waiter.set_result(None)
                return

    def _arm(self) -> None:
        """Keep the timer set for the earliest delayed key while anyone waits."""
        if not self._delayed or not self._waiters:
            return
        at, loop = self._delayed[0][0], self._waiters[-1].get_loop()
        if self._timer is not None:
            if self._timer_at <= at and self._timer_loop is loop:
                return
            self._timer.cancel()  # a later one, or one on a loop gone (a queue used by a later loop)
        # at least a millisecond: a clock that has not reached ``at`` (a test's) must not spin the loop
        delay = max(at - self._clock(), 0.001)
        self._timer, self._timer_at, self._timer_loop = loop.call_later(delay, self._due_now), at, loop

    def _due_now(self) -> None:
        self._timer = None
        self._promote_due()
        self._arm()
