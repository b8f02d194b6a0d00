"""What only the Prometheus backend has to get right: names, the wire format, refused samples,
an unreachable Prometheus, and the settings that select it."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import cramjam
import httpx
import pytest
from pydantic import ValidationError

from drods.cli.config import component_settings
from drods.monitor import remote_write as rw
from drods.monitor.prom_history import PrometheusHistory, check_labels, prometheus_name
from drods.monitor.report import METRICS, WATER_LEVEL
from drods.monitor.series import PrometheusError
from drods.monitor.service import MonitorSettings
from tests.monitor_history.conftest import T0
from tests.prometheus_server import PrometheusServer, require_prometheus

NAME = r"^[a-zA-Z_:][a-zA-Z0-9_:]*$"


def test_every_metric_has_its_own_valid_prometheus_name() -> None:
    names = [prometheus_name(m) for m in METRICS]
    assert len(set(names)) == len(METRICS)
    assert all(re.match(NAME, n) for n in names)
    assert prometheus_name("waterLevel") == "drods_history_water_level"
    assert prometheus_name("cpu.utilisation") == "drods_history_cpu_utilisation"
    assert prometheus_name("network.inMbps") == "drods_history_network_in_mbps"
    assert prometheus_name("largestNodeFree.cpu") == "drods_history_largest_node_free_cpu"
    with pytest.raises(ValueError):
        prometheus_name("...")


def test_extra_labels_are_checked() -> None:
    assert check_labels({"plane": "prod"}) == {"plane": "prod"}
    for bad in ("cluster", "__name__", "__x", "1a", "a-b", ""):
        with pytest.raises(ValueError):
            check_labels({bad: "x"})


def test_write_request_round_trip_with_sorted_labels() -> None:
    body = rw.encode([rw.Series({"cluster": "a", "__name__": "m", "b": "1"}, [(1000, 0.5), (2000, 1.5)])])
    assert rw.decode(body) == [rw.Series({"__name__": "m", "b": "1", "cluster": "a"}, [(1000, 0.5), (2000, 1.5)])]
    raw = bytes(cramjam.snappy.decompress_raw(body))  # snappy block format, not framed
    assert raw[0] == 0x0A  # field 1 (timeseries), length-delimited
    req = rw.WriteRequest()
    req.ParseFromString(raw)
    assert [lb.name for lb in req.timeseries[0].labels] == ["__name__", "b", "cluster"]


@pytest.fixture
def strict_prometheus(tmp_path: Path) -> Iterator[PrometheusServer]:
    """Prometheus's defaults: in-order samples only, nothing older than ~1 h behind the newest."""
    with PrometheusServer(require_prometheus(), tmp_path / "strict") as server:
        yield server


async def test_refused_samples_are_dropped_and_the_rest_written(strict_prometheus: PrometheusServer) -> None:
    dropped: list[tuple[str, int]] = []
    h = PrometheusHistory(strict_prometheus.url, on_drop=lambda reason, n: dropped.append((reason, n)))
    try:
        assert await h.append([("a", WATER_LEVEL, T0 + i, 0.1 * i) for i in range(5)]) == 5
        batch = [("a", WATER_LEVEL, T0 - 7200, 0.9),  # too old: before what the TSDB still takes
                 ("a", WATER_LEVEL, T0 + 2, 0.7),  # a second already holding another value
                 ("b", WATER_LEVEL, T0 - 3, 0.3),  # out of order? no: a new series may start anywhere in range
                 *[("a", WATER_LEVEL, T0 + 10 + i, 0.5) for i in range(3)]]
        assert await h.append(batch) == 4
        assert sorted(dropped) == [("rejected", 1), ("rejected", 1)]
        assert await h.query("a", WATER_LEVEL, T0 - 7200, T0 + 20, 1) == [
            *[(T0 + i, pytest.approx(0.1 * i)) for i in range(5)], *[(T0 + 10 + i, 0.5) for i in range(3)]]
        assert await h.query("b", WATER_LEVEL, T0 - 10, T0, 1) == [(T0 - 3, 0.3)]
        # out of order within the window: refused too (without storage.tsdb.out_of_order_time_window)
        assert await h.append([("a", WATER_LEVEL, T0 + 8, 0.2)]) == 0
        assert dropped[-1] == ("rejected", 1)
    finally:
        await h.close()


