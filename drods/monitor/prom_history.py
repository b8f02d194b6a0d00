"""Metric history kept in a Prometheus shared by every API server: remote-write in, PromQL out.

With several API servers a history file per process answers differently on each one; a
Prometheus (started with ``--web.enable-remote-write-receiver``) that every replica writes to and
reads from gives one answer everywhere. This backend answers exactly what the SQLite series file
(`drods.monitor.series.SeriesStore`) answers for the same samples:

* **Samples.** Times are whole seconds (like the series file); within one write the later of two
  samples of a series in the same second wins. A sample is one series per (cluster, metric):
  ``drods_history_<metric in snake case>{cluster="<name>", <historyPrometheusLabels>}``, e.g.
  ``drods_history_cpu_utilisation{cluster="aws-us-east"}`` for ``cpu.utilisation``.
* **Queries.** A ``step`` bucket is epoch aligned, ``[b, b + step)``; its value is the mean of the
  samples in it that also lie in ``[start, end]``. Full buckets come from one ``query_range`` of
  ``avg_over_time(sel[step - 1s + 1ms])`` evaluated at each bucket's last second (the range covers
  exactly the whole seconds of the bucket, whether the server's ranges are closed or left-open);
  a bucket cut by ``start`` or ``end`` is one instant query over just its part.
* **Rejected samples.** Prometheus refuses a sample older than what its TSDB still accepts (by
  default about an hour behind the newest sample it holds, more with
  ``storage.tsdb.out_of_order_time_window``), and out of order or duplicated samples without that
  window; it then refuses the whole request. The writer bisects such a request down to the
  refused samples (at most ``max_requests`` requests per write; past that, a still refused part
  is dropped whole), drops only those (``drods_monitor_history_samples_dropped_total{reason=
  "rejected"}``, one log line per write) and writes the rest. A sample of a series in a second
  that already holds another value is kept as first written (Prometheus does not overwrite; the
  series file keeps the later).
* **Prometheus unreachable.** The batch is kept and sent again with the next flush (a resend of
  samples that did arrive is harmless: same value, same time); beyond ``max_pending`` samples
  the oldest are dropped (``reason="overflow"``). Reads fail with `PrometheusError` (HTTP 502).
* **Retention and downsampling** are Prometheus's (``--storage.tsdb.retention.time``); `maintain`
  does nothing.
"""

from __future__ import annotations

import asyncio
import logging
import math
import re
from collections.abc import Callable, Iterable, Mapping
from typing import Any

import httpx

from drods.monitor import remote_write as rw
from drods.monitor.series import Point, PrometheusError, Sample, prometheus_api

log = logging.getLogger(__name__)

NAME_PREFIX = "drods_history_"
_METRIC_NAME = re.compile(r"^[a-zA-Z_:][a-zA-Z0-9_:]*$")
LABEL_NAME = re.compile(r"^[a-zA-Z_][a-zA-Z0-9_]*$")
RESERVED_LABELS = frozenset({"cluster", "__name__"})
_CAMEL = re.compile(r"(?<=[a-z0-9])(?=[A-Z])")
_NOT_NAME = re.compile(r"[^a-zA-Z0-9_]+")
# What Prometheus says when it refuses samples (a 400, or in 2.x a 500 for "too old sample").
_REFUSED = re.compile(r"out of order|out of bounds|too old|duplicate sample", re.IGNORECASE)


def prometheus_name(metric: str) -> str:
    """``waterLevel`` → ``drods_history_water_level``, ``network.inMbps`` → ``…_network_in_mbps``."""
    name = NAME_PREFIX + _NOT_NAME.sub("_", _CAMEL.sub("_", metric)).strip("_").lower()
    if not _METRIC_NAME.match(name) or name == NAME_PREFIX:
        raise ValueError(f"metric {metric!r} has no Prometheus name")
    return name


def check_labels(labels: Mapping[str, str]) -> dict[str, str]:
    """Extra labels for every series: valid names, not ``cluster`` and not ``__…``."""
    for k in labels:
        if not LABEL_NAME.match(k) or k.startswith("__") or k in RESERVED_LABELS:
            raise ValueError(f"label name {k!r} is not allowed (Prometheus label syntax; not cluster, not __*)")
    return dict(labels)


def _promql_string(s: str) -> str:
    return s.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


