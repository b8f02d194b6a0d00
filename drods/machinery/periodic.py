"""A periodic controller: one pass every resync period, and at once when woken.

The shape of every controller that is not driven key by key through a work queue (compaction,
monitoring maintenance, the descheduler's passes, failover, cleanup, …): ``step`` looks at the
whole state and acts, idempotently, so a pass missed or repeated does no harm. A failing pass is
logged and counted (`drods.machinery.metrics`) and the next one comes all the same; only a
cancellation stops the loop — unless the controller declares ``restart_on_failure``: then a failed
pass, counted all the same, ends the runnable with its exception and the manager restarts it (a
controller whose new run re-evaluates everything from scratch, e.g. the steering controller).
A pass refused with `LeadershipLost` ends the loop whatever it declares: the term is over, and
passes that can only fail again (10,000 per-cluster probe loops, each logging a traceback every
interval) would starve the event loop that must campaign again.

A controller driven only by changes has no resync period (``interval_s=None``: a pass only when
woken); ``coalesce_s`` lets a burst of changes settle before the pass; a controller that knows
better when its next pass is due gives its own ``wait``. A pass over the whole state whose cost
grows with it (every Binding) declares ``pace``: the period is then stretched to at least ``pace``
times the last pass's time, so the pass never takes more than 1/``pace`` of the process however
large the state grows.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Awaitable, Callable
from typing import Any

from drods.machinery import metrics
from drods.machinery.fence import LeadershipLost
from drods.store import Unavailable

log = logging.getLogger(__name__)


class Periodic:
    def __init__(self, name: str, step: Callable[[], Awaitable[Any]], interval_s: float | None, *,
                 wake: asyncio.Event | None = None, first_at_start: bool = False,
                 restart_on_failure: bool = False, coalesce_s: float = 0.0,
                 wait: Callable[[], Awaitable[Any]] | None = None, pace: float = 0.0) -> None:
        """``step`` every ``interval_s`` (the resync period; None: none) and as soon as ``wake`` is
        set, ``coalesce_s`` after the wake-up; the first pass at once when ``first_at_start``, else
        after one wait. ``wait``, if given, replaces that wait (period, wake-up and coalescing).
        ``restart_on_failure``: a failed pass raises out of `run` (the manager restarts it).
        ``pace``: the period is at least this many times the last pass's (wall) time."""
        if interval_s is None and wake is None and wait is None:
            raise ValueError(f"periodic {name}: neither a period, a wake-up nor a wait")
        self.name = name
        self.step = step
        self.interval_s = interval_s
        self.wake = wake
        self.first_at_start = first_at_start
        self.restart_on_failure = restart_on_failure
        self.coalesce_s = coalesce_s
        self.custom_wait = wait
        self.pace = pace
        self.took = 0.0  # the last pass's wall time
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
        started = time.monotonic()
        try:
            with metrics.reconcile(self.name):
                await self.step()
        except (asyncio.CancelledError, LeadershipLost):
            raise
        except Exception as e:
            self.passes += 1
            if self.restart_on_failure:
                raise
            if isinstance(e, Unavailable):  # the store away: a line, not a traceback per pass
                log.warning("periodic task %s: the store is unavailable (%s)", self.name, e)
            else:
                log.exception("periodic task %s failed", self.name)
            return
        finally:
            self.took = time.monotonic() - started
        self.passes += 1

    async def _wait(self) -> None:
        if self.custom_wait is not None:
            await self.custom_wait()
            return
        period = self.interval_s if self.interval_s is None else max(self.interval_s, self.pace * self.took)
        if self.wake is None:
            assert period is not None
            await asyncio.sleep(period)
        else:
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(period):
                    await self.wake.wait()
        if self.coalesce_s:
            await asyncio.sleep(self.coalesce_s)
