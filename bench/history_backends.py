"""Metric history backends side by side: the SQLite series file and a real Prometheus.

Writes what ``--clusters`` clusters reporting every 10 s produce (every metric of `METRICS` per
report, one write per 10 s tick, as the ingest path flushes it), then times the two reads the
control plane makes: a history API query (the last hour at a 10 s step) and the forecaster's
query (7 days at a 5-minute step; the history here is ``--hours`` long). Starts its own Prometheus
(``/usr/bin/prometheus`` with the remote-write receiver) in a temporary directory.

Prints the conditions, then one final JSON line of figures.

    python bench/history_backends.py [--clusters 200] [--ticks 60] [--hours 24]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import os
import platform
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from drods.monitor.metric_history import MetricHistory  # noqa: E402
from drods.monitor.prom_history import PrometheusHistory  # noqa: E402
from drods.monitor.report import METRICS, WATER_LEVEL  # noqa: E402
from drods.monitor.series import AsyncSeriesStore, Sample, SeriesStore  # noqa: E402

T0 = 1_767_225_600.0


def tick(clusters: int, t: float) -> list[Sample]:
    return [(f"c{i:04d}", m, t, 0.5 + 0.3 * math.sin(t / 3600 + i) + 0.01 * j)
            for i in range(clusters) for j, m in enumerate(METRICS)]


async def run(h: MetricHistory, args: argparse.Namespace) -> dict[str, Any]:
    # a backlog of --hours for a few clusters (10 s apart), written oldest first, before the timed ticks
    start = T0 - args.hours * 3600
    backlog = [(f"c{i:04d}", WATER_LEVEL, t, 0.5 + 0.3 * math.sin(2 * math.pi * t / 86_400))
               for t in np.arange(start, T0 - args.ticks * 10, 10.0) for i in range(5)]
    for k in range(0, len(backlog), 50_000):
        await h.append(backlog[k:k + 50_000])
    write_s: list[float] = []
    for k in range(args.ticks):
        batch = tick(args.clusters, T0 - (args.ticks - k) * 10)
        t0 = time.perf_counter()
        await h.append(batch)
        write_s.append(time.perf_counter() - t0)
    api_s, fc_s = [], []
    for k in range(args.queries):
        c = f"c{k % 5:04d}"
        t0 = time.perf_counter()
        pts = await h.query(c, WATER_LEVEL, T0 - 3600, T0, 10)
        api_s.append(time.perf_counter() - t0)
        assert len(pts) >= 300, len(pts)
        t0 = time.perf_counter()
        pts = await h.query(c, WATER_LEVEL, T0 - 7 * 86_400, T0, 300)
        fc_s.append(time.perf_counter() - t0)
        assert len(pts) >= args.hours * 12 - 1, len(pts)
    samples = args.clusters * len(METRICS)
    return {
        "tick_samples": samples,
        "write_tick_p50_ms": round(float(np.percentile(write_s, 50)) * 1e3, 2),
        "write_tick_p99_ms": round(float(np.percentile(write_s, 99)) * 1e3, 2),
        "write_samples_per_s": round(samples * len(write_s) / sum(write_s)),
        "query_1h_10s_p50_ms": round(float(np.percentile(api_s, 50)) * 1e3, 2),
        "query_1h_10s_p99_ms": round(float(np.percentile(api_s, 99)) * 1e3, 2),
        "query_7d_5m_p50_ms": round(float(np.percentile(fc_s, 50)) * 1e3, 2),
        "query_7d_5m_p99_ms": round(float(np.percentile(fc_s, 99)) * 1e3, 2),
    }


async def main(args: argparse.Namespace) -> dict[str, Any]:
    from tests.prometheus_server import PrometheusServer, prometheus_binary

    binary = prometheus_binary()
    if binary is None:
        raise SystemExit("prometheus not found")
    figures: dict[str, Any] = {}
    with tempfile.TemporaryDirectory() as tmp:
        sqlite = AsyncSeriesStore(SeriesStore(Path(tmp) / "history.db", clock=lambda: T0))
        figures["sqlite"] = await run(sqlite, args)
        await sqlite.close()
        with PrometheusServer(binary, Path(tmp) / "prom", out_of_order_window="10m") as server:
            prom = PrometheusHistory(server.url)
            figures["prometheus"] = await run(prom, args)
            await prom.close()
    return figures


if __name__ == "__main__":
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--clusters", type=int, default=200)
    p.add_argument("--ticks", type=int, default=60)
    p.add_argument("--hours", type=int, default=24)
    p.add_argument("--queries", type=int, default=30)
    a = p.parse_args()
    print(f"conditions: clusters={a.clusters} metrics={len(METRICS)} ticks={a.ticks} (10 s apart) "
          f"backlog={a.hours}h x 5 clusters queries={a.queries} cpus={os.cpu_count()} "
          f"python={platform.python_version()} prometheus=/usr/bin/prometheus (remote-write, same host)")
    out = asyncio.run(main(a))
    print(json.dumps(out))
