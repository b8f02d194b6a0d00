"""SIGTERM and SIGINT for a sim or fleet process: the first starts the stop; later ones (a
process-group kill, then ``drods dev`` stopping its members) neither cut the stop short nor turn
the clean exit after it into a death by signal."""

from __future__ import annotations

import asyncio
import signal

STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT)


def on_stop_signal(loop: asyncio.AbstractEventLoop) -> asyncio.Event:
    """An event set by the first stop signal; the handlers stay installed while the process stops."""
    stop = asyncio.Event()
    for sig in STOP_SIGNALS:
        loop.add_signal_handler(sig, stop.set)
    return stop


def ignore_stop_signals(loop: asyncio.AbstractEventLoop) -> None:
    """Once stopped, the loop's handlers give way to ignoring the signals, not to their default:
    asyncio restores the default when the loop closes, and a signal arriving while the interpreter
    then exits killed a process that had stopped cleanly (exit status -15). Blocked while swapped,
    so none lands in between."""
    signal.pthread_sigmask(signal.SIG_BLOCK, STOP_SIGNALS)
    try:
        for sig in STOP_SIGNALS:
            loop.remove_signal_handler(sig)
            signal.signal(sig, signal.SIG_IGN)
    finally:
        signal.pthread_sigmask(signal.SIG_UNBLOCK, STOP_SIGNALS)
