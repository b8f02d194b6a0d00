"""Metric history: an SQLite time-series file with downsampling tiers, and a Prometheus reader.

History is what forecasting (SPEC F6) learns from and what API9-style history views read.
It lives in its own SQLite file, not in the main KV store: it is append-heavy, lossy by
design (downsampled, expired) and must never slow down or bloat the store that holds the
control plane's state.

Layout: one ``samples`` table keyed ``(step, sid, t)`` (WITHOUT ROWID, so the key *is* the
row); ``step`` 0 holds raw samples, other steps hold weighted averages (``v`` mean, ``n``
sample count, so re-averaging coarser tiers stays exact). Times are integer epoch seconds;
two raw samples of one series in the same second keep the later one.

Queries stitch tiers: each tier answers the time range for which it is the finest one still
complete, so a query never double counts and never sees a hole at a tier boundary.
"""

from __future__ import annotations

import asyncio
import math
import sqlite3
import string
import threading
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol, TypeVar

import httpx

from drods.monitor import report as r
from drods.monitor.report import NormalisedStatus

T = TypeVar("T")
Point = tuple[float, float]
Sample = tuple[str, str, float, float]  # (cluster, metric, epoch seconds, value)


class SeriesReader(Protocol):
    """Anything that answers a range query: the local store (async wrapper) or Prometheus."""

    async def query(self, cluster: str, metric: str, start: float, end: float, step: float) -> list[Point]: ...


@dataclass(frozen=True, slots=True)
class Tier:
    """``step_s`` 0 = raw samples; ``keep_s`` = how long the tier's rows are retained."""

    step_s: int
    keep_s: int


DAY = 86_400
DEFAULT_TIERS: tuple[Tier, ...] = (Tier(0, DAY), Tier(60, 7 * DAY), Tier(3600, 90 * DAY))

_SCHEMA = """
CREATE TABLE IF NOT EXISTS series (
    id INTEGER PRIMARY KEY,
    cluster TEXT NOT NULL,
    metric TEXT NOT NULL,
    UNIQUE (cluster, metric)
);
CREATE TABLE IF NOT EXISTS samples (
    step INTEGER NOT NULL,
    sid INTEGER NOT NULL,
    t INTEGER NOT NULL,
    v REAL NOT NULL,
    n INTEGER NOT NULL DEFAULT 1,
    PRIMARY KEY (step, sid, t)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value REAL NOT NULL);
"""


def _align(t: float, step: int) -> int:
    return int(math.floor(t / step) * step)