class Flaky(httpx.AsyncBaseTransport):
    """Fails the first ``failures`` requests as unreachable (or with ``status``), then forwards."""

    def __init__(self, failures: int, status: int | None = None) -> None:
        self.failures = failures
        self.status = status
        self.inner = httpx.AsyncHTTPTransport()
        self.calls = 0

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        self.calls += 1
        if self.failures > 0:
            self.failures -= 1
            if self.status is None:
                raise httpx.ConnectError("connection refused", request=request)
            return httpx.Response(self.status, text="remote write receiver needs to be enabled")
        return await self.inner.handle_async_request(request)

    async def aclose(self) -> None:
        await self.inner.aclose()


async def test_a_wholly_refused_write_costs_a_bounded_number_of_requests(
        strict_prometheus: PrometheusServer) -> None:
    dropped: list[tuple[str, int]] = []
    transport = Flaky(0)
    async with httpx.AsyncClient(transport=transport) as client:
        h = PrometheusHistory(strict_prometheus.url, client=client, max_requests=5,
                              on_drop=lambda reason, n: dropped.append((reason, n)))
        assert await h.append([("a", WATER_LEVEL, T0, 0.5)]) == 1
        old = [(f"c{i}", WATER_LEVEL, T0 - 7200 - k, 0.5) for i in range(10) for k in range(20)]
        calls = transport.calls
        assert await h.append(old) == 0
        assert transport.calls - calls <= 5
        assert sum(n for _, n in dropped) == 200 and {r for r, _ in dropped} == {"rejected"}


@pytest.mark.parametrize("status", [None, 404, 503])
async def test_unreachable_keeps_the_batch_for_the_next_write(prometheus: PrometheusServer,
                                                              run_label: dict[str, str], status: int | None) -> None:
    dropped: list[Any] = []
    async with httpx.AsyncClient(transport=Flaky(1, status)) as client:
        h = PrometheusHistory(prometheus.url, labels=run_label, client=client, on_drop=lambda *a: dropped.append(a))
        assert await h.append([("a", WATER_LEVEL, T0 - 5, 0.25)]) == 0
        assert await h.query("a", WATER_LEVEL, T0 - 60, T0, 60) == []
        assert await h.append([("a", WATER_LEVEL, T0 - 4, 0.75)]) == 2
        assert await h.query("a", WATER_LEVEL, T0 - 60, T0, 60) == [(T0 - 60, 0.5)]
        assert dropped == []


async def test_kept_samples_are_bounded(run_label: dict[str, str]) -> None:
    dropped: list[Any] = []
    async with httpx.AsyncClient(transport=Flaky(10)) as client:
        h = PrometheusHistory("http://127.0.0.1:9", client=client, max_pending=3,
                              on_drop=lambda *a: dropped.append(a))
        assert await h.append([("a", WATER_LEVEL, T0 + i, 0.1) for i in range(5)]) == 0
        assert dropped == [("overflow", 2)]
        with pytest.raises(PrometheusError, match="unreachable"):
            await h.query("a", WATER_LEVEL, T0 - 60, T0, 60)


def test_settings_select_the_backend(tmp_path: Path) -> None:
    assert MonitorSettings().historyBackend == "sqlite"
    with pytest.raises(ValidationError, match="historyPrometheusUrl"):
        MonitorSettings(historyBackend="prometheus")
    with pytest.raises(ValidationError, match="cluster"):
        MonitorSettings(historyBackend="prometheus", historyPrometheusUrl="http://p:9090",
                        historyPrometheusLabels={"cluster": "x"})
    # --history-prometheus wins over the configuration file's section, which keeps its other knobs
    (tmp_path / "drods.yaml").write_text("apiVersion: config.drods.io/v1alpha1\nkind: DRODSConfiguration\n"
                                         "monitoring: {heartbeatSeconds: 7}\n")
    s = component_settings(None, tmp_path, history_prometheus="http://p:9090").monitoring
    assert s is not None
    assert (s.historyBackend, s.historyPrometheusUrl, s.heartbeatSeconds) == ("prometheus", "http://p:9090", 7)
    plain = component_settings(None, tmp_path).monitoring
    assert plain is not None and plain.historyBackend == "sqlite"
