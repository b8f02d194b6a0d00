"""The event loop a long-running DRO-DS process runs on.

uvloop where it is installed (``uvicorn[standard]`` brings it on Linux and macOS), asyncio's own
loop elsewhere — the loop ``drods serve`` gets from uvicorn. It matters most to a process serving
many TLS connections: a ``drods sim fleet`` of 100 members spent most of its event loop in asyncio's
pure-Python TLS transport during a cold start.
"""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine
from typing import Any, TypeVar

T = TypeVar("T")


def run(main: Coroutine[Any, Any, T]) -> T:
    """``asyncio.run(main)`` on uvloop when it is there."""
    try:
        import uvloop
    except ImportError:  # pragma: no cover - uvloop comes with uvicorn[standard] on this platform
        return asyncio.run(main)
    with asyncio.Runner(loop_factory=uvloop.new_event_loop) as runner:
        return runner.run(main)
