"""SIGTERM and SIGINT for a sim or fleet process: the first starts the stop; later ones (a
process-group kill, then ``drods dev`` stopping its members) neither cut the stop short nor turn
the clean exit after it into a death by signal."""

from __future__ import annotations

import asyncio
import signal
import types

STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT)


def on_stop_signal(loop: asyncio.AbstractEventLoop) -> asyncio.Event:
    """An event set by the first stop signal; the handlers stay installed while the process stops.

    Plain ``signal.signal`` handlers, not the loop's: removing a loop's handler (and closing the
    loop) restores the signal's default for a moment, and a signal then landing on any thread
    killed a process that had stopped cleanly (exit status -15). A plain handler is swapped for
    ``SIG_IGN`` in one step, process-wide."""
    stop = asyncio.Event()

    def _on_signal(_signum: int, _frame: types.FrameType | None) -> None:
        # runs in the main thread between bytecodes; the loop may be asleep in its selector
        loop.call_soon_threadsafe(stop.set)

    for sig in STOP_SIGNALS:
        signal.signal(sig, _on_signal)
    return stop


def ignore_stop_signals() -> None:
    """Once stopped, further stop signals are ignored, never given their default."""
    for sig in STOP_SIGNALS:
        signal.signal(sig, signal.SIG_IGN)
