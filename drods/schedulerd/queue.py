"""Scheduling queue: priority then FIFO, per-key exponential backoff, retry on cluster events.

Shaped like kube-scheduler's: three places an entry can be

* **active** — a heap ordered by (-priority, arrival); ``get()`` pops from here;
* **backoff** — entries waiting out their per-key backoff (initial × 2^(attempts-1), capped);
  they become active when it expires;
* **unschedulable** — entries whose last attempt found no cluster; they stay parked until a
  cluster event (added, recovered, capacity freed) moves them to backoff/active, or until
  ``max_unschedulable`` seconds pass (a safety net for missed events).

Keys are deduplicated: adding a queued key updates it in place; adding a key that is being
processed marks it dirty and it is re-queued by ``done()``. ``get()`` is awaitable; the clock is
injectable so tests need not sleep.
"""

from __future__ import annotations

import asyncio
import contextlib
import heapq
import itertools
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Literal

Where = Literal["active", "backoff", "unschedulable", "processing"]


@dataclass(slots=True)
class QueueEntry:
    key: str
    item: Any
    priority: int = 0
    attempts: int = 0
    added_at: float = 0.0
    seq: int = 0
    ready_at: float = 0.0
    parked_at: float = 0.0
    where: Where = "active"
    generation: int = field(default=0, repr=False)


