"""Application feedback from a real Prometheus (H3): the application's p99 latency is a series in
Prometheus (written through its remote-write receiver, as an application's exporter would be
scraped); the FederatedHPA's ``spec.feedback.promql`` query drives the same PI loop as
``PUT /api/v1/feedback`` — more replicas until the target is met, then still. A query answering
several series is reported on the status, not guessed from.

The application is the seeded simulation of `test_feedback` (p99 = 50 ms / (1 − ρ)): with 100
units of load, a 200 ms target needs at least 14 replicas."""

from __future__ import annotations

import asyncio
import contextlib
import random
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from drods.autoscaling.controller import AutoscalerSettings
from drods.autoscaling.feedback import FeedbackSettings
from drods.model.kinds import BINDING
from drods.monitor import remote_write as rw
from drods.store.sqlite import SqliteStore
from tests.autoscaling_e2e.conftest import MONITORING
from tests.autoscaling_e2e.test_feedback import _feedback_hpa
from tests.autoscaling_e2e.test_load_ramp import BINDING_NAME, DEPLOYMENTS, FHPAS, RPP, deployment
from tests.prometheus_server import PrometheusServer, require_prometheus
from tests.scheduler_e2e.conftest import Plane, eventually, serve

QUERY = 'max(app_latency_p99_ms{app="web"})'


@pytest.fixture(scope="module")
def prometheus(tmp_path_factory: pytest.TempPathFactory) -> Iterator[PrometheusServer]:
    with PrometheusServer(require_prometheus(), tmp_path_factory.mktemp("prometheus")) as server:
        yield server


@pytest.fixture
async def plane(prometheus: PrometheusServer, tmp_path: Path) -> AsyncIterator[Plane]:
    settings = AutoscalerSettings(sync_seconds=0.3, feedback=FeedbackSettings(cooldown_s=0.6),
                                  feedback_prometheus_url=prometheus.url)
    from drods.assembly import Component

    async with serve(SqliteStore(str(tmp_path / "s.db")), tmp_path / "data",
                     components=frozenset({Component.AUTOSCALER}), monitoring=MONITORING,
                     autoscaling=settings) as p:
        yield p


@contextlib.asynccontextmanager
async def _exporter(plane: Plane, prometheus: PrometheusServer, trace: list[int],
                    extra: dict[str, str] | None = None) -> AsyncIterator[None]:
    """Every 0.1 s the simulated application's p99 under the current replicas goes to Prometheus."""
    rng = random.Random(7)

    async def loop(http: httpx.AsyncClient) -> None:
        while True:
            b = await plane.ctx.registry.try_get(BINDING, BINDING_NAME)
            n = int((b or {}).get("spec", {}).get("replicas", 2))
            trace.append(n)
            rho = min(100.0 / (n * 10.0), 0.98)
            p99 = 50.0 / (1 - rho) * (1 + rng.gauss(0, 0.02))
            series = [rw.Series({"__name__": "app_latency_p99_ms", "app": "web", "instance": "a"},
                                [(int(time.time() * 1000), p99)])]
            if extra:
                series.append(rw.Series({"__name__": "app_latency_p99_ms", "app": "web", **extra},
                                        [(int(time.time() * 1000), p99)]))
            r = await http.post(f"{prometheus.url}/api/v1/write", content=rw.encode(series), headers=rw.HEADERS)
            assert r.is_success, r.text
            await asyncio.sleep(0.1)  # the exporter's interval, not a wait for an outcome

    async with httpx.AsyncClient(timeout=5) as http:
        task = asyncio.create_task(loop(http))
        try:
            yield
        finally:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task


async def _workload(plane: Plane, hpa: dict[str, Any]) -> None:
    await plane.cluster("east", 10, report={"cores": 64})
    await plane.seen("east")
    assert (await plane.call("POST", DEPLOYMENTS, json=deployment())).status_code == 201
    r = await plane.call("POST", RPP, json={
        "apiVersion": "multicluster.io/v1alpha1", "kind": "ResourcePlacementPolicy", "metadata": {"name": "web"},
        "spec": {"resourceSelector": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "web",
                                      "namespace": "default"},
                 "targetClusters": [{"selectorType": "name", "values": ["east"]}]}})
    assert r.status_code == 201, r.text
    assert (await plane.call("POST", FHPAS, json=hpa)).status_code == 201


def _promql_hpa() -> dict[str, Any]:
    hpa = _feedback_hpa()
    hpa["spec"]["feedback"]["promql"] = {"latencyP99Ms": QUERY}
    return hpa


