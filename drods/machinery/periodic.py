"""A periodic controller: one pass every resync period, and at once when woken.

The shape of every controller that is not driven key by key through a work queue (compaction,
monitoring maintenance, the descheduler's passes, failover, cleanup, …): ``step`` looks at the
whole state and acts, idempotently, so a pass missed or repeated does no harm. A failing pass is
logged and counted (`drods.machinery.metrics`) and the next one comes all the same; only a
cancellation stops the loop.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable
from typing import Any

from drods.machinery import metrics

log = logging.getLogger(__name__)


class Periodic:
    def __init__(self, name: str, step: Callable[[], Awaitable[Any]], interval_s: float, *,
                 wake: asyncio.Event | None = None, first_at_start: bool = False) -> None:
        """``step`` every ``interval_s`` (the resync period) and as soon as ``wake`` is set;
        the first pass at once when ``first_at_start``, else after one period."""
        self.name = name
        self.step = step
        self.interval_s = interval_s
        self.wake = wake
        self.first_at_start = first_at_start
        self.passes = 0  # completed passes, failed ones included

    async def run(self) -> None:
        if not self.first_at_start:
            await self._wait()
        while True:
            if self.wake is not None:
                self.wake.clear()  # a change during the pass wakes the next one
            await self.pass_once()
            await self._wait()

    async def pass_once(self) -> None:
        try:
            with metrics.reconcile(self.name):
                await self.step()
        except asyncio.CancelledError:
            raise
        except Exception:
            log.exception("periodic task %s failed", self.name)
        self.passes += 1

    async def _wait(self) -> None:
        if self.wake is None:
            await asyncio.sleep(self.interval_s)
            return
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(self.interval_s):
                await self.wake.wait()
