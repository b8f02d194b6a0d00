"""Run a step every N seconds; a failing step is logged and the loop goes on."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from typing import Any

log = logging.getLogger(__name__)


async def every(interval_s: float, fn: Callable[[], Awaitable[Any]], name: str) -> None:
    while True:
        await asyncio.sleep(interval_s)
        try:
            await fn()
        except asyncio.CancelledError:
            raise
        except Exception:
            log.exception("periodic task %s failed", name)