class SeriesStore:
    """Synchronous store; thread-safe through one lock (SQLite serialises writers anyway).

    ``clock`` decides the tier boundaries at query and maintenance time (inject it in tests).
    ``grace_s`` is how late a raw sample may arrive and still be rolled up: keep it >= the
    normaliser's ``max_age_s``.
    """

    def __init__(
        self,
        path: str | Path,
        tiers: Sequence[Tier] = DEFAULT_TIERS,
        *,
        clock: Callable[[], float] = time.time,
        grace_s: int = 300,
    ) -> None:
        tiers = tuple(tiers)
        if not tiers or tiers[0].step_s != 0:
            raise ValueError("the first tier must be the raw tier (step_s=0)")
        for a, b in zip(tiers[1:], tiers[2:], strict=False):
            if b.step_s % a.step_s:
                raise ValueError("each tier's step must be a multiple of the previous one's")
        self.tiers = tiers
        self.clock = clock
        self.grace_s = grace_s
        self.path = str(path)
        self._lock = threading.Lock()
        self._db = sqlite3.connect(self.path, check_same_thread=False, isolation_level=None)
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.execute("PRAGMA synchronous=NORMAL")
        self._db.executescript(_SCHEMA)
        self._sid: dict[tuple[str, str], int] = {}
        self._wm: dict[int, float] = {}
        self._read_at = -math.inf
        self._reread()

    def _reread(self) -> None:
        """The series as the file has them now, at most once a second: another process over the same
        file (an API replica beside the controllers that collect) adds series."""
        now = self.clock()
        if abs(now - self._read_at) < 1.0:
            return
        self._read_at = now
        self._sid.update({(c, m): i for i, c, m in self._db.execute("SELECT id, cluster, metric FROM series")})
        self._reread_watermarks()

    def _reread_watermarks(self) -> None:
        """How far each tier was rolled up, by whichever process did it."""
        rows = self._db.execute("SELECT key, value FROM meta WHERE key LIKE 'wm:%'")
        self._wm.update({int(k[3:]): v for k, v in rows})

    def _series_id(self, cluster: str, metric: str) -> int | None:
        sid = self._sid.get((cluster, metric))
        if sid is None:
            self._reread()
            sid = self._sid.get((cluster, metric))
        return sid

    # -- writing ------------------------------------------------------------------------------

    def _sids(self, keys: Iterable[tuple[str, str]]) -> None:
        missing = [k for k in set(keys) if k not in self._sid]
        if missing:
            self._db.executemany("INSERT OR IGNORE INTO series (cluster, metric) VALUES (?, ?)", missing)
            for k in missing:
                row = self._db.execute("SELECT id FROM series WHERE cluster = ? AND metric = ?", k).fetchone()
                self._sid[k] = row[0]

    def append(self, samples: Iterable[Sample]) -> int:
        """Insert raw samples in one transaction (one executemany); returns the count."""
        batch = [s for s in samples if math.isfinite(s[3])]
        if not batch:
            return 0
        with self._lock:
            self._reread_watermarks()
            rolled = sorted(((step, wm) for step, wm in self._wm.items() if step > 0), reverse=True)
            first_wm = min((wm for _, wm in rolled), default=-math.inf)
            self._db.execute("BEGIN")
            try:
                self._sids((c, m) for c, m, _, _ in batch)
                sid = self._sid
                self._db.executemany(
                    "INSERT OR REPLACE INTO samples (step, sid, t, v, n) VALUES (0, ?, ?, ?, 1)",
                    [(sid[(c, m)], int(t), v) for c, m, t, v in batch if t >= first_wm],
                )
                for c, m, t, v in batch:
                    if t < first_wm:
                        self._late(sid[(c, m)], int(t), v, rolled)
                self._db.execute("COMMIT")
            except BaseException:
                self._db.execute("ROLLBACK")
                raise
        return len(batch)

    def _late(self, sid: int, t: int, v: float, rolled: list[tuple[int, float]]) -> None:
        """A sample older than a tier's rollup (a backfilled report): the rollups already past it take it
        into their bucket's mean, as the rollup would have — read back from them, it is not lost
        behind a watermark until the raw tier's retention drops it. A second sample at the same second
        changes nothing (the raw row is kept, as the first one counted)."""
        if self._db.execute("INSERT OR IGNORE INTO samples (step, sid, t, v, n) VALUES (0, ?, ?, ?, 1)",
                            (sid, t, v)).rowcount != 1:
            return
        for step, wm in rolled:
            if t < wm:
                self._db.execute(
                    "INSERT INTO samples (step, sid, t, v, n) VALUES (?, ?, ?, ?, 1) "
                    "ON CONFLICT (step, sid, t) DO UPDATE SET v = (v * n + excluded.v) / (n + 1), n = n + 1",
                    (step, sid, _align(t, step), v))

    @staticmethod
    def samples_of(status: NormalisedStatus) -> list[Sample]:
        """The raw samples a status contributes: every known value, sampled at the report time
        (like a scrape of a gauge), so step averages of slow-changing values stay right."""
        c, t = status.cluster, status.ts
        return [(c, name, t, m.value) for name, m in status.values.items()]

    # -- reading ------------------------------------------------------------------------------

    def _boundaries(self, now: float) -> list[float]:
        """Lower time bound from which each tier is used (tier i covers [b_i, b_{i-1}))."""
        out: list[float] = []
        upper = math.inf
        for i, tier in enumerate(self.tiers):
            if i + 1 < len(self.tiers):
                nxt = self.tiers[i + 1]
                wm = self._wm.get(nxt.step_s)
                b = -math.inf if wm is None else _align(min(wm, now - tier.keep_s), nxt.step_s)
            else:
                b = -math.inf
            upper = min(upper, b)
            out.append(upper)
        return out

    def query(self, cluster: str, metric: str, start: float, end: float, step: float) -> list[Point]:
        """Averages over epoch-aligned buckets of ``step`` seconds for samples in [start, end].

        Returns ``(bucket start, mean)`` for non-empty buckets only, oldest first.
        """
        if step <= 0:
            raise ValueError("step must be positive")
        with self._lock:
            sid = self._series_id(cluster, metric)
            if sid is None:
                return []
            self._reread_watermarks()
            bounds = self._boundaries(self.clock())
            parts: list[str] = []
            args: list[float | int] = []
            upper = math.inf
            for tier, lower in zip(self.tiers, bounds, strict=True):
                lo = max(start, lower)
                if lo <= end and lo < upper:
                    parts.append(
                        "SELECT t, v, n FROM samples WHERE step = ? AND sid = ? AND t >= ? AND t <= ? AND t < ?"
                    )
                    args += [tier.step_s, sid, lo, end, upper]
                upper = lower
            if not parts:
                return []
            sql = (
                "SELECT (t - (t % ?)) AS b, SUM(v * n) / SUM(n) FROM ("
                + " UNION ALL ".join(parts)
                + ") GROUP BY b ORDER BY b"
            )
            istep = max(int(round(step)), 1)
            return [(float(b), float(v)) for b, v in self._db.execute(sql, [istep, *args])]

    def latest(self, cluster: str, metric: str) -> Point | None:
        with self._lock:
            sid = self._series_id(cluster, metric)
            if sid is None:
                return None
            row = self._db.execute(
                "SELECT t, v FROM samples WHERE step = 0 AND sid = ? ORDER BY t DESC LIMIT 1", (sid,)
            ).fetchone()
        return None if row is None else (float(row[0]), float(row[1]))

    def series(self) -> list[tuple[str, str]]:
        with self._lock:
            self._reread()
            return sorted(self._sid)

    # -- maintenance --------------------------------------------------------------------------

    def downsample(self, now: float | None = None) -> int:
        """Roll complete buckets of each tier up into the next; returns rows written."""
        now = self.clock() if now is None else now
        written = 0
        with self._lock:
            for i in range(1, len(self.tiers)):
                src, dst = self.tiers[i - 1].step_s, self.tiers[i].step_s
                end = _align(now - self.grace_s, dst)
                if i > 1:
                    src_wm = self._wm.get(src)
                    if src_wm is None:
                        break
                    end = min(end, _align(src_wm, dst))
                start = self._wm.get(dst)
                if start is None:
                    row = self._db.execute("SELECT MIN(t) FROM samples WHERE step = ?", (src,)).fetchone()
                    if row[0] is None:
                        continue
                    start = _align(row[0], dst)
                if start >= end:
                    continue
                self._db.execute("BEGIN")
                try:
                    cur = self._db.execute(
                        "INSERT OR REPLACE INTO samples (step, sid, t, v, n) "
                        "SELECT ?, x.sid, x.t - (x.t % ?), SUM(x.v * x.n) / SUM(x.n), SUM(x.n) "
                        "FROM series s CROSS JOIN samples x "
                        "ON x.step = ? AND x.sid = s.id AND x.t >= ? AND x.t < ? "
                        "GROUP BY x.sid, x.t - (x.t % ?)",
                        (dst, dst, src, int(start), int(end), dst),
                    )
                    written += max(cur.rowcount, 0)
                    self._db.execute(
                        "INSERT OR REPLACE INTO meta (key, value) VALUES (?, ?)", (f"wm:{dst}", float(end))
                    )
                    self._db.execute("COMMIT")
                except BaseException:
                    self._db.execute("ROLLBACK")
                    raise
                self._wm[dst] = float(end)
        return written

    def apply_retention(self, now: float | None = None) -> int:
        """Delete rows past each tier's ``keep_s``; raw rows not yet rolled up are kept."""
        now = self.clock() if now is None else now
        deleted = 0
        with self._lock:
            bounds = self._boundaries(now)
            sids = [(s,) for s in self._sid.values()]
            self._db.execute("BEGIN")
            try:
                for i, tier in enumerate(self.tiers):
                    cut = bounds[i] if i + 1 < len(self.tiers) else now - tier.keep_s
                    if cut == -math.inf:
                        continue
                    cut = min(cut, now - tier.keep_s)
                    before = self._db.total_changes
                    self._db.executemany(
                        f"DELETE FROM samples WHERE step = {tier.step_s} AND sid = ? AND t < {int(cut)}", sids
                    )
                    deleted += self._db.total_changes - before
                self._db.execute("COMMIT")
            except BaseException:
                self._db.execute("ROLLBACK")
                raise
        return deleted

    def maintain(self, now: float | None = None) -> tuple[int, int]:
        """Downsample then expire; run every minute or so from a background task."""
        return self.downsample(now), self.apply_retention(now)

    def size_bytes(self) -> int:
        """Bytes on disk (database + WAL) after a checkpoint."""
        with self._lock:
            self._db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
            pages = self._db.execute("PRAGMA page_count").fetchone()[0]
            psize = self._db.execute("PRAGMA page_size").fetchone()[0]
        return int(pages * psize)

    def row_counts(self) -> dict[int, int]:
        with self._lock:
            return {int(s): int(n) for s, n in self._db.execute("SELECT step, COUNT(*) FROM samples GROUP BY step")}

    def close(self) -> None:
        with self._lock:
            self._db.close()


