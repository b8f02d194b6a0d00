"""Pull without agents: a real Prometheus scrapes a `drods sim` cluster; DRO-DS's Prometheus collector
queries it with the default PromQL templates and the cluster's status reflects the scraped values."""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml
from prometheus_client.parser import text_string_to_metric_families

from drods.assembly import Component
from drods.sim.harness import SimProcess
from drods.store.sqlite import SqliteStore
from tests.free_port import free_port
from tests.monitor_e2e.conftest import Clock, eventually, fast_settings, serve

GIB = 1024**3
PROMETHEUS = os.environ.get("PROMETHEUS_BINARY") or shutil.which("prometheus")


@pytest.fixture
def sim(tmp_path: Path) -> Iterator[SimProcess]:
    proc = SimProcess("prom-sim", tmp_path / "sims", ["--no-tls", "--nodes", "2", "--node-cpu", "8",
                                                     "--node-memory", "32Gi", "--preload", "0.5"]).start()
    try:
        yield proc.wait_ready(60)
    finally:
        proc.stop()


@pytest.fixture
def prometheus(tmp_path: Path, sim: SimProcess) -> Iterator[str]:
    if PROMETHEUS is None:
        if os.environ.get("DRODS_REQUIRE_PROMETHEUS") == "1":
            pytest.fail("prometheus binary not found")
        pytest.skip("prometheus binary not found (apt-get install prometheus)")
    token = yaml.safe_load(sim.kubeconfig.read_text())["users"][0]["user"]["token"]
    target = sim.server.removeprefix("http://").rstrip("/")
    config = {
        "global": {"scrape_interval": "1s", "evaluation_interval": "1s"},
        "scrape_configs": [{"job_name": "sims", "static_configs": [{"targets": [target]}],
                            "authorization": {"credentials": token}}],
    }
    cfg = tmp_path / "prometheus.yml"
    cfg.write_text(yaml.safe_dump(config))
    port = free_port()
    log = open(tmp_path / "prometheus.log", "wb")  # noqa: SIM115 - closed below
    proc = subprocess.Popen([PROMETHEUS, f"--config.file={cfg}", f"--storage.tsdb.path={tmp_path / 'tsdb'}",
                             f"--web.listen-address=127.0.0.1:{port}", "--log.level=warn"],
                            stdout=log, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 30
        while True:
            assert proc.poll() is None, (tmp_path / "prometheus.log").read_text()[-2000:]
            try:
                if httpx.get(f"{url}/-/ready", timeout=1).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            assert time.monotonic() < deadline, "prometheus not ready in 30s"
            time.sleep(0.05)
        yield url
    finally:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        log.close()


def scrape(sim: SimProcess) -> dict[str, Any]:
    """What the sim exports right now, reduced to the numbers DRO-DS should end up with."""
    token = yaml.safe_load(sim.kubeconfig.read_text())["users"][0]["user"]["token"]
    text = httpx.get(f"{sim.server}/metrics", headers={"Authorization": f"Bearer {token}"}, timeout=5).text
    out: dict[str, Any] = {"cores": 0, "mem_total": 0.0, "mem_avail": 0.0, "cpu_used": 0.0, "running": 0,
                           "pods_alloc": 0.0}
    for fam in text_string_to_metric_families(text):
        for s in fam.samples:
            if s.name == "node_cpu_seconds_total" and s.labels.get("mode") == "idle":
                out["cores"] += 1
            elif s.name == "node_memory_MemTotal_bytes":
                out["mem_total"] += s.value
            elif s.name == "node_memory_MemAvailable_bytes":
                out["mem_avail"] += s.value
            elif s.name == "drods_sim_node_usage" and s.labels.get("resource") == "cpu":
                out["cpu_used"] += s.value
            elif s.name == "kube_pod_status_phase" and s.labels.get("phase") == "Running":
                out["running"] += int(s.value)
            elif s.name == "kube_node_status_allocatable" and s.labels.get("resource") == "pods":
                out["pods_alloc"] += s.value
    return out


async def test_prometheus_collector_against_a_real_prometheus(tmp_path: Path, sim: SimProcess,
                                                              prometheus: str) -> None:
    async with httpx.AsyncClient(base_url=prometheus, timeout=5) as prom:
        async def window_filled() -> bool:  # rate(...[5s]) is exact once 5 s of 1 s scrapes exist
            r = await prom.get("/api/v1/query",
                               params={"query": 'min(count_over_time(node_cpu_seconds_total{cluster="prom-sim"}[6s]))'})
            result = r.json()["data"]["result"]
            return bool(result) and float(result[0]["value"][1]) >= 5

        await eventually(window_filled, 30, "6 s of scrapes in Prometheus")

    expected = await asyncio.to_thread(scrape, sim)
    assert expected["cores"] == 16 and expected["running"] > 0 and expected["cpu_used"] > 0
    settings = fast_settings(promqlWindow="5s")
    async with serve(SqliteStore(str(tmp_path / "drods.db")), tmp_path / "data", settings, Clock(live=True),
                     frozenset({Component.COLLECTORS})) as mon:
        await mon.register("prom-sim", prometheus=prometheus)

        async def pulled() -> dict[str, Any] | None:
            kv = await mon.store.get("/status/clusters/prom-sim")
            return json.loads(kv.value) if kv is not None else None

        doc = await eventually(pulled, 20, "a status pulled from Prometheus")
        status = doc["status"]
        assert status["source"] == "prometheus" and doc["observed"]["cpu"]["capacity"]["source"] == "prometheus"
        assert status["cpu"]["capacity"] == 16.0 and status["cpu"]["allocatable"] == 16.0
        assert status["memory"]["capacity"] == pytest.approx(expected["mem_total"] / GIB)
        assert status["memory"]["used"] == pytest.approx((expected["mem_total"] - expected["mem_avail"]) / GIB,
                                                         rel=0.02)
        # CPU comes from rate() over scraped counters: scrape-time jitter on a busy 2-CPU box moves it a little.
        assert status["cpu"]["used"] == pytest.approx(expected["cpu_used"], rel=0.1)
        assert status["pods"] == {"used": expected["running"], "capacity": expected["pods_alloc"]}
        # rate() over the sim's interface counters (its nodes' own traffic): measured, and not a 0
        assert status["network"]["inMbps"] > 0 and status["network"]["rxBytesPerSecond"] == pytest.approx(
            status["network"]["inMbps"] * 125_000, rel=1e-3)
        assert status["waterLevel"] == pytest.approx(
            max(expected["cpu_used"] / 16, 1 - expected["mem_avail"] / expected["mem_total"]), abs=0.06)

        # History of a cluster with spec.prometheus comes from its Prometheus (range query).
        r = await mon.call("GET", "/api/v1/history/metrics",
                           params={"cluster": "prom-sim", "metric": "memory.utilisation", "step": "1s",
                                   "startTime": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(time.time() - 20))})
        assert r.status_code == 200, r.text
        body = r.json()
        assert body["source"] == "prometheus" and len(body["points"]) >= 3
        assert body["points"][-1]["value"] == pytest.approx(1 - expected["mem_avail"] / expected["mem_total"],
                                                            rel=0.02)
        r = await mon.call("GET", "/api/v1/history/metrics",
                           params={"cluster": "prom-sim", "metric": "memory.utilisation", "source": "local"})
        assert r.json()["source"] == "local"

        # Prometheus gone → the collector's failures are logged (once per interval), not fatal.
        await mon.call("PATCH", "/api/v1/clusters/prom-sim", json={"prometheus": "http://127.0.0.1:9"},
                       headers={"Content-Type": "application/merge-patch+json"})

        async def collect_failed() -> list[dict[str, Any]] | None:
            r = await mon.call("GET", "/api/v1/history/failures", params={"kind": "CollectFailed"})
            return r.json()["items"] or None

        (entry,) = await eventually(collect_failed, 20, "CollectFailed entry")
        assert entry["cluster"] == "prom-sim" and entry["details"]["source"] == "prometheus"
