"""Workers that drain a work queue into an idempotent ``reconcile(key)`` (controller-runtime's shape);
each reconcile is counted and timed, and each key's wait in the queue timed (`drods.machinery.metrics`)."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Hashable

from drods.machinery import metrics
from drods.machinery.fence import WritesRefused
from drods.machinery.workqueue import WorkQueue
from drods.store import Unavailable

log = logging.getLogger(__name__)

# reconcile returns None when done, or seconds after which to look again.
Reconcile = Callable[[Hashable], Awaitable[float | None]]


class Controller:
    def __init__(self, name: str, reconcile: Reconcile, *, workers: int = 4,
                 queue: WorkQueue[Hashable] | None = None) -> None:
        self.name = name
        self.reconcile = reconcile
        self.workers = workers
        self.queue: WorkQueue[Hashable] = queue or WorkQueue()

    async def run(self) -> None:
        tasks = [asyncio.create_task(self._worker(), name=f"{self.name}-{i}") for i in range(self.workers)]
        try:
            with metrics.queue_depth(self.name, self.queue.ready):
                await asyncio.gather(*tasks)
        finally:
            self.queue.shutdown()
            for t in tasks:
                t.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)

    async def _worker(self) -> None:
        while True:
            key, waited = await self.queue.get_waited()
            metrics.queued(self.name, waited)
            try:
                with metrics.reconcile(self.name):
                    again = await self.reconcile(key)
            except asyncio.CancelledError:
                raise
            except Unavailable as e:  # the store away: a line, not a traceback per key and retry
                delay = self.queue.add_rate_limited(key)
                log.warning("%s: reconcile %s: the store is unavailable (%s); retry in %.2fs", self.name, key, e,
                            delay)
            except WritesRefused as e:  # every key of the term meets it at once: a line each, no traceback
                delay = self.queue.add_rate_limited(key)
                log.warning("%s: reconcile %s: %s; retry in %.2fs", self.name, key, e, delay)
            except Exception:
                delay = self.queue.add_rate_limited(key)
                log.exception("%s: reconcile %s failed; retry in %.2fs", self.name, key, delay)
            else:
                self.queue.forget(key)
                if again is not None:
                    self.queue.add_after(key, again)
            finally:
                self.queue.done(key)
            # The queue hands out a ready key without suspending, and a reconcile with nothing to
            # write may not suspend either: without this turn, 100,000 such keys would hold the
            # event loop for seconds and the process's lease keep-alives would miss their TTL.
            await asyncio.sleep(0)
