"""Where metric history lives: the contract every backend keeps, and the choice between them.

History is written by ingest (raw samples, flushed in batches) and read by the history API and
the forecaster (step averages). Two backends keep one contract, checked by one conformance
suite (``tests/monitor_history/``):

* ``sqlite`` (default) — the series file in the data dir (`drods.monitor.series`): one process,
  nothing else to run, downsampled tiers.
* ``prometheus`` — a Prometheus every API server writes to (remote-write) and reads from (PromQL)
  (`drods.monitor.prom_history`): several API servers answer history and forecast queries alike.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Literal, Protocol

from drods.monitor.prom_history import PrometheusHistory
from drods.monitor.series import AsyncSeriesStore, Point, Sample, SeriesStore

Backend = Literal["sqlite", "prometheus"]


class MetricHistory(Protocol):
    """Raw samples in, step averages out.

    `query` answers the means over epoch-aligned buckets of ``round(step)`` seconds of the samples
    with ``start <= t <= end`` (times are whole seconds), non-empty buckets only, oldest first.
    """

    name: str

    async def append(self, samples: Iterable[Sample]) -> int: ...

    async def query(self, cluster: str, metric: str, start: float, end: float, step: float) -> list[Point]: ...

    async def maintain(self, now: float | None = None) -> tuple[int, int]: ...

    async def close(self) -> None: ...


async def open_history(backend: Backend, *, path: Path, prometheus_url: str | None = None,
                       labels: dict[str, str] | None = None, clock: Callable[[], float],
                       grace_s: int = 300, on_drop: Callable[[str, int], None] | None = None) -> MetricHistory:
    """The backend the settings name: the series file at ``path``, or the Prometheus at ``prometheus_url``."""
    if backend == "prometheus":
        if not prometheus_url:
            raise ValueError("the prometheus history backend needs a URL (historyPrometheusUrl)")
        return PrometheusHistory(prometheus_url, labels=labels, on_drop=on_drop)
    path.parent.mkdir(parents=True, exist_ok=True)
    store = await asyncio.to_thread(SeriesStore, path, clock=clock, grace_s=grace_s)
    return AsyncSeriesStore(store)
