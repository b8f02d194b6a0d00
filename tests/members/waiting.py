"""Waiting on a condition with a deadline, for the member tests' event-loop code."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable


async def wait_until(check: Callable[[], bool], seconds: float = 5.0, what: str = "") -> None:
    deadline = time.monotonic() + seconds
    while not check():
        assert time.monotonic() < deadline, f"not within {seconds}s: {what}" if what else "timed out"
        await asyncio.sleep(0.01)
