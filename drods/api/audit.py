"""Append-only audit log of every change made through the API (SEC3), kept in the store."""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass
from datetime import UTC, datetime

from drods.machinery.journal import Journal
from drods.model.keys import AUDIT_PREFIX
from drods.model.timefmt import parse_rfc3339
from drods.store import Store


@dataclass(frozen=True, slots=True)
class AuditEntry:
    time: str
    subject: str
    role: str
    verb: str
    path: str
    object: str
    result: int
    message: str = ""


class AuditLog:
    """A journal under ``/audit/``, kept (no retention)."""

    def __init__(self, store: Store) -> None:
        self.journal = Journal(store, AUDIT_PREFIX)

    async def append(self, entry: AuditEntry) -> None:
        await self.journal.append(asdict(entry), ts=parse_rfc3339(entry.time))

    async def query(
        self, start: datetime | None = None, end: datetime | None = None, limit: int = 1000
    ) -> list[dict[str, object]]:
        """The newest ``limit`` entries of the window, oldest first."""
        lo = start.timestamp() if start else 0.0
        hi = end.timestamp() if end else time.time() + 86_400.0
        page = await self.journal.query(lo, hi, limit)
        return list(reversed(page.items))


def utc_now_iso() -> str:
    return datetime.now(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")
