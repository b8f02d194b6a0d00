"""Stopping tasks for sure: on Python 3.11 a cancellation that races with an inner completion (e.g. in
``asyncio.wait_for``) can be swallowed, and a task that ignores its one ``cancel()`` would hold a
server's shutdown forever. So cancel, wait briefly, and cancel again what is still running."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterable
from typing import Any

log = logging.getLogger(__name__)


async def stop_tasks(tasks: Iterable[asyncio.Future[Any]], *, interval: float = 0.2,
                     attempts: int = 50) -> None:
    pending = {t for t in tasks if not t.done()}
    for _ in range(attempts):
        if not pending:
            return
        for t in pending:
            t.cancel()
        _, pending = await asyncio.wait(pending, timeout=interval)
    if pending:
        log.warning("%d task(s) did not stop: %s", len(pending), [getattr(t, "get_name", lambda: "?")()
                                                                  for t in pending])


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
