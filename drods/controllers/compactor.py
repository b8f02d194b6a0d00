"""Periodic store compaction: keeps watch history for a retention window, like etcd's
``--auto-compaction-mode=periodic``. Without it the SQLite revision log grows forever."""

from __future__ import annotations

import collections
import logging
import time

from drods.machinery.periodic import Periodic
from drods.store import Store

log = logging.getLogger(__name__)


class Compactor:
    def __init__(self, store: Store, *, retention_s: float = 600.0, interval_s: float = 60.0) -> None:
        self.store = store
        self.retention_s = retention_s
        self.interval_s = interval_s
        self._seen: collections.deque[tuple[float, int]] = collections.deque()
        self._compacted = 0

    async def tick(self, now: float | None = None) -> int | None:
        """Record the current revision; compact to the newest one older than the retention window."""
        now = time.monotonic() if now is None else now
        self._seen.append((now, await self.store.current_revision()))
        target = None
        while self._seen and self._seen[0][0] <= now - self.retention_s:
            target = self._seen.popleft()[1]
        if target is None or target <= self._compacted:
            return None
        await self.store.compact(target)
        self._compacted = target
        log.info("compacted store history up to revision %d", target)
        return target

    async def run(self) -> None:
        # a failed compaction is retried next interval
        await Periodic("compactor", self.tick, self.interval_s, first_at_start=True).run()
