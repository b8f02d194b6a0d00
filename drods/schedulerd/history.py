"""Schedule history (API9): one store entry per decision, explaining it; bounded by lease TTL.

Keys are time-sortable and nested by day, hour, minute and second::

    /history/schedules/<YYYYMMDD>/<HH>/<MM>/<SS>/<time ns, 20 digits>-<sequence><random>

One key holds the decisions of one status transaction that fall in the same second, oldest first
(``{"entries": [...]}``): a burst of decisions costs a few history writes, not one per decision.

The store reads only by prefix (ascending, with a limit), so a newest-first query walks the
buckets from ``endTime`` down to ``startTime``, probing each with ``limit=1`` and skipping empty
ones, and reads only the one-second buckets it returns entries from. A query therefore costs a
few hundred small reads at most, however much history there is.

Retention: every entry is attached to a store lease granted with TTL ``retention`` and replaced
every ``retention / 4`` — entries live between 3/4 and 1 × ``retention`` (default one hour), on
every backend, with no pruning job. Keep it short on etcd: its backend quota (2 GiB by default)
must hold an entry (≈1–2 KB) for every decision in that window.

An entry (``decision_record``)::

    {"time", "binding", "generation", "scheduleType", "scheduler", "profile", "trigger"?,
     "result": {"phase", "placement": [{cluster, replicas}], "requested", "placed", "partial", "message"},
     "candidates": {"total", "feasible"},
     "filters": {"reasonCounts": {reason: n}, "reasons": {cluster: reason} (≤ 50), "reasonsOmitted"},
     "scores": {plugin: {cluster: score}} for the clusters that received replicas, plus "total",
     "weights": {plugin: weight this cycle}, "baseWeights": {plugin: profile weight},
     "adjuster": {"mode": "spread"|"pack"|"blend", "spread": σ, "fleetWaterLevel", "surge"},
     "division", "affinityTerm", "analysis": {storageTier, networkIdentifier, compute}, "timingsMs"}
"""

from __future__ import annotations

import itertools
import json
import secrets
import time
from collections.abc import Mapping
from datetime import UTC, datetime, timedelta
from typing import Any

from drods.model.keys import SCHEDULES_PREFIX
from drods.model.timefmt import parse_rfc3339, rfc3339_ms
from drods.scheduler.framework import ScheduleResult
from drods.schedulerd.records import placement_json
from drods.store import Put, Store

MAX_HISTORY_REASONS = 50
_LEVELS = (("%Y%m%d", timedelta(days=1)), ("%H", timedelta(hours=1)), ("%M", timedelta(minutes=1)),
           ("%S", timedelta(seconds=1)))


_seq = itertools.count()


def entry_key(ts: float) -> str:
    """A key in the bucket of ``ts`` (its first entry's time, to the millisecond); a per-process
    sequence keeps one process's keys of the same millisecond in order."""
    ms = round(ts * 1000)
    dt = datetime.fromtimestamp(ms / 1000, UTC)
    suffix = f"{next(_seq) % 2**32:08x}{secrets.token_hex(3)}"
    return f"{SCHEDULES_PREFIX}{dt:%Y%m%d/%H/%M/%S}/{ms * 1_000_000:020d}-{suffix}"


def adjuster_mode(spread: float) -> str:
    return "spread" if spread >= 1.0 else "pack" if spread <= 0.0 else "blend"


