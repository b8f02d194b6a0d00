"""Per-cluster weights from application feedback end to end (H3): the application's clients are
unevenly spread (east has three times west's traffic), it reports its p99 per cluster and for the
whole; the FederatedHPA's loop moves the total and the weights together, the scheduler divides the
total by the weights, until every cluster meets the target — with fewer replicas than an even split
would need, and without oscillating.

The application is a seeded simulation: in each cluster p99 = 50 ms / (1 − ρ), ρ = traffic /
(replicas × 10), ±2 % noise; the whole's p99 is the worse cluster's. A 200 ms target needs ρ ≤ 0.75:
east (75 units) at least 10 replicas, west (25) at least 4 — 14 in all, where an even split needs 20.
"""

from __future__ import annotations

import asyncio
import contextlib
import random
from collections.abc import AsyncIterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from drods.assembly import Component
from drods.autoscaling.cluster_weights import WeightSettings
from drods.autoscaling.controller import AutoscalerSettings
from drods.autoscaling.feedback import FeedbackSettings
from drods.model.kinds import BINDING
from drods.store.sqlite import SqliteStore
from tests.autoscaling_e2e.conftest import MONITORING
from tests.autoscaling_e2e.test_feedback import WEB, _feedback_hpa
from tests.autoscaling_e2e.test_load_ramp import BINDING_NAME, DEPLOYMENTS, FHPAS, RPP, deployment
from tests.scheduler_e2e.conftest import Plane, eventually, placement, serve

TRAFFIC = {"east": 75.0, "west": 25.0}


@contextlib.asynccontextmanager
async def _plane(tmp_path: Path) -> AsyncIterator[Plane]:
    settings = AutoscalerSettings(sync_seconds=0.3, feedback=FeedbackSettings(cooldown_s=0.6),
                                  weights=WeightSettings(cooldown_s=0.6, gain=0.5, max_shift=0.3))
    async with serve(SqliteStore(str(tmp_path / "s.db")), tmp_path / "data",
                     components=frozenset({Component.AUTOSCALER}), monitoring=MONITORING, autoscaling=settings) as p:
        yield p


@contextlib.asynccontextmanager
async def _application(plane: Plane, trace: list[dict[str, int]]) -> AsyncIterator[None]:
    rng = random.Random(11)

    async def loop() -> None:
        while True:
            b = await plane.ctx.registry.try_get(BINDING, BINDING_NAME)
            where = placement((b or {}).get("status") or {"placement": []})
            trace.append(where)
            now = datetime.now(UTC).isoformat()
            worst = 0.0
            for c, load in TRAFFIC.items():
                rho = min(load / (max(where.get(c, 0), 1) * 10.0), 0.98)
                p99 = 50.0 / (1 - rho) * (1 + rng.gauss(0, 0.02))
                worst = max(worst, p99)
                r = await plane.call("PUT", "/api/v1/feedback", role="operator", json={
                    "workload": WEB, "cluster": c, "metrics": {"latencyP99Ms": p99}, "timestamp": now})
                assert r.status_code == 200, r.text
            r = await plane.call("PUT", "/api/v1/feedback", role="operator", json={
                "workload": WEB, "metrics": {"latencyP99Ms": worst}, "timestamp": now})
            assert r.status_code == 200, r.text
            await asyncio.sleep(0.1)  # the application's report interval, not a wait for an outcome

    task = asyncio.create_task(loop())
    try:
        yield
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task


async def test_weights_follow_the_traffic_and_the_targets_are_met(tmp_path: Path) -> None:
    async with _plane(tmp_path) as plane:
        for c in TRAFFIC:
            await plane.cluster(c, 10, report={"cores": 64})
        await plane.seen(*TRAFFIC)
        assert (await plane.call("POST", DEPLOYMENTS, json=deployment())).status_code == 201
        r = await plane.call("POST", RPP, json={
            "apiVersion": "multicluster.io/v1alpha1", "kind": "ResourcePlacementPolicy",
            "metadata": {"name": "web"},
            "spec": {"resourceSelector": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "web",
                                          "namespace": "default"},
                     "targetClusters": [{"selectorType": "name", "values": list(TRAFFIC)}],
                     "placement": {"replicaScheduling": {"replicaSchedulingType": "Divided",
                                                         "replicaDivisionPreference": "Weighted",
                                                         "weightPreference": {"dynamicWeight": "WaterLevel"}}}}})
        assert r.status_code == 201, r.text
        r = await plane.call("PUT", "/api/v1/feedback", json={
            "workload": WEB, "cluster": "nowhere", "metrics": {"latencyP99Ms": 1.0},
            "timestamp": datetime.now(UTC).isoformat()})
        assert r.status_code == 404, r.text  # an unregistered cluster
        trace: list[dict[str, int]] = []
        async with _application(plane, trace):
            assert (await plane.call("POST", FHPAS, json=_feedback_hpa())).status_code == 201

            async def settled() -> bool:  # ρ ≤ 0.78 everywhere (the target, within noise), with fewer than 18
                return bool(trace) and all(trace[-1].get(c, 0) * 10 * 0.78 >= t for c, t in TRAFFIC.items()) \
                    and sum(trace[-1].values()) <= 17

            await eventually(settled, 60.0, "every cluster meets the target with fewer replicas than an even split")
            settled_at = len(trace)

            async def quiet() -> bool:
                return len(trace) >= settled_at + 30

            await eventually(quiet, 20.0, "more reports after settling")
        status: dict[str, Any] = (await plane.call("GET", f"{FHPAS}/web")).json()["status"]
    weights = status["clusterWeights"]
    assert weights["east"] > weights["west"], weights  # east has 3/4 of the traffic
    after = trace[settled_at - 1:]
    totals = [sum(w.values()) for w in after]
    assert max(totals) <= 18, trace[-40:]  # fewer than the 20 an even split needs
    assert all(w.get("east", 0) >= 9 and w.get("west", 0) >= 3 for w in after), [
        (w.get("east"), w.get("west")) for w in after]  # no swing back
    # east rises with the total, peaks while the total is too large, then settles: after its peak it
    # moves at most 4 replicas at a time (the loop's step bound) and turns at most 6 times (noise, reschedules)
    east = [w.get("east", 0) for w in trace]
    peak = east.index(max(east))
    moves = [b - a for a, b in zip(east[peak:], east[peak + 1:], strict=False) if b != a]
    reversals = sum(1 for x, y in zip(moves, moves[1:], strict=False) if (x > 0) != (y > 0))
    steps = [a for a, b in zip(east, [None, *east], strict=False) if a != b]
    assert max(map(abs, moves), default=0) <= 4 and reversals <= 6, steps
