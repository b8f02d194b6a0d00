"""Application feedback end to end (H3): an application reports its p99 latency through
``PUT /api/v1/feedback``; its FederatedHPA's PI loop adds replicas until the target is met, then
stops, without oscillating.

The application is a seeded simulation (p99 = 50 ms / (1 - ρ), ρ = load / (replicas × 10), ±2 %
noise): with 100 units of load, a 200 ms target needs at least 14 replicas.
"""

from __future__ import annotations

import asyncio
import contextlib
import random
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from typing import Any

from drods.model.kinds import BINDING
from tests.autoscaling_e2e.test_load_ramp import BINDING_NAME, DEPLOYMENTS, FHPAS, RPP, deployment
from tests.scheduler_e2e.conftest import Plane, eventually

WEB = {"apiVersion": "apps/v1", "kind": "Deployment", "namespace": "default", "name": "web"}


def _feedback_hpa() -> dict[str, Any]:
    return {"apiVersion": "multicluster.io/v1alpha1", "kind": "FederatedHPA",
            "metadata": {"name": "web", "namespace": "default"},
            "spec": {"scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "web"},
                     "minReplicas": 2, "maxReplicas": 40, "feedback": {"latencyP99Ms": 200},
                     "behavior": {"scaleUp": {"stabilizationWindowSeconds": 0, "policies": [
                                      {"type": "Pods", "value": 8, "periodSeconds": 1}]},
                                  "scaleDown": {"stabilizationWindowSeconds": 0}}}}


@contextlib.asynccontextmanager
async def _application(plane: Plane, trace: list[int], load: float = 100.0) -> AsyncIterator[None]:
    rng = random.Random(7)

    async def loop() -> None:
        while True:
            b = await plane.ctx.registry.try_get(BINDING, BINDING_NAME)
            n = int((b or {}).get("spec", {}).get("replicas", 2))
            trace.append(n)
            rho = min(load / (n * 10.0), 0.98)
            p99 = 50.0 / (1 - rho) * (1 + rng.gauss(0, 0.02))
            r = await plane.call("PUT", "/api/v1/feedback", role="operator", json={
                "workload": WEB, "metrics": {"latencyP99Ms": p99, "errorRate": 0.0},
                "timestamp": datetime.now(UTC).isoformat()})
            assert r.status_code == 200, r.text
            await asyncio.sleep(0.1)  # the application's report interval, not a wait for an outcome

    task = asyncio.create_task(loop())
    try:
        yield
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task


async def test_feedback_validation(plane: Plane) -> None:
    body = {"workload": WEB, "metrics": {"latencyP99Ms": 120.0}, "timestamp": datetime.now(UTC).isoformat()}
    r = await plane.call("PUT", "/api/v1/feedback", json=body)
    assert r.status_code == 404 and r.json()["code"] == "DEPLOYMENT_NOT_FOUND", r.text
    assert (await plane.call("POST", DEPLOYMENTS, json=deployment())).status_code == 201
    assert (await plane.call("PUT", "/api/v1/feedback", json=body)).status_code == 200
    older = {**body, "timestamp": (datetime.now(UTC) - timedelta(seconds=30)).isoformat()}
    r = await plane.call("PUT", "/api/v1/feedback", json=older)
    assert r.status_code == 202 and r.json()["code"] == "OUT_OF_ORDER_REPORT", r.text
    r = await plane.call("PUT", "/api/v1/feedback", json={**body, "metrics": {"errorRate": 2}})
    assert r.status_code == 422 and r.json()["code"] == "VALIDATION_FAILED", r.text
    r = await plane.call("PUT", "/api/v1/feedback", json={**body, "metrics": {}})
    assert r.status_code == 422 and "at least one" in r.json()["message"], r.text
    r = await plane.call("PUT", "/api/v1/feedback", json={**body, "workload": {**WEB, "kind": "Pod"}})
    assert r.status_code == 422, r.text
    r = await plane.call("PUT", "/api/v1/feedback", role="viewer", json=body)
    assert r.status_code == 403, r.text
    # no timestamp: measured now, as a metrics report without one
    r = await plane.call("PUT", "/api/v1/feedback", json={k: v for k, v in body.items() if k != "timestamp"})
    assert r.status_code == 200 and r.json()["timestamp"] >= body["timestamp"][:19], r.text
    for bad in ({**body, "timestamp": "yesterday"}, {**body, "metrics": "fast"}, {**body, "workload": {"kind": "x"}},
                {**body, "timestamp": (datetime.now(UTC) + timedelta(hours=1)).isoformat()}, [], {**body, "x": 1}):
        r = await plane.call("PUT", "/api/v1/feedback", json=bad)
        assert r.status_code == 422 and r.json()["code"] == "VALIDATION_FAILED", (bad, r.text)


async def test_latency_target_met_without_oscillating(plane: Plane) -> None:
    await plane.cluster("east", 10, report={"cores": 64})
    await plane.cluster("west", 10, report={"cores": 64})
    await plane.seen("east", "west")
    assert (await plane.call("POST", DEPLOYMENTS, json=deployment())).status_code == 201
    r = await plane.call("POST", RPP, json={
        "apiVersion": "multicluster.io/v1alpha1", "kind": "ResourcePlacementPolicy", "metadata": {"name": "web"},
        "spec": {"resourceSelector": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "web",
                                      "namespace": "default"},
                 "targetClusters": [{"selectorType": "name", "values": ["east", "west"]}],
                 "placement": {"replicaScheduling": {"replicaSchedulingType": "Divided",
                                                     "replicaDivisionPreference": "Weighted",
                                                     "weightPreference": {"dynamicWeight": "WaterLevel"}}}}})
    assert r.status_code == 201, r.text
    trace: list[int] = []
    async with _application(plane, trace):
        assert (await plane.call("POST", FHPAS, json=_feedback_hpa())).status_code == 201

        async def met() -> bool:
            return len(trace) > 0 and trace[-1] >= 14

        await eventually(met, 40.0, "the latency target met")
        settled_at = len(trace)

        async def quiet() -> bool:  # ~3 s more of reports (and ~10 autoscaler turns)
            return len(trace) >= settled_at + 30

        await eventually(quiet, 20.0, "more reports after settling")
    after = trace[settled_at - 1:]
    assert max(after) <= 17 and min(after) >= 14, trace  # met, not overshot beyond the noise band
    moves = [b - a for a, b in zip(trace, trace[1:], strict=False) if b != a]
    reversals = sum(1 for x, y in zip(moves, moves[1:], strict=False) if (x > 0) != (y > 0))
    assert reversals <= 2, trace
    r = await plane.call("GET", f"{FHPAS}/web")
    fb = r.json()["status"]["feedback"]
    assert fb["reason"] in ("target met", "cool-down", "feedback predates the last step"), fb