class SchedulingQueue:
    def __init__(
        self,
        *,
        clock: Callable[[], float] = time.monotonic,
        initial_backoff: float = 1.0,
        max_backoff: float = 10.0,
        max_unschedulable: float = 300.0,
    ) -> None:
        self._clock = clock
        self.initial_backoff = initial_backoff
        self.max_backoff = max_backoff
        self.max_unschedulable = max_unschedulable
        self._entries: dict[str, QueueEntry] = {}
        self._active: list[tuple[int, int, int, str]] = []
        self._backoff: list[tuple[float, int, int, str]] = []
        # parked (unschedulable) entries by the time their safety-net retry is due; a key set so
        # neither a pop nor a cluster event walks every queued entry
        self._parked: list[tuple[float, int, int, str]] = []
        self._parked_keys: set[str] = set()
        self._dirty: dict[str, tuple[Any, int]] = {}
        self._seq = itertools.count()
        self._wakeup: asyncio.Event | None = None

    # ------------------------------------------------------------------ internals
    def _event(self) -> asyncio.Event:
        if self._wakeup is None:
            self._wakeup = asyncio.Event()
        return self._wakeup

    def _notify(self) -> None:
        if self._wakeup is not None:
            self._wakeup.set()

    def _unpark(self, e: QueueEntry) -> None:
        if e.where == "unschedulable":
            self._parked_keys.discard(e.key)

    def _push_active(self, e: QueueEntry) -> None:
        self._unpark(e)
        e.where = "active"
        e.generation += 1
        heapq.heappush(self._active, (-e.priority, e.seq, e.generation, e.key))
        self._notify()

    def _push_backoff(self, e: QueueEntry) -> None:
        self._unpark(e)
        e.where = "backoff"
        e.generation += 1
        heapq.heappush(self._backoff, (e.ready_at, e.seq, e.generation, e.key))
        self._notify()

    def backoff_for(self, attempts: int) -> float:
        if attempts <= 0:
            return 0.0
        return float(min(self.max_backoff, self.initial_backoff * (2 ** (attempts - 1))))

    def flush(self) -> None:
        """Move expired backoff entries and over-parked unschedulable entries to active."""
        now = self._clock()
        while self._backoff and self._backoff[0][0] <= now:
            _, _, gen, key = heapq.heappop(self._backoff)
            e = self._entries.get(key)
            if e is not None and e.where == "backoff" and e.generation == gen:
                self._push_active(e)
        while self._parked and self._parked[0][0] <= now:
            _, _, gen, key = heapq.heappop(self._parked)
            e = self._entries.get(key)
            if e is not None and e.where == "unschedulable" and e.generation == gen:
                self._push_active(e)

    # ------------------------------------------------------------------ producer side
    def add(self, key: str, item: Any = None, priority: int = 0) -> None:
        """Queue ``key`` (dedup). An update of a parked/backing-off entry makes it active at once."""
        e = self._entries.get(key)
        if e is None:
            e = QueueEntry(key, item, priority, added_at=self._clock(), seq=next(self._seq))
            self._entries[key] = e
            self._push_active(e)
            return
        if e.where == "processing":
            self._dirty[key] = (item, priority)
            return
        changed_priority = e.priority != priority
        e.item = item
        e.priority = priority
        if e.where != "active" or changed_priority:
            self._push_active(e)

    def delete(self, key: str) -> None:
        self._entries.pop(key, None)
        self._dirty.pop(key, None)
        self._parked_keys.discard(key)

    def on_cluster_event(self, kind: str = "changed") -> int:
        """A cluster was added, recovered or freed capacity: retry the unschedulable entries.

        Entries still inside their backoff window go to backoff, the rest to active. Returns how
        many entries moved.
        """
        now = self._clock()
        moved = 0
        for key in sorted(self._parked_keys, key=lambda k: self._entries[k].seq):
            e = self._entries[key]
            moved += 1
            if e.ready_at > now:
                self._push_backoff(e)
            else:
                self._push_active(e)
        return moved

    # ------------------------------------------------------------------ consumer side
    def pop_nowait(self) -> QueueEntry | None:
        self.flush()
        while self._active:
            _, _, gen, key = heapq.heappop(self._active)
            e = self._entries.get(key)
            if e is None or e.where != "active" or e.generation != gen:
                continue
            e.where = "processing"
            e.attempts += 1
            return e
        return None

    def _next_deadline(self) -> float | None:
        """Earliest backoff expiry or parked safety-net retry (stale heap heads only make it early)."""
        heads = [h[0][0] for h in (self._backoff, self._parked) if h]
        return min(heads) if heads else None

    async def get(self, poll: float = 1.0) -> QueueEntry:
        """Wait for the next entry. ``poll`` bounds each wait so an injected clock is honoured."""
        ev = self._event()
        while True:
            e = self.pop_nowait()
            if e is not None:
                return e
            ev.clear()
            deadline = self._next_deadline()
            timeout = poll if deadline is None else max(0.0, min(poll, deadline - self._clock()))
            # asyncio.timeout, not wait_for: before Python 3.12 wait_for may swallow a cancellation
            # that arrives just as the event is set, and the consumer would then never stop.
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(timeout):
                    await ev.wait()

    def done(self, key: str, *, success: bool = True) -> None:
        """Processing finished. Success resets the backoff; a dirty key is re-queued at once."""
        e = self._entries.get(key)
        if e is None:
            return
        dirty = self._dirty.pop(key, None)
        if dirty is not None:
            e.item, e.priority = dirty
            if success:
                e.attempts = 0
            self._push_active(e)
            return
        if success:
            del self._entries[key]
        else:
            self.retry(key)

    def unschedulable(self, key: str) -> None:
        """The attempt found no cluster: park until a cluster event, with exponential backoff."""
        e = self._entries.get(key)
        if e is None:
            return
        now = self._clock()
        e.ready_at = now + self.backoff_for(e.attempts)
        e.parked_at = now
        dirty = self._dirty.pop(key, None)
        if dirty is not None:
            e.item, e.priority = dirty
            self._push_active(e)
            return
        e.where = "unschedulable"
        e.generation += 1
        self._parked_keys.add(key)
        heapq.heappush(self._parked, (now + self.max_unschedulable, e.seq, e.generation, key))

    def retry(self, key: str) -> None:
        """The attempt failed for another reason (e.g. a store conflict): back off, then retry."""
        e = self._entries.get(key)
        if e is None:
            return
        e.ready_at = self._clock() + self.backoff_for(e.attempts)
        self._dirty.pop(key, None)
        self._push_backoff(e)

    # ------------------------------------------------------------------ introspection
    def __len__(self) -> int:
        return len(self._entries)

    def where(self, key: str) -> Where | None:
        e = self._entries.get(key)
        return e.where if e is not None else None

    def counts(self) -> dict[str, int]:
        c: dict[str, int] = {"active": 0, "backoff": 0, "unschedulable": 0, "processing": 0}
        for e in self._entries.values():
            c[e.where] += 1
        return c
