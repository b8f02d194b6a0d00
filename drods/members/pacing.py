"""How many calls one member is sent at once: a window that follows how fast it answers.

A member's client allows ``concurrency`` calls in flight at most. A fixed number overruns a member
that is slower than that many calls need — a small cluster's API server, or members sharing a host:
every call past what it can answer within the read timeout times out, is retried, and the member's
whole backlog stalls (runs of 10–15 s without an apply in a cold start over 100 simulated members).
So the window is TCP's congestion window: it starts at two calls and doubles with each window's worth
of answers (slow start: a burst of work for a fresh client — a control plane starting over a full
store — ramps up instead of arriving at once); it halves when a call times out or the member answers
429/503 (slower than what it is sent, or it says so), and from there grows by one for every window's
worth of answers, back up to ``concurrency``.
"""

from __future__ import annotations

import asyncio
from types import TracebackType

import urllib3
from kubernetes.client.exceptions import ApiException

OVERLOADED_STATUS = frozenset({429, 503})


def overloaded(exc: BaseException) -> bool:
    """A failure that says the member is answering slower than it is asked (not that it is gone)."""
    if isinstance(exc, ApiException):
        return int(exc.status or 0) in OVERLOADED_STATUS
    return isinstance(exc, urllib3.exceptions.TimeoutError | TimeoutError)


class CallWindow:
    """Calls in flight to one member (``async with``), at most ``limit``: slow start up to
    ``threshold``, then additive increase; multiplicative decrease; between 1 and ``ceiling``."""

    def __init__(self, ceiling: int) -> None:
        self.ceiling = ceiling
        self.limit = min(2.0, float(ceiling))
        self.threshold = float(ceiling)  # slow start below it
        self.in_flight = 0
        self._room = asyncio.Condition()

    async def __aenter__(self) -> CallWindow:
        async with self._room:
            await self._room.wait_for(lambda: self.in_flight < int(self.limit))
            self.in_flight += 1
        return self

    async def __aexit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                        tb: TracebackType | None) -> None:
        async with self._room:
            self.in_flight -= 1
            self._room.notify_all()

    def answered(self) -> None:
        """One answer: one call more below the threshold (the window doubles each window's worth of
        answers), one more per window's worth above it."""
        step = 1.0 if self.limit < self.threshold else 1.0 / self.limit
        self.limit = min(float(self.ceiling), self.limit + step)

    def overloaded(self) -> None:
        """A timeout, a 429 or a 503: half the window (never below one call), and no slow start
        above that any more."""
        self.limit = self.threshold = max(1.0, self.limit / 2.0)
