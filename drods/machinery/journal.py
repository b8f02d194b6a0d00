"""A journal: time-keyed records under a store prefix — the one design behind the audit log, the
schedule history, the failure log and the operations log.

Keys sort by time and nest by day, hour, minute and second::

    <prefix><YYYYMMDD>/<HH>/<MM>/<SS>/<time ns, 20 digits>-<suffix>

One key holds a *group* of entries (``{"entries": [...]}``, oldest first, each with an RFC 3339
``"time"``): records written together in the same second (a scheduler's batch of decisions) cost
one key, not one each. ``suffix`` is random, or derived from a caller's identity when several
replicas may record the same fact (then the first write wins through ``expect_revision=0``).

The store reads only by prefix (ascending, with a limit), so a newest-first query walks the
buckets from the window's end down to its start, probing each with ``limit=1`` and skipping empty
ones, and reads only the one-second buckets it returns entries from: a query costs a few hundred
small reads at most, however long the journal is.

Retention is either a store lease (`lease`: entries attached to a lease of TTL ``retention`` that
is replaced every ``retention / 4``, so they live between 3/4 and 1 × ``retention`` with no
pruning job — for high-volume journals) or `prune` (whole old days first, then key by key — for
journals whose retention is days and follows an injectable clock), or neither (the audit log).
"""

from __future__ import annotations

import itertools
import re
import secrets
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from drods.machinery.lease_pool import LeasePool
from drods.model import jsondoc
from drods.model.timefmt import parse_rfc3339, rfc3339_ms
from drods.store import CasFailed, Put, Store

_LEVELS = (("%Y%m%d", timedelta(days=1)), ("%H", timedelta(hours=1)), ("%M", timedelta(minutes=1)),
           ("%S", timedelta(seconds=1)))
_ID_SAFE = re.compile(r"[^A-Za-z0-9._-]+")
_seq = itertools.count()

Entry = dict[str, Any]


@dataclass(frozen=True, slots=True)
class Page:
    items: list[Entry]  # newest first
    truncated: bool  # more entries matched than were returned


def entry_key(prefix: str, ts: float, ident: str | None = None) -> str:
    """The key of a group starting at ``ts`` (to the millisecond); ``ident`` makes it deterministic
    (dedup), else a per-process sequence keeps one process's keys of one millisecond in order."""
    ms = round(ts * 1000)
    dt = datetime.fromtimestamp(ms / 1000, UTC)
    suffix = _ID_SAFE.sub("_", ident)[:120] if ident else f"{next(_seq) % 1_000_000:06d}{secrets.token_hex(3)}"
    return f"{prefix}{dt.strftime('%Y%m%d/%H/%M/%S')}/{ms * 1_000_000:020d}-{suffix}"


def _encode(entries: list[Entry]) -> bytes:
    return jsondoc.dumps({"entries": entries})


