"""The history and forecast routes on the Prometheus backend, in process: answers from Prometheus
(no local file), and 502 / null (not 500) while it is unreachable. Several processes sharing it:
`test_replicas_e2e`."""

from __future__ import annotations

import uuid
from pathlib import Path

from drods.store.sqlite import SqliteStore
from tests.free_port import free_port
from tests.monitor_e2e.conftest import Clock, eventually, fast_settings, node_report, serve
from tests.monitor_history.conftest import T0
from tests.prometheus_server import PrometheusServer

Q = {"metric": "waterLevel", "startTime": "2026-01-01T00:00:00Z", "endTime": "2026-01-01T00:10:00Z",
     "step": "1m"}


async def test_history_through_prometheus_in_process(tmp_path: Path, prometheus: PrometheusServer) -> None:
    clock = Clock(T0 + 600)
    settings = fast_settings(historyBackend="prometheus", historyPrometheusUrl=prometheus.url,
                             historyPrometheusLabels={"run": uuid.uuid4().hex[:12]})
    async with serve(SqliteStore(str(tmp_path / "drods.db")), tmp_path / "data", settings, clock) as mon:
        assert mon.svc.settings.historyBackend == "prometheus"
        await mon.register("p1")
        levels = []
        for i, cpu in enumerate((20.0, 60.0)):
            r = await mon.report("p1", at=T0 + 570 + 10 * i, **node_report(cpu))
            assert r.status_code == 200, r.text
            levels.append(r.json()["waterLevel"])
        await mon.svc.flush(force=True)
        assert not (tmp_path / "data" / "history.db").exists()  # nothing in a local file

        async def points() -> list[dict[str, object]] | None:
            r = await mon.call("GET", "/api/v1/history/metrics", params={"cluster": "p1", **Q})
            assert r.status_code == 200, r.text
            return r.json()["points"] or None

        got = await eventually(points, 10, "history from Prometheus")
        assert got == [{"time": "2026-01-01T00:09:00Z", "value": sum(levels) / 2}]
        r = await mon.call("GET", "/api/v1/monitor/forecast", params={"cluster": "p1", "minutes": 30})
        assert r.json()["waterLevel"] == sum(levels) / 2


async def test_unreachable_history_prometheus_is_502_and_null_forecast(tmp_path: Path) -> None:
    settings = fast_settings(historyBackend="prometheus", historyPrometheusUrl=f"http://127.0.0.1:{free_port()}")
    async with serve(SqliteStore(str(tmp_path / "drods.db")), tmp_path / "data", settings, Clock(T0 + 600)) as mon:
        await mon.register("p2")
        r = await mon.report("p2", at=T0 + 590, **node_report(50.0))
        assert r.status_code == 200 and r.json()["accepted"]  # ingest does not depend on history
        r = await mon.call("GET", "/api/v1/history/metrics", params={"cluster": "p2", **Q})
        assert r.status_code == 502 and r.json()["code"] == "PROMETHEUS_ERROR", r.text
        r = await mon.call("GET", "/api/v1/monitor/forecast", params={"cluster": "p2", "minutes": 30})
        assert r.status_code == 200 and r.json()["waterLevel"] is None
