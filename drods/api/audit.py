"""Append-only audit log of every change made through the API (SEC3), kept in the store."""

from __future__ import annotations

import json
import time
import uuid
from dataclasses import asdict, dataclass
from datetime import UTC, datetime

from drods.model.keys import AUDIT_PREFIX
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
    def __init__(self, store: Store) -> None:
        self.store = store

    async def append(self, entry: AuditEntry) -> None:
        # Keys sort by time so a time-window query is a range scan in order.
        key = f"{AUDIT_PREFIX}{time.time_ns():020d}-{uuid.uuid4().hex[:8]}"
        await self.store.put(key, json.dumps(asdict(entry)).encode())

    async def query(
        self, start: datetime | None = None, end: datetime | None = None, limit: int = 1000
    ) -> list[dict[str, object]]:
        kvs, _ = await self.store.range(AUDIT_PREFIX)
        lo = int(start.timestamp() * 1e9) if start else 0
        hi = int(end.timestamp() * 1e9) if end else 1 << 64
        out: list[dict[str, object]] = []
        for kv in kvs:
            ts = int(kv.key[len(AUDIT_PREFIX):].split("-", 1)[0])
            if lo <= ts <= hi:
                out.append(json.loads(kv.value))
        return out[-limit:]


def utc_now_iso() -> str:
    return datetime.now(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")