class Journal:
    def __init__(self, store: Store, prefix: str, *, retention_s: float | None = None,
                 clock: Callable[[], float] = time.time) -> None:
        self.store = store
        self.prefix = prefix
        self.retention_s = None if retention_s is None else max(4.0, float(retention_s))
        self.clock = clock
        # store leases run on wall time, whatever the journal's clock
        self._leases = None if self.retention_s is None else \
            LeasePool(store, int(self.retention_s), time.time, renew_after=0.25)

    async def lease(self) -> int:
        """The lease new entries are attached to (0 = none: the journal has no lease retention)."""
        return 0 if self._leases is None else await self._leases.get()

    def puts(self, records: Iterable[tuple[float, Entry]], lease: int = 0) -> list[Put]:
        """The store writes for ``records`` (time, entry) written together — e.g. inside the
        transaction whose change they explain: one key per second they fall in. An entry without
        a ``time`` gets one."""
        out: list[Put] = []
        group: list[Entry] = []
        first = 0.0
        for ts, rec in sorted(records, key=lambda r: r[0]):
            if group and round(ts * 1000) // 1000 != round(first * 1000) // 1000:
                out.append(Put(entry_key(self.prefix, first), _encode(group), lease))
                group = []
            if not group:
                first = ts
            group.append(rec if "time" in rec else {"time": rfc3339_ms(ts), **rec})
        if group:
            out.append(Put(entry_key(self.prefix, first), _encode(group), lease))
        return out

    async def append(self, entry: Mapping[str, Any], *, ts: float | None = None, dedup: str | None = None) -> bool:
        """Write one entry (its ``time`` is set from ``ts``); with ``dedup`` the key is deterministic
        and a second write of the same fact is a no-op (returns False)."""
        ts = self.clock() if ts is None else ts
        rec = {"time": rfc3339_ms(ts), **{k: v for k, v in entry.items() if k != "time"}}
        try:
            await self.store.put(entry_key(self.prefix, ts, dedup), _encode([rec]),
                                 expect_revision=0 if dedup else None, lease=await self.lease())
        except CasFailed:
            return False
        return True

    async def query(self, start: float, end: float, max_entries: int,
                    match: Callable[[Entry], bool] | None = None) -> Page:
        """Entries with ``start <= time <= end`` that ``match``, newest first, at most ``max_entries``."""
        out: list[Entry] = []
        # Nothing is written more than a day ahead of either clock: the walk need not start later.
        end = min(end, max(time.time(), self.clock()) + 86_400.0)
        lo = datetime.fromtimestamp(max(start, 0.0), UTC)
        hi = datetime.fromtimestamp(max(end, 0.0), UTC)
        full = await self._walk(self.prefix, 0, None, lo, hi, (start, end, max_entries, match), out)
        return Page(out, full)

    async def _walk(self, prefix: str, level: int, parent_start: datetime | None, lo: datetime, hi: datetime,
                    want: tuple[float, float, int, Callable[[Entry], bool] | None], out: list[Entry]) -> bool:
        """Visit the buckets of ``level`` under ``prefix`` newest first; True once ``out`` is full.

        The oldest key under ``prefix`` (one ``limit=1`` read) both proves the bucket non-empty
        and bounds how far back the walk needs to go."""
        first, _ = await self.store.range(prefix, limit=1)
        if not first:
            return False
        oldest = first[0].key[len(prefix):].split("/", 1)[0]
        fmt, step = _LEVELS[level]
        cur = _floor(hi, level)
        while cur + step > lo and (parent_start is None or cur >= parent_start):
            name = cur.strftime(fmt)
            if name < oldest:
                break
            p = f"{prefix}{name}/"
            if level == len(_LEVELS) - 1:
                if await self._read_leaf(p, want, out):
                    return True
            elif await self._walk(p, level + 1, cur, lo, min(hi, cur + step - timedelta(microseconds=1)), want, out):
                return True
            cur -= step
        return False

    async def _read_leaf(self, prefix: str, want: tuple[float, float, int, Callable[[Entry], bool] | None],
                         out: list[Entry]) -> bool:
        start, end, max_entries, match = want
        kvs, _ = await self.store.range(prefix)
        for kv in reversed(kvs):
            try:
                group = jsondoc.loads(kv.value).get("entries") or []
            except (ValueError, AttributeError):
                continue
            for entry in reversed(group):
                t = parse_rfc3339(entry.get("time")) if isinstance(entry, dict) else None
                if t is None or t < start or t > end or (match is not None and not match(entry)):
                    continue
                if len(out) == max_entries:
                    return True
                out.append(entry)
        return False

    async def prune(self, older_than: float, batch: int = 500) -> int:
        """Delete the keys of groups older than ``older_than`` (whole days first); returns how many."""
        deleted = 0
        cutoff = datetime.fromtimestamp(older_than, UTC).strftime("%Y%m%d")
        while True:
            kvs, _ = await self.store.range(self.prefix, limit=batch)
            if not kvs:
                return deleted
            for kv in kvs:
                day = kv.key[len(self.prefix):].split("/", 1)[0]
                if day < cutoff:
                    deleted += await self.store.delete_prefix(f"{self.prefix}{day}/")
                    break
                digits = kv.key.rsplit("/", 1)[-1].split("-", 1)[0]
                if not digits.isdigit() or int(digits) / 1e9 >= older_than:
                    return deleted
                if await self.store.delete(kv.key) is not None:
                    deleted += 1


def _floor(dt: datetime, level: int) -> datetime:
    if level == 0:
        return dt.replace(hour=0, minute=0, second=0, microsecond=0)
    if level == 1:
        return dt.replace(minute=0, second=0, microsecond=0)
    if level == 2:
        return dt.replace(second=0, microsecond=0)
    return dt.replace(microsecond=0)