class AsyncSeriesStore:
    """Runs a `SeriesStore` on one dedicated thread so the event loop never blocks on SQLite
    (the ``sqlite`` `drods.monitor.metric_history.MetricHistory`)."""

    name = "sqlite"

    def __init__(self, store: SeriesStore) -> None:
        self.store = store
        self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="drods-series")

    async def _run(self, fn: Callable[..., T], *args: object) -> T:
        return await asyncio.get_running_loop().run_in_executor(self._pool, fn, *args)

    async def append(self, samples: Iterable[Sample]) -> int:
        return await self._run(self.store.append, list(samples))

    async def query(self, cluster: str, metric: str, start: float, end: float, step: float) -> list[Point]:
        return await self._run(self.store.query, cluster, metric, start, end, step)

    async def maintain(self, now: float | None = None) -> tuple[int, int]:
        return await self._run(self.store.maintain, now)

    async def close(self) -> None:
        await self._run(self.store.close)
        self._pool.shutdown(wait=True)


# ---------------------------------------------------------------------------------------------
# Prometheus
# ---------------------------------------------------------------------------------------------


async def prometheus_api(client: httpx.AsyncClient, base_url: str, path: str,
                         params: Mapping[str, str]) -> dict[str, Any]:
    """One Prometheus HTTP API call (``/api/v1/query``, ``…/query_range``): its successful body, else
    `PrometheusError` saying whether Prometheus was unreachable, answered garbage or refused."""
    try:
        resp = await client.get(f"{base_url}{path}", params=dict(params))
    except httpx.HTTPError as e:
        raise PrometheusError(f"prometheus unreachable: {e}") from e
    try:
        body = resp.json()
    except ValueError as e:
        raise PrometheusError(f"prometheus answered HTTP {resp.status_code} with non-JSON body") from e
    if resp.status_code != 200 or not isinstance(body, dict) or body.get("status") != "success":
        err = body.get("error", body) if isinstance(body, dict) else body
        raise PrometheusError(f"prometheus error ({resp.status_code}): {err}")
    return body


