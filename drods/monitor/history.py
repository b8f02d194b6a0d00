"""Event history kept in the KV store: the failure log and the automatic-operations log (SPEC API9).

These are low-rate, must survive restarts and must be shared by every replica, so they live in
the store (not in the series file). Each entry is one key::

    /history/failures/<YYYYMMDD>/<time ns, 20 digits>-<id>
    /history/operations/<YYYYMMDD>/<time ns, 20 digits>-<id>

The day bucket lets a time-range query read only the days it covers (the store reads by prefix);
inside a day, keys sort by time. ``<id>`` is random, or deterministic when several replicas may
record the same fact (then the first write wins through ``expect_revision=0``).

Entry shape (shared with the scheduler, which appends unschedulable attempts the same way)::

    {"time": "2026-01-01T00:00:00.123Z",    # RFC 3339, UTC
     "kind": "ClusterNotReady",              # UpperCamel, see below
     "cluster": "aws-us-east",               # optional
     "binding": "default/web",               # optional
     "reason": "human text",
     "details": {…}}                         # free-form, JSON

Kinds written by monitoring: ``ClusterNotReady`` (Ready condition went False), ``StaleReports``
(no report for ``staleAfterSeconds``), ``ReportRejected`` (invalid, stale or out-of-order report;
at most one per cluster and code per minute), ``WaterLevelLimitBreached`` (water level crossed the
cluster's limit), ``SustainedAboveLimit`` (stayed above it for the sustained duration),
``CollectFailed`` (a pull collector could not read the cluster; at most one per minute),
``DomainEvent`` (an agent posted a critical domain event). The scheduler adds ``Unschedulable``.
Use `append` (or `HistoryLog.append`) rather than writing keys by hand.
"""

from __future__ import annotations

import json
import re
import secrets
import time
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from drods.monitor.report import iso
from drods.store import CasFailed, Store

DAY = 86_400

_ID_SAFE = re.compile(r"[^A-Za-z0-9._-]+")


def _day(ts: float) -> str:
    return datetime.fromtimestamp(ts, UTC).strftime("%Y%m%d")


def entry_key(prefix: str, ts: float, ident: str | None = None) -> str:
    """Time-sortable key for an entry at ``ts``; ``ident`` makes it deterministic (dedup)."""
    suffix = _ID_SAFE.sub("_", ident)[:120] if ident else secrets.token_hex(6)
    return f"{prefix}{_day(ts)}/{int(ts * 1e9):020d}-{suffix}"


def make_entry(kind: str, reason: str, *, ts: float, cluster: str | None = None, binding: str | None = None,
               details: Mapping[str, Any] | None = None) -> dict[str, Any]:
    e: dict[str, Any] = {"time": iso(ts), "kind": kind}
    if cluster is not None:
        e["cluster"] = cluster
    if binding is not None:
        e["binding"] = binding
    e["reason"] = reason
    e["details"] = dict(details or {})
    return e


async def append(store: Store, prefix: str, kind: str, reason: str, *, ts: float | None = None,
                 cluster: str | None = None, binding: str | None = None,
                 details: Mapping[str, Any] | None = None, dedup: str | None = None) -> bool:
    """Write one entry; with ``dedup`` the key is deterministic and a second write is a no-op.

    Returns False when a deduplicated entry already existed.
    """
    ts = time.time() if ts is None else ts
    key = entry_key(prefix, ts, dedup)
    value = json.dumps(make_entry(kind, reason, ts=ts, cluster=cluster, binding=binding, details=details),
                       separators=(",", ":")).encode()
    try:
        await store.put(key, value, expect_revision=0 if dedup else None)
    except CasFailed:
        return False
    return True


@dataclass(frozen=True, slots=True)
class Page:
    items: list[dict[str, Any]]
    truncated: bool


def _key_time(key: str) -> float | None:
    tail = key.rsplit("/", 1)[-1]
    digits = tail.split("-", 1)[0]
    return int(digits) / 1e9 if digits.isdigit() else None


class HistoryLog:
    """One log (failures or operations) under a prefix of the store."""

    def __init__(self, store: Store, prefix: str) -> None:
        self.store = store
        self.prefix = prefix

    async def append(self, kind: str, reason: str, **kw: Any) -> bool:
        return await append(self.store, self.prefix, kind, reason, **kw)

    async def query(self, start: float, end: float, max_entries: int, *, kind: str | None = None,
                    cluster: str | None = None) -> Page:
        """Entries with ``start <= time <= end``, newest first, at most ``max_entries``."""
        out: list[dict[str, Any]] = []
        first = datetime.fromtimestamp(start, UTC).date()
        day = datetime.fromtimestamp(end, UTC).date()
        while day >= first:
            kvs, _ = await self.store.range(f"{self.prefix}{day.strftime('%Y%m%d')}/")
            for kv in reversed(kvs):
                t = _key_time(kv.key)
                if t is None or t < start or t > end:
                    continue
                try:
                    entry = json.loads(kv.value)
                except ValueError:
                    continue
                if not isinstance(entry, dict):
                    continue
                if (kind and entry.get("kind") != kind) or (cluster and entry.get("cluster") != cluster):
                    continue
                if len(out) == max_entries:
                    return Page(out, True)
                out.append(entry)
            day -= timedelta(days=1)
        return Page(out, False)

    async def prune(self, older_than: float, batch: int = 500) -> int:
        """Delete entries older than ``older_than`` (whole day buckets first, then key by key)."""
        deleted = 0
        cutoff_day = _day(older_than)
        while True:
            kvs, _ = await self.store.range(self.prefix, limit=batch)
            if not kvs:
                return deleted
            progressed = False
            for kv in kvs:
                day = kv.key[len(self.prefix):].split("/", 1)[0]
                if day < cutoff_day:
                    deleted += await self.store.delete_prefix(f"{self.prefix}{day}/")
                    progressed = True
                    break
                t = _key_time(kv.key)
                if t is not None and t < older_than:
                    if await self.store.delete(kv.key) is not None:
                        deleted += 1
                    progressed = True
                else:
                    return deleted
            if not progressed:
                return deleted
