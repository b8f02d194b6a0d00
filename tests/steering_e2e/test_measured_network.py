"""C2 measured: three ``drods sim`` members emulate their distance from the control plane's site
(``--latency-to DFW=…``); the control plane's probe measures round trips, jitter and loss and writes
them as ``source: measured``; steering follows a latency change."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from drods.assembly import Component
from drods.cli.cluster_ops import load_kubeconfig
from drods.sim.harness import SimProcess
from drods.steering.settings import ProbeSettings, SteeringSettings
from drods.store import Store
from tests.scheduler_e2e.conftest import Plane, eventually, serve
from tests.steering_e2e.test_steering import REGS, chosen

pytestmark = pytest.mark.timeout(120)

CONFIGURED = {"aws-dfw": 10.0, "gcp-ord": 40.0, "az-lhr": 70.0}
SPECS = {"aws-dfw": "DFW=10", "gcp-ord": "DFW=40±4", "az-lhr": "DFW=70±4,loss=0.2"}
REGISTRATION = """
apiVersion: multicluster.io/v1alpha1
kind: ServiceRegistration
metadata: {name: probe, namespace: default}
spec:
  serviceId: probe.example
  workload: {apiVersion: apps/v1, kind: Deployment, name: probe, namespace: default}
  sensitiveAttributes: [delay]
  sla: {maxDelayMs: 120, maxLossPercent: 50}
  strategy: experienceFirst
  evaluation: e2eDelay
  clientSites: [DFW]
  output: preferred
  processing: {serviceTimeMs: 10}
  statusIntervalSeconds: 5
"""


@pytest.fixture(scope="module")
def sims(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, SimProcess]]:
    root = tmp_path_factory.mktemp("probe-sims")
    sims = {n: SimProcess(n, root, ["--nodes", "1", "--latency-to", spec]).start() for n, spec in SPECS.items()}
    try:
        for s in sims.values():
            s.wait_ready(60)
        yield sims
    finally:
        for s in sims.values():
            s.stop()


@pytest.fixture
async def plane(store_factory: Callable[[], Store], tmp_path: Path) -> AsyncIterator[Plane]:
    store = store_factory()
    await store.delete_prefix("/")
    steering = SteeringSettings(minIntervalSeconds=0.0, coalesceSeconds=0.02, probe=ProbeSettings(
        site="DFW", intervalSeconds=0.5, probesPerInterval=7, timeoutSeconds=1.0))
    async with serve(store, tmp_path / "data", components=frozenset({Component.STEERING}), steering=steering) as p:
        yield p


async def measured(plane: Plane) -> dict[str, dict[str, Any]]:
    body = (await plane.call("GET", "/api/v1/network/status?from=DFW")).json()
    return {m["to"]: m for m in body["measurements"] if m.get("source") == "measured"}


def close(got: float | None, want: float) -> bool:
    return got is not None and abs(got - want) <= max(0.2 * want, 5.0)


@pytest.mark.parametrize("store_factory", ["sqlite"], indirect=True)
async def test_the_measured_matrix_matches_the_emulated_distance_and_routes_follow_it(
        plane: Plane, sims: dict[str, SimProcess]) -> None:
    for name, sim in sims.items():
        await plane.register(name, syncMode="Push", endpoint=sim.server,
                             credentials={"kubeconfig": yaml.safe_dump(load_kubeconfig(sim.kubeconfig))})
        await plane.report(name, 20.0)
    # A pushed report for a probed pair stays, as the report; the fresh measurement wins.
    r = await plane.call("PUT", "/api/v1/network/status", json={"measurements": [
        {"from": "DFW", "to": "gcp-ord", "delayMs": 1.0, "source": "legacy-agent"}]})
    assert r.status_code == 200, r.text

    async def matrix() -> dict[str, dict[str, Any]] | None:
        got = await measured(plane)
        return got if all(close(got.get(c, {}).get("rttMs"), ms) for c, ms in CONFIGURED.items()) else None

    got = await eventually(matrix, 60.0, "measured round trips within 20 % (or 5 ms) of the emulated ones")
    for name in CONFIGURED:
        entry = got[name]
        assert entry["delayMs"] == entry["rttMs"] and entry["measuredAt"], entry
        assert {"source", "rttMs", "jitterMs", "lossRatio", "measuredAt"} <= set(entry)
    assert got["aws-dfw"]["lossRatio"] == 0.0
    assert got["gcp-ord"]["reported"] == {"delayMs": 1.0, "timestamp": got["gcp-ord"]["reported"]["timestamp"],
                                          "reporter": "legacy-agent"}
    assert got["gcp-ord"]["jitterMs"] > 0.0  # ±4 ms emulated

    async def lossy() -> dict[str, Any] | None:
        entry = (await measured(plane)).get("az-lhr") or {}
        return entry if 0.0 < entry.get("lossRatio", 0.0) < 1.0 else None

    await eventually(lossy, 15.0, "az-lhr's emulated loss measured")

    await plane.place({"name": "probe", "replicas": 1,
                       "resource": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "probe",
                                    "namespace": "default"},
                       "targetClusters": list(CONFIGURED),
                       "placement": {"replicaScheduling": {"replicaSchedulingType": "Duplicated"}}})
    r = await plane.call("POST", REGS, content=REGISTRATION, headers={"content-type": "application/yaml"})
    assert r.status_code == 201, r.text

    async def routed(cluster: str) -> dict[str, Any] | None:
        body = await routes_of(plane)
        c = chosen(body, "DFW")
        return body if c is not None and c[0] == cluster else None

    await eventually(lambda: routed("aws-dfw"), 15.0, "DFW routed to the nearest cluster, aws-dfw")
    sims["aws-dfw"].latency("DFW=150")  # aws-dfw moves away: beyond the SLA
    await eventually(lambda: routed("gcp-ord"), 15.0, "DFW's route follows the measured change to gcp-ord")


async def routes_of(plane: Plane) -> dict[str, Any] | None:
    r = await plane.call("GET", "/api/v1/steering/services/probe.example/routes")
    return r.json() if r.status_code == 200 else None  # type: ignore[no-any-return]