class PrometheusError(RuntimeError):
    """Prometheus answered with an error, or with something a template should not produce."""


_CPU = '(1 - avg(rate(node_cpu_seconds_total{mode="idle",cluster="$cluster"}[5m])))'
_MEM = (
    '(1 - sum(node_memory_MemAvailable_bytes{cluster="$cluster"})'
    ' / sum(node_memory_MemTotal_bytes{cluster="$cluster"}))'
)

#: PromQL per metric; ``$cluster`` is replaced by the (escaped) cluster name. Each template
#: must return ONE series in the units of `drods.monitor.report` (utilisation 0..1, Mbps, ...).
DEFAULT_PROMQL: dict[str, str] = {
    r.CPU_UTILISATION: _CPU,
    r.MEMORY_UTILISATION: _MEM,
    r.WATER_LEVEL: f'max(label_replace({_CPU}, "r", "cpu", "", "") or label_replace({_MEM}, "r", "mem", "", ""))',
    r.NETWORK_IN: 'sum(rate(node_network_receive_bytes_total{cluster="$cluster",device!="lo"}[5m])) * 8 / 1e6',
    r.NETWORK_OUT: 'sum(rate(node_network_transmit_bytes_total{cluster="$cluster",device!="lo"}[5m])) * 8 / 1e6',
    r.PODS: 'sum(kube_pod_status_phase{cluster="$cluster",phase="Running"})',
}


