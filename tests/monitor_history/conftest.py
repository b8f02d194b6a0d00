"""Both metric history backends over one contract: the SQLite series file and a real Prometheus.

The Prometheus of the session accepts out-of-order samples over a long window, so tests may write
synthetic history at any time base; each test writes its own series (a unique ``run`` label), so
tests don't see each other's samples.
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest

from drods.monitor.metric_history import MetricHistory
from drods.monitor.prom_history import PrometheusHistory
from drods.monitor.series import AsyncSeriesStore, SeriesStore
from tests.prometheus_server import PrometheusServer, require_prometheus

T0 = 1_767_225_600.0  # 2026-01-01T00:00:00Z: the synthetic histories' "now"


class Clock:
    def __init__(self, t: float = T0) -> None:
        self.t = t

    def __call__(self) -> float:
        return self.t


@pytest.fixture(scope="session")
def prometheus(tmp_path_factory: pytest.TempPathFactory) -> Iterator[PrometheusServer]:
    """One Prometheus for the session (remote-write receiver on, out-of-order window 10 years)."""
    binary = require_prometheus()
    with PrometheusServer(binary, tmp_path_factory.mktemp("prometheus"), out_of_order_window="3650d") as server:
        yield server


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def run_label() -> dict[str, str]:
    return {"run": uuid.uuid4().hex[:12]}


def open_sqlite(tmp_path: Path, clock: Clock) -> AsyncSeriesStore:
    return AsyncSeriesStore(SeriesStore(tmp_path / f"history-{uuid.uuid4().hex[:6]}.db", clock=clock, grace_s=300))


@pytest.fixture(params=["sqlite", "prometheus"])
async def history(request: pytest.FixtureRequest, tmp_path: Path, clock: Clock,
                  run_label: dict[str, str]) -> AsyncIterator[MetricHistory]:
    """Each backend in turn (the test runs once per backend)."""
    h: MetricHistory
    if request.param == "sqlite":
        h = open_sqlite(tmp_path, clock)
    else:
        server: PrometheusServer = request.getfixturevalue("prometheus")
        h = PrometheusHistory(server.url, labels=run_label)
    yield h
    await h.close()


@pytest.fixture
async def both(tmp_path: Path, clock: Clock, prometheus: PrometheusServer,
               run_label: dict[str, str]) -> AsyncIterator[tuple[MetricHistory, MetricHistory]]:
    """(sqlite, prometheus) side by side, for answers compared with each other."""
    a, b = open_sqlite(tmp_path, clock), PrometheusHistory(prometheus.url, labels=run_label)
    yield a, b
    await a.close()
    await b.close()
