"""Stopping tasks for sure, running a group of them, and long loops that let the others run.

Before Python 3.12 ``asyncio.wait_for`` (used inside store watches) swallows a cancellation that
arrives just as its awaitable completes — e.g. when a store write wakes every watch at the moment
of shutdown — and the task runs on; a task that ignores its one ``cancel()`` would hold a server's
shutdown forever. So cancel, wait briefly, and cancel again what is still running.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable
from typing import Any, TypeVar

from drods.machinery.fence import LeadershipLost

log = logging.getLogger(__name__)

T = TypeVar("T")

YIELD_EVERY = 1000  # items a loop over a fleet-sized cache handles between two yields to the event loop


async def yielding(items: Iterable[T], every: int = YIELD_EVERY) -> AsyncIterator[T]:
    """``items``, yielding to the event loop every ``every`` of them. A loop over 100,000 Bindings or
    200,000 Works without a yield held the loop past the leases' TTL: every component of the process
    lost its lease at start and began again."""
    for i, item in enumerate(items):
        if i % every == every - 1:
            await asyncio.sleep(0)
        yield item


async def stop_tasks(tasks: Iterable[asyncio.Future[Any]], *, interval: float = 0.2, attempts: int = 50) -> None:
    """Cancel and wait, repeating the cancellation; finish even if the caller is cancelled meanwhile
    (its cancellation is re-raised afterwards), so nested clean-ups complete and nothing is left
    using a store that is about to be closed. What a task ended with is the owner's to have read (a
    per-item loop that ended on `LeadershipLost` as the term ended): it is not logged again as
    "never retrieved"."""
    tasks = list(tasks)
    pending = {t for t in tasks if not t.done()}
    interrupted = False
    for _ in range(attempts):
        if not pending:
            break
        for t in pending:
            t.cancel()
        try:
            _, pending = await asyncio.wait(pending, timeout=interval)
        except asyncio.CancelledError:
            interrupted = True
    else:
        if pending:
            log.warning("%d task(s) did not stop: %s", len(pending),
                        [getattr(t, "get_name", lambda: "?")() for t in pending])
    for t in tasks:
        if t.done() and not t.cancelled() and (error := t.exception()) is not None \
                and not isinstance(error, LeadershipLost):  # the term ended: expected
            log.warning("task %s ended with %r", getattr(t, "get_name", lambda: "?")(), error)
    if interrupted:
        raise asyncio.CancelledError


def raise_ended(tasks: Iterable[asyncio.Future[Any]]) -> None:
    """Re-raise the exception a task of a per-item group (one loop per cluster) ended with, so the
    group's owner ends too: a loop that stopped on `LeadershipLost` means the owner's term is over."""
    for t in tasks:
        if t.done() and not t.cancelled() and (error := t.exception()) is not None:
            raise error


async def run_all(*coros: object) -> None:
    """Run coroutines as tasks until the first one fails or all end; stop the others for sure."""
    tasks = [asyncio.ensure_future(c) for c in coros]  # type: ignore[call-overload]
    try:
        done, _ = await asyncio.wait(tasks, return_when=asyncio.FIRST_EXCEPTION)
        for t in done:
            if not t.cancelled() and t.exception() is not None:
                raise t.exception()  # type: ignore[misc]
    finally:
        await stop_tasks(tasks)


async def each_bounded(items: Iterable[T], act: Callable[[T], Awaitable[object]], limit: int) -> None:
    """``act`` on every item, at most ``limit`` at once: ``limit`` workers share one iterator, so a
    100,000-item batch holds ``limit`` tasks, not one task per item. The first failure stops the rest
    and is raised (as `run_all`)."""
    it = iter(items)

    async def worker() -> None:
        for item in it:
            await act(item)

    await run_all(*(worker() for _ in range(max(1, limit))))
