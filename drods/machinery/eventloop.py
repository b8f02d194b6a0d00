"""The event loop a long-running DRO-DS process runs on.

uvloop where it is installed (``uvicorn[standard]`` brings it on Linux and macOS), asyncio's own
loop elsewhere — the loop ``drods serve`` gets from uvicorn. It matters most to a process serving
many TLS connections: a ``drods sim fleet`` of 100 members spent most of its event loop in asyncio's
pure-Python TLS transport during a cold start.

The control plane's event loop shares the interpreter lock with worker threads (the official
Kubernetes client's calls to members, the store's writer). Each time the loop's thread lets the lock
go in a C call (zlib, SQLite, a socket), a runnable worker keeps it until the switch interval ends:
5 ms by default, paid again at the next release. `favour_event_loop` shortens that wait.
"""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Coroutine
from typing import Any, TypeVar

T = TypeVar("T")

# The interpreter-lock switch interval of a control-plane process: what the event loop's thread waits,
# at most, for the lock back from a worker thread. `drods serve` at 50 operations a second over 100 push
# members, four rounds alternated: p99 under 1 s in three with 1 ms, in one with 5 ms (docs/performance.md).
LOOP_SWITCH_INTERVAL = 0.001


def favour_event_loop(interval: float = LOOP_SWITCH_INTERVAL) -> None:
    """Worker threads hand the interpreter lock back to the event loop's thread after ``interval``
    seconds instead of the default 5 ms: the loop serves every request and watch of the process, the
    workers only their own call."""
    sys.setswitchinterval(interval)


def run(main: Coroutine[Any, Any, T]) -> T:
    """``asyncio.run(main)`` on uvloop when it is there."""
    try:
        import uvloop
    except ImportError:  # pragma: no cover - uvloop comes with uvicorn[standard] on this platform
        return asyncio.run(main)
    with asyncio.Runner(loop_factory=uvloop.new_event_loop) as runner:
        return runner.run(main)
