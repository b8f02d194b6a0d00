"""Two ``drods apiserver`` processes over one etcd, both keeping metric history in one real
Prometheus (``--history-prometheus``): reports pushed to either replica give the same history
and the same forecast on both (SPEC A6 for monitoring), and the answer is the right one."""

from __future__ import annotations

import math
import shutil
import time
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx
import pytest

from drods.security.envelope import KEYRING_FILE
from tests.etcd_server import wipe
from tests.monitor_e2e.conftest import node_report
from tests.prometheus_server import PrometheusServer, require_prometheus
from tests.server_process import ServerProcess, wait_until

pytestmark = pytest.mark.timeout(120)


def iso(ts: float) -> str:
    return datetime.fromtimestamp(ts, UTC).isoformat().replace("+00:00", "Z")


@pytest.fixture
def replicas(tmp_path: Path, etcd_endpoint: str) -> Iterator[tuple[ServerProcess, ServerProcess]]:
    # The window Prometheus should be run with beside several API servers (docs/monitoring.md).
    with PrometheusServer(require_prometheus(), tmp_path / "prometheus", out_of_order_window="10m") as prom:
        args = ["--store", f"etcd://{etcd_endpoint}", "--history-prometheus", prom.url]
        wipe(etcd_endpoint)  # the session's etcd: other tests' objects are sealed with their keyrings
        with ServerProcess(tmp_path / "a", command="apiserver", args=args) as a:
            (tmp_path / "b").mkdir()
            for name in ("jwt.key", KEYRING_FILE):  # one token authority, one keyring (objects sealed at rest)
                shutil.copy(tmp_path / "a" / name, tmp_path / "b" / name)
            with ServerProcess(tmp_path / "b", command="apiserver", args=args) as b:
                yield a, b


def test_history_and_forecast_are_the_same_on_every_replica(replicas: tuple[ServerProcess, ServerProcess]) -> None:
    a, b = replicas
    cluster = f"hist-{uuid.uuid4().hex[:8]}"
    with a.client() as ca, b.client() as cb:
        r = ca.post("/api/v1/clusters", json={"name": cluster})
        assert r.status_code == 201, r.text
        wait_until(lambda: cb.get(f"/api/v1/clusters/{cluster}").status_code == 200, 10, "B sees the cluster")

        now = time.time()
        sent: list[tuple[float, float]] = []  # (time, water level) of every accepted report
        for i, (client, cpu) in enumerate([(ca, 40.0), (cb, 55.0), (ca, 70.0), (cb, 35.0)]):
            ts = math.floor(now) - 40 + 10 * i
            r = client.put("/api/v1/metrics", json={"cluster": cluster, "timestamp": iso(ts), **node_report(cpu)})
            assert r.status_code == 200 and r.json()["accepted"], r.text
            sent.append((ts, r.json()["waterLevel"]))

        start, end = math.floor(now) - 60, math.floor(now)
        params = {"cluster": cluster, "metric": "waterLevel", "startTime": iso(start), "endTime": iso(end),
                  "step": "20s"}
        expected: dict[float, list[float]] = {}
        for ts, wl in sent:
            expected.setdefault(ts - ts % 20, []).append(wl)
        want = [(iso(t), sum(v) / len(v)) for t, v in sorted(expected.items())]

        def history(client: httpx.Client) -> list[tuple[str, float]]:
            r = client.get("/api/v1/history/metrics", params=params)
            assert r.status_code == 200, r.text
            assert r.json()["source"] == "local"
            return [(p["time"], p["value"]) for p in r.json()["points"]]

        answers: dict[str, Any] = {}

        def complete(points: list[tuple[str, float]]) -> bool:
            return [t for t, _ in points] == [t for t, _ in want] and all(
                math.isclose(v, w, rel_tol=1e-12) for (_, v), (_, w) in zip(points, want, strict=True))

        def converged() -> bool:  # each replica flushes its samples within flushIntervalSeconds
            answers["a"], answers["b"] = history(ca), history(cb)
            return complete(answers["a"]) and complete(answers["b"])

        wait_until(converged, 15, "all four reports in the history of both replicas", interval=0.2)
        assert answers["a"] == answers["b"]

        # Forecast: both replicas fit the same shared history (with four points in at most two
        # 5-minute slots, the model is the last slot's mean) and answer the same.
        last = max(math.floor(ts / 300) for ts, _ in sent)
        in_last = [wl for ts, wl in sent if math.floor(ts / 300) == last]
        fa = ca.get("/api/v1/monitor/forecast", params={"cluster": cluster, "minutes": 30}).json()
        fb = cb.get("/api/v1/monitor/forecast", params={"cluster": cluster, "minutes": 30}).json()
        assert fa["waterLevel"] is not None and fa["waterLevel"] == fb["waterLevel"]
        assert fa["waterLevel"] == pytest.approx(sum(in_last) / len(in_last), rel=1e-12)