def decision_record(result: ScheduleResult, *, binding: str, generation: int, schedule_type: str, ts: float,
                    scheduler: str, profile: str, base_weights: Mapping[str, float],
                    trigger: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """The explanation of one decision (shape in the module docstring)."""
    shown, total = result.reasons_sample(MAX_HISTORY_REASONS)
    placed = result.placed
    rec: dict[str, Any] = {
        "time": rfc3339_ms(ts),
        "binding": binding,
        "generation": generation,
        "scheduleType": schedule_type,
        "scheduler": scheduler,
        "profile": profile,
        "result": {"phase": result.phase, "placement": placement_json(result.placement),
                   "requested": result.requested, "placed": placed, "partial": result.partial,
                   "message": result.message},
        "candidates": {"total": result.clusters, "feasible": result.feasible},
        "filters": {"reasonCounts": result.reason_counts(), "reasons": shown,
                    "reasonsOmitted": max(0, total - len(shown))},
        "scores": result.scores,
        "weights": {k: round(v, 4) for k, v in result.weights.items()},
        "baseWeights": dict(base_weights),
        "adjuster": {"mode": adjuster_mode(result.spread) if result.weights else None,
                     "spread": round(result.spread, 4), "fleetWaterLevel": round(result.fleet_water_level, 4),
                     "surge": round(result.surge, 4)},
        "division": result.division,
        "affinityTerm": result.affinity_term,
        "analysis": result.analysis,
        "timingsMs": {k: round(v, 4) for k, v in result.timings_ms.items()},
    }
    if trigger:
        rec["trigger"] = dict(trigger)
    return rec


class ScheduleHistory:
    """Writes entries under a rotating lease and answers time-range queries newest first."""

    def __init__(self, store: Store, retention_s: float = 3600.0, clock: Any = time.time) -> None:
        self.store = store
        self.retention_s = max(4.0, float(retention_s))
        self.clock = clock
        self._lease = 0
        self._lease_granted = 0.0

    async def lease(self) -> int:
        now = self.clock()
        if not self._lease or now - self._lease_granted >= self.retention_s / 4:
            lease = await self.store.grant_lease(int(self.retention_s))
            self._lease, self._lease_granted = lease.id, now
        return self._lease

    @staticmethod
    def puts(records: list[tuple[float, dict[str, Any]]], lease: int) -> list[Put]:
        """The store writes for decisions made together (the scheduler puts them in the same
        transaction as the statuses they explain): one key per second they fall in."""
        out: list[Put] = []
        group: list[dict[str, Any]] = []
        first = 0.0
        for ts, rec in sorted(records, key=lambda r: r[0]):
            if group and round(ts * 1000) // 1000 != round(first * 1000) // 1000:
                out.append(Put(entry_key(first), _encode_group(group), lease))
                group = []
            if not group:
                first = ts
            group.append(rec)
        if group:
            out.append(Put(entry_key(first), _encode_group(group), lease))
        return out

    async def query(self, start: float, end: float, max_entries: int,
                    binding: str | None = None) -> tuple[list[dict[str, Any]], bool]:
        """Entries with ``start <= time <= end``, newest first; (items, truncated)."""
        out: list[dict[str, Any]] = []
        lo = datetime.fromtimestamp(max(start, 0.0), UTC)
        hi = datetime.fromtimestamp(max(end, 0.0), UTC)
        full = await self._walk(SCHEDULES_PREFIX, 0, None, lo, hi, (start, end, max_entries, binding), out)
        return out, full

    async def _walk(self, prefix: str, level: int, parent_start: datetime | None, lo: datetime, hi: datetime,
                    want: tuple[float, float, int, str | None], out: list[dict[str, Any]]) -> bool:
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

    async def _read_leaf(self, prefix: str, want: tuple[float, float, int, str | None],
                         out: list[dict[str, Any]]) -> bool:
        start, end, max_entries, binding = want
        kvs, _ = await self.store.range(prefix)
        for kv in reversed(kvs):
            try:
                group = json.loads(kv.value).get("entries") or []
            except (ValueError, AttributeError):
                continue
            for entry in reversed(group):
                t = parse_rfc3339(entry.get("time"))
                if t is None or t < start or t > end:
                    continue
                if binding is not None and entry.get("binding") != binding:
                    continue
                if len(out) == max_entries:
                    return True
                out.append(entry)
        return False


def _floor(dt: datetime, level: int) -> datetime:
    if level < 0:
        return dt
    if level == 0:
        return dt.replace(hour=0, minute=0, second=0, microsecond=0)
    if level == 1:
        return dt.replace(minute=0, second=0, microsecond=0)
    if level == 2:
        return dt.replace(second=0, microsecond=0)
    return dt.replace(microsecond=0)


def _encode_group(entries: list[dict[str, Any]]) -> bytes:
    return json.dumps({"entries": entries}, separators=(",", ":")).encode()