class _Refused(Exception):
    """Prometheus refused the samples themselves (too old, out of order, duplicate)."""


class PrometheusHistory:
    """`drods.monitor.metric_history.MetricHistory` in a Prometheus at ``base_url``."""

    name = "prometheus"

    def __init__(self, base_url: str, *, labels: Mapping[str, str] | None = None,
                 client: httpx.AsyncClient | None = None, timeout_s: float = 10.0, max_points: int = 10_000,
                 max_pending: int = 100_000, max_requests: int = 64,
                 on_drop: Callable[[str, int], None] | None = None) -> None:
        self.base_url = base_url.rstrip("/")
        self.labels = check_labels(labels or {})
        self._own_client = client is None
        self._client = client or httpx.AsyncClient(timeout=timeout_s)
        self.max_points = max_points
        self.max_pending = max_pending
        self.max_requests = max_requests  # per write, bisection included
        self.on_drop = on_drop
        self._pending: list[Sample] = []
        self._lock = asyncio.Lock()
        self._failing = False

    # -- writing ------------------------------------------------------------------------------

    def _series(self, samples: Iterable[Sample]) -> list[rw.Series]:
        by_series: dict[tuple[str, str], dict[int, float]] = {}
        for c, m, t, v in samples:
            by_series.setdefault((c, m), {})[int(t)] = v  # the later sample of a second wins
        return [rw.Series({**self.labels, "__name__": prometheus_name(m), "cluster": c},
                          [(t * 1000, pts[t]) for t in sorted(pts)])
                for (c, m), pts in by_series.items()]

    async def append(self, samples: Iterable[Sample]) -> int:
        """Write samples (and any kept from a failed write); returns how many Prometheus took."""
        async with self._lock:
            batch = self._pending + [s for s in samples if math.isfinite(s[3])]
            self._pending = []
            if not batch:
                return 0
            series = self._series(batch)
            refused: list[str] = []
            try:
                written = await self._send(series, refused, [self.max_requests])
            except PrometheusError as e:
                self._keep(batch)
                if not self._failing:
                    log.warning("metric history: Prometheus write failed, keeping %d samples: %s", len(batch), e)
                self._failing = True
                return 0
            if refused:
                log.warning("metric history: Prometheus refused %d samples (%s)",
                            sum(len(x.samples) for x in series) - written, "; ".join(refused[:3]))
            if self._failing:
                log.info("metric history: Prometheus writes work again")
            self._failing = False
            return written

    def _keep(self, samples: list[Sample]) -> None:
        over = len(samples) - self.max_pending
        if over > 0:
            self._drop("overflow", over)
            samples = samples[over:]
        self._pending = samples

    def _drop(self, reason: str, n: int) -> None:
        if self.on_drop is not None and n:
            self.on_drop(reason, n)

    async def _send(self, series: list[rw.Series], refused: list[str], budget: list[int]) -> int:
        """Post ``series``; when Prometheus refuses samples, bisect (within ``budget`` requests) to
        write all the others. Refused samples are counted and their reasons put in ``refused``."""
        n = sum(len(s.samples) for s in series)
        if n == 0:
            return 0
        if budget[0] <= 0:  # out of requests: this part of a refused write is dropped whole
            refused.append(f"{n} more not tried")
            self._drop("rejected", n)
            return 0
        budget[0] -= 1
        try:
            await self._post(series)
            return n
        except _Refused as e:
            if n == 1:
                refused.append(f"{series[0].labels.get('__name__')}: {e}")
                self._drop("rejected", n)
                return 0
        if len(series) > 1:
            half = len(series) // 2
            parts = [series[:half], series[half:]]
        else:
            s, half = series[0], len(series[0].samples) // 2
            parts = [[rw.Series(s.labels, s.samples[:half])], [rw.Series(s.labels, s.samples[half:])]]
        return await self._send(parts[0], refused, budget) + await self._send(parts[1], refused, budget)

    async def _post(self, series: list[rw.Series]) -> None:
        try:
            resp = await self._client.post(f"{self.base_url}/api/v1/write", content=rw.encode(series),
                                           headers=rw.HEADERS)
        except httpx.HTTPError as e:
            raise PrometheusError(f"prometheus unreachable: {e}") from e
        if resp.is_success:
            return
        text = resp.text[:300].strip()
        if resp.status_code == 400 or _REFUSED.search(text):
            raise _Refused(text)
        # 404: the receiver is off (--web.enable-remote-write-receiver); 5xx: try again later.
        raise PrometheusError(f"prometheus remote write: HTTP {resp.status_code}: {text}")

    # -- reading ------------------------------------------------------------------------------

    def selector(self, cluster: str, metric: str) -> str:
        labels = {**self.labels, "cluster": cluster}
        inner = ",".join(f'{k}="{_promql_string(v)}"' for k, v in sorted(labels.items()))
        return f"{prometheus_name(metric)}{{{inner}}}"

    async def query(self, cluster: str, metric: str, start: float, end: float, step: float) -> list[Point]:
        """Means over epoch-aligned ``step`` buckets of the samples in [start, end] (non-empty
        buckets only, oldest first) — `SeriesStore.query`'s answer."""
        if step <= 0:
            raise ValueError("step must be positive")
        istep = max(int(round(step)), 1)
        lo, hi = math.ceil(start), math.floor(end)  # the whole seconds a sample may have
        if lo > hi:
            return []
        sel = self.selector(cluster, metric)
        b_lo, b_hi = lo - lo % istep, hi - hi % istep
        parts: list[asyncio.Future[list[Point]] | asyncio.Task[list[Point]]] = []
        if b_lo == b_hi:
            parts.append(asyncio.ensure_future(self._bucket(sel, b_lo, lo, hi)))
        else:
            first, last = b_lo, b_hi
            if lo != b_lo:
                parts.append(asyncio.ensure_future(self._bucket(sel, b_lo, lo, b_lo + istep - 1)))
                first += istep
            if hi != b_hi + istep - 1:
                parts.append(asyncio.ensure_future(self._bucket(sel, b_hi, b_hi, hi)))
                last -= istep
            if first <= last:
                parts.append(asyncio.ensure_future(self._buckets(sel, first, last, istep)))
        try:
            results = await asyncio.gather(*parts)
        except BaseException:
            for p in parts:
                p.cancel()
            raise
        return sorted(p for r in results for p in r)

    async def _bucket(self, sel: str, bucket: int, lo: int, hi: int) -> list[Point]:
        """The mean of the samples at whole seconds lo..hi, reported at ``bucket``."""
        body = await self._get("/api/v1/query", {"query": f"avg_over_time({sel}[{(hi - lo) * 1000 + 1}ms])",
                                                 "time": str(hi)})
        return [(float(bucket), v) for _, v in _values(body, "value")]

    async def _buckets(self, sel: str, first: int, last: int, istep: int) -> list[Point]:
        """Full buckets ``first..last``: one evaluation at each bucket's last second."""
        q = f"avg_over_time({sel}[{(istep - 1) * 1000 + 1}ms])"
        out: list[Point] = []
        b = first
        while b <= last:
            upto = min(last, b + istep * (self.max_points - 1))
            body = await self._get("/api/v1/query_range", {"query": q, "start": str(b + istep - 1),
                                                            "end": str(upto + istep - 1), "step": str(istep)})
            out += [(t - istep + 1, v) for t, v in _values(body, "values")]
            b = upto + istep
        return out

    async def _get(self, path: str, params: Mapping[str, str]) -> dict[str, Any]:
        return await prometheus_api(self._client, self.base_url, path, params)

    # -- lifecycle ----------------------------------------------------------------------------

    async def maintain(self, now: float | None = None) -> tuple[int, int]:
        """Nothing to do: Prometheus applies its own retention."""
        return 0, 0

    async def close(self) -> None:
        """Stop; samples still kept from failed writes are lost (the service's last flush tried them)."""
        if self._pending:
            log.warning("metric history: %d samples not written to Prometheus before shutdown", len(self._pending))
            self._pending = []
        if self._own_client:
            await self._client.aclose()


def _values(body: Mapping[str, object], key: str) -> list[Point]:
    data = body.get("data")
    result = data.get("result") if isinstance(data, dict) else None
    if not isinstance(result, list) or not result:
        return []
    if len(result) > 1:
        raise PrometheusError(f"{len(result)} series match one history selector; labels must make it unique")
    raw = result[0].get(key)
    rows = [raw] if key == "value" else raw
    pts: list[Point] = []
    for t, v in rows or []:
        fv = float(v)
        if math.isfinite(fv):
            pts.append((float(t), fv))
    return pts