async def test_latency_from_prometheus_met_without_oscillating(plane: Plane, prometheus: PrometheusServer) -> None:
    await _workload(plane, _promql_hpa())
    trace: list[int] = []
    async with _exporter(plane, prometheus, trace):
        async def met() -> bool:
            return len(trace) > 0 and trace[-1] >= 14

        await eventually(met, 40.0, "the latency target met from Prometheus")
        settled_at = len(trace)

        async def quiet() -> bool:
            return len(trace) >= settled_at + 30

        await eventually(quiet, 20.0, "more samples after settling")
    after = trace[settled_at - 1:]
    assert max(after) <= 17 and min(after) >= 14, trace
    fb = (await plane.call("GET", f"{FHPAS}/web")).json()["status"]["feedback"]
    assert fb["source"] == "promql" and "sourceError" not in fb, fb
    assert 0 < fb["observed"]["latencyP99Ms"] < 260, fb  # what Prometheus answered, near the target


async def test_a_query_answering_several_series_is_reported(plane: Plane, prometheus: PrometheusServer) -> None:
    hpa = _promql_hpa()
    hpa["spec"]["feedback"]["promql"] = {"latencyP99Ms": 'app_latency_p99_ms{app="web"}'}  # not aggregated
    await _workload(plane, hpa)
    trace: list[int] = []
    async with _exporter(plane, prometheus, trace, extra={"instance": "b"}):
        async def reported() -> dict[str, Any] | None:
            st = (await plane.call("GET", f"{FHPAS}/web")).json().get("status") or {}
            fb = st.get("feedback") or {}
            return fb if "sourceError" in fb else None

        fb = await eventually(reported, 20.0, "the bad query on the status")
    assert "2 series" in fb["sourceError"] and fb["source"] == "promql", fb
    assert set(trace) == {2}, trace  # nothing decided from an ambiguous answer


async def test_pods_object_and_external_metrics_from_prometheus(plane: Plane, prometheus: PrometheusServer) -> None:
    """Karmada's metric sources beside Resource: a Pods metric averaged over the workload's own pods (a
    pod of another Deployment whose name starts alike is not one of them), an External metric's
    total per pod against its AverageValue, and an Object metric without series named as unavailable."""
    now = int(time.time() * 1000)
    series = [rw.Series({"__name__": "http_requests_per_second", "namespace": "default", "pod": pod}, [(now, v)])
              for pod, v in (("web-7d9f8c6b5-abcde", 30.0), ("web-7d9f8c6b5-fghij", 30.0),
                             ("web-api-5c4b3-klmno", 1000.0))]
    series.append(rw.Series({"__name__": "queue_messages_ready", "queue": "orders"}, [(now, 95.0)]))
    async with httpx.AsyncClient(timeout=5) as http:
        r = await http.post(f"{prometheus.url}/api/v1/write", content=rw.encode(series), headers=rw.HEADERS)
        assert r.is_success, r.text
    hpa = _feedback_hpa()
    del hpa["spec"]["feedback"]
    hpa["spec"].update(maxReplicas=10, metrics=[
        {"type": "Pods", "pods": {"metric": {"name": "http_requests_per_second"},
                                  "target": {"type": "AverageValue", "averageValue": "10"}}},
        {"type": "External", "external": {"metric": {"name": "queue_messages_ready",
                                                     "selector": {"matchLabels": {"queue": "orders"}}},
                                          "target": {"type": "AverageValue", "averageValue": "10"}}},
        {"type": "Object", "object": {"describedObject": {"apiVersion": "networking.k8s.io/v1", "kind": "Ingress",
                                                          "name": "main"},
                                      "metric": {"name": "ingress_requests_per_second"},
                                      "target": {"type": "Value", "value": "100"}}}])
    await _workload(plane, hpa)

    async def scaled() -> dict[str, Any] | None:
        st = (await plane.call("GET", f"{FHPAS}/web")).json().get("status") or {}
        return st if st.get("desiredReplicas") == 10 else None

    st = await eventually(scaled, 30.0, "the FederatedHPA scaled on its Pods and External metrics")
    current = {m["type"]: m[m["type"].lower()] for m in st["currentMetrics"]}
    assert current["Pods"]["current"] == {"averageValue": "30"}, current  # web-api's pod left out
    assert current["Pods"]["metric"] == {"name": "http_requests_per_second"}
    assert current["External"]["metric"]["selector"] == {"matchLabels": {"queue": "orders"}, "matchExpressions": []}
    assert "Object" not in current
    conds = {c["type"]: c for c in st["conditions"]}
    assert conds["ScalingActive"]["status"] == "True"
    missing = conds["MetricsUnavailable"]["message"]
    assert "Object metric ingress_requests_per_second" in missing and "no series" in missing, missing