def _promql_string(s: str) -> str:
    return s.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


class PrometheusSeriesReader:
    """Answers `SeriesReader.query` from a Prometheus ``/api/v1/query_range`` endpoint.

    Long ranges are split so no request asks for more than ``max_points`` points (Prometheus
    refuses > 11,000). Tested against ``httpx.MockTransport`` only so far.
    """

    def __init__(
        self,
        base_url: str,
        templates: Mapping[str, str] | None = None,
        *,
        client: httpx.AsyncClient | None = None,
        timeout_s: float = 10.0,
        max_points: int = 10_000,
    ) -> None:
        self.base_url = base_url.rstrip("/")
        self.templates = dict(DEFAULT_PROMQL if templates is None else templates)
        self._own_client = client is None
        self._client = client or httpx.AsyncClient(timeout=timeout_s)
        self.max_points = max_points

    def promql(self, cluster: str, metric: str) -> str:
        tpl = self.templates.get(metric)
        if tpl is None:
            raise KeyError(f"no PromQL template for metric {metric!r}")
        return string.Template(tpl).safe_substitute(cluster=_promql_string(cluster))

    async def query(self, cluster: str, metric: str, start: float, end: float, step: float) -> list[Point]:
        if step <= 0:
            raise ValueError("step must be positive")
        q = self.promql(cluster, metric)
        out: list[Point] = []
        span = step * (self.max_points - 1)
        lo = start
        while lo <= end:
            hi = min(end, lo + span)
            out.extend(await self._range(q, lo, hi, step))
            lo = hi + step
        return out

    async def _range(self, q: str, start: float, end: float, step: float) -> list[Point]:
        body = await prometheus_api(self._client, self.base_url, "/api/v1/query_range",
                                    {"query": q, "start": f"{start:.3f}", "end": f"{end:.3f}", "step": f"{step:g}"})
        data = body.get("data")
        result = data.get("result", []) if isinstance(data, dict) else []
        if not result:
            return []
        if len(result) > 1:
            raise PrometheusError(f"template returned {len(result)} series; it must aggregate to one")
        pts: list[Point] = []
        for t, v in result[0].get("values", []):
            fv = float(v)
            if math.isfinite(fv):
                pts.append((float(t), fv))
        return pts

    async def aclose(self) -> None:
        if self._own_client:
            await self._client.aclose()
