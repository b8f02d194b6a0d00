"""Network traffic measured end to end (S5): a ``drods sim`` member serves its kubelet stats
summary, the control plane reads it through the Kubernetes client every summary interval, and the
rates reach ``/api/v1/monitor/realtime``, the surge detector and the scheduler's network weight.

One real ``drods serve`` (surge warm-up and time constants shortened in its configuration) and one
push-mode sim joined with ``drods cluster join``. The burst is the sim's own (``drods sim traffic``).
"""

from __future__ import annotations

import signal
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import httpx
import pytest

from drods.sim.harness import SimProcess
from tests.members_e2e.conftest import deploy_path, deployment, wait_for
from tests.members_e2e.test_fullpath import RPP, binding_of, policy
from tests.server_process import ServerProcess

SIM = "sim-traffic"
INTERVAL = 1.0  # members.summaryIntervalSeconds: one traffic reading per second
CONFIG = f"""apiVersion: config.drods.io/v1alpha1
kind: DRODSConfiguration
monitoring:
  rateMinIntervalSeconds: 0
  realtimeMinIntervalSeconds: 0
  flushIntervalSeconds: 0.05
  surgeWarmupSeconds: 3
  surgeBaselineSeconds: 60
  surgeFastSeconds: 1
members:
  probeIntervalSeconds: 0.5
  summaryIntervalSeconds: {INTERVAL}
  statusPollSeconds: 0.5
"""


@dataclass
class Plane:
    server: ServerProcess
    http: httpx.Client
    sim: SimProcess

    def realtime(self) -> dict[str, Any]:
        return dict(self.http.get("/api/v1/monitor/realtime").json())

    def surge(self) -> dict[str, Any]:
        return dict(self.http.get("/api/v1/monitor/surge").json()["fleet"])

    def network_weight(self, workload: str) -> float | None:
        items = self.http.get("/api/v1/history/schedules", params={"binding": binding_of(workload)}).json()["items"]
        return float(items[0]["weights"]["NetworkLocality"]) if items else None

    def place(self, name: str) -> float:
        """A one-replica workload placed now: the NetworkLocality weight its decision used."""
        assert self.http.post(RPP, json=policy(name, name, [SIM])).status_code == 201
        assert self.http.post(deploy_path(), json=deployment(name, 1, cpu="10m")).status_code == 201
        return wait_for(lambda: self.network_weight(name), 20, f"{name}'s scheduling decision")


@pytest.fixture(scope="module")
def plane(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Plane]:
    root = tmp_path_factory.mktemp("traffic")
    sim = SimProcess(SIM, root / "sims", ["--city", "DFW"]).start()
    data = root / "server"
    data.mkdir()
    (data / "drods.yaml").write_text(CONFIG)
    server = ServerProcess(data)
    try:
        server.start()
        sim.wait_ready(60)
        done = server.run_cli("cluster", "join", SIM, "--kubeconfig", str(sim.kubeconfig), "--server", server.url,
                              "--token", server.token("admin"))
        assert done.returncode == 0, done.stderr
        with server.client(timeout=10) as http:
            yield Plane(server, http, sim)
    finally:
        if sim.proc is not None and sim.proc.poll() is None:
            sim.proc.send_signal(signal.SIGTERM)
        server.stop(check=False)
        sim.stop()


def test_a_traffic_burst_is_measured_raises_the_network_weight_and_falls_back(plane: Plane) -> None:
    p = plane
    assert p.http.post(RPP, json=policy("web", "web", [SIM])).status_code == 201
    assert p.http.post(deploy_path(), json=deployment("web", 2, cpu="100m")).status_code == 201

    def traffic() -> float | None:
        rt = p.realtime()
        return rt["networkTrafficMbps"] if rt["networkTraffic"] != "unknown" else None

    # 2 running pods × the sim's default 2 Mbps each, measured from the kubelet's counters
    wait_for(lambda: (t := traffic()) is not None and 3.0 <= t <= 5.0, 30, "the pods' traffic measured",
             what_else=p.realtime)
    calm = p.place("calm")
    assert not p.surge()["active"]

    p.sim.traffic("Deployment/default/web", 400.0)
    burst_at = time.monotonic()
    wait_for(lambda: (t := traffic()) is not None and t > 300, 10, "the burst in the realtime view",
             what_else=p.realtime)
    wait_for(lambda: p.surge()["active"], 2 * INTERVAL + 2, "a surge within two report intervals",
             what_else=p.surge)
    assert time.monotonic() - burst_at < 2 * INTERVAL + 10
    surging = p.place("surging")
    assert surging > calm  # S5: the network weight rises in a surge

    p.sim.traffic("Deployment/default/web", None)  # the burst ends
    wait_for(lambda: not p.surge()["active"], 20, "the surge to end", what_else=p.surge)
    wait_for(lambda: (t := traffic()) is not None and t < 10, 10, "traffic back to the pods' own")
    assert p.place("after") == pytest.approx(calm, rel=0.05)
