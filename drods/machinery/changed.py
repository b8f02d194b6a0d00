"""Which keys a pass over a fleet-sized cache must look at: those changed since the last pass.

A controller that keeps one field of every cluster right (remedy actions, policy taints) used to look
at every cluster whenever any one changed. At 10,000 members each cluster's status is written every
few seconds, so those passes ran back to back over the whole fleet and held most of the event loop.
A pass now looks at the keys its watch saw change, at every key on its first pass, after
`everything` (a change that concerns them all: a new policy) and once per resync period — the same
level-triggered guarantee, at the cost of the changes.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable


class ChangedKeys:
    def __init__(self, resync_s: float, clock: Callable[[], float] = time.monotonic) -> None:
        self.resync_s = resync_s
        self.clock = clock
        self._changed: set[str] = set()
        self._all = True
        self._full_at: float | None = None

    def mark(self, key: str) -> None:
        self._changed.add(key)

    def everything(self) -> None:
        self._all = True

    def take(self, every_key: Callable[[], Iterable[str]]) -> list[str]:
        """The keys the next pass looks at (sorted), and forget them: a change during the pass is
        marked again and looked at by the next."""
        now = self.clock()
        if self._all or self._full_at is None or now - self._full_at >= self.resync_s:
            self._all, self._full_at = False, now
            self._changed.clear()
            return sorted(every_key())
        keys, self._changed = sorted(self._changed), set()
        return keys
