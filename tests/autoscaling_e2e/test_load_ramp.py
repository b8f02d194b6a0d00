"""Federated autoscaling end to end (F5, F6): a load ramp scales the total out across clusters and back in.

A real HTTP control plane (scheduler, resource detector, autoscaler, monitoring); three pull-mode
clusters fed by a reporter that models the application and each cluster's agent: a total load of
``L`` cores shared evenly by the workload's replicas, each requesting 1 core, on top of a cluster's
own pods (half busy). A cluster reports its status through ``PUT /api/v1/metrics``, and the
workload's own pods' use in each cluster (``status.clusters[].usage``, what its agent measures and
the binding controller rolls up) follows from where the scheduler placed the replicas — so scaling
out lowers utilisation, as it does in a real cluster, and the loop closes. Nothing is stubbed; time
is compressed (sync every 0.3 s,
scale-down window 1 s).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Callable
from datetime import UTC, datetime
from typing import Any

from drods.errors import Conflict, NotFound
from drods.model.kinds import BINDING
from drods.model.quantity import format_cpu
from tests.scheduler_e2e.conftest import Plane, eventually, placement

DEPLOYMENTS = "/apis/apps/v1/namespaces/default/deployments"
FHPAS = "/apis/multicluster.io/v1alpha1/namespaces/default/federatedhpas"
CRONS = "/apis/multicluster.io/v1alpha1/namespaces/default/cronfederatedhpas"
RPP = "/apis/multicluster.io/v1alpha1/resourceplacementpolicies"
BINDING_NAME = "deployment-default-web"
# cluster → (own pods' requested cores, their use): half busy, so they don't bias the target.
OWN = {"east": (4.0, 2.0), "west": (6.0, 3.0), "north": (2.0, 1.0)}
CORES = 12.0  # small clusters: 17 one-core replicas cannot fit in one

def deployment() -> dict[str, Any]:
    return {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web", "namespace": "default"},
            "spec": {"replicas": 2, "selector": {"matchLabels": {"app": "web"}},
                     "template": {"metadata": {"labels": {"app": "web"}}, "spec": {"containers": [
                         {"name": "app", "image": "nginx", "resources": {"requests": {"cpu": "1"}}}]}}}}


def fhpa(name: str = "web") -> dict[str, Any]:
    return {"apiVersion": "multicluster.io/v1alpha1", "kind": "FederatedHPA",
            "metadata": {"name": name, "namespace": "default"},
            "spec": {"scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "web"},
                     "minReplicas": 2, "maxReplicas": 24,
                     "metrics": [{"type": "Resource", "resource": {
                         "name": "cpu", "target": {"type": "Utilization", "averageUtilization": 50}}}],
                     "behavior": {"scaleUp": {"stabilizationWindowSeconds": 0,
                                              "policies": [{"type": "Pods", "value": 8, "periodSeconds": 1}]},
                                  "scaleDown": {"stabilizationWindowSeconds": 1,
                                                "policies": [{"type": "Percent", "value": 100,
                                                              "periodSeconds": 1}]}}}}


@contextlib.asynccontextmanager
async def _app_load(plane: Plane, load: dict[str, float]) -> AsyncIterator[None]:
    """Every 0.1 s each cluster reports its use under the current placement and ``load["cores"]``."""
    for name in OWN:
        await plane.register(name)

    async def once() -> None:
        b = await plane.ctx.registry.try_get(BINDING, BINDING_NAME)
        # a status without a placement is nothing placed (one with only `clusters: []` was seen once, in a run
        # whose plane had lost its leases; the loop died on it and the reports stopped)
        where = placement({"placement": ((b or {}).get("status") or {}).get("placement") or []})
        total = sum(where.values())
        await _report_usage(plane, {c: (n, n * load["cores"] / total) for c, n in where.items()})
        for name, (own_req, own_used) in OWN.items():
            mine = where.get(name, 0)
            used = own_used + (mine * load["cores"] / total if total else 0.0)
            body = {"cluster": name, "timestamp": datetime.now(UTC).isoformat(), "cpuCapacity": CORES,
                    "cpuUsage": 100.0 * used / CORES, "memoryCapacity": 256, "memoryAvailable": 192,
                    "cpuAllocatable": CORES, "cpuAllocated": own_req + mine * 1.0}
            r = await plane.call("PUT", "/api/v1/metrics", json=body)
            assert r.status_code == 200, r.text

    async def loop() -> None:
        while True:
            await once()
            await asyncio.sleep(0.1)  # the agents' report interval, not a wait for an outcome

    await once()
    task = asyncio.create_task(loop())
    try:
        await plane.seen(*OWN)
        yield
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task


async def _report_usage(plane: Plane, per_cluster: dict[str, tuple[int, float]]) -> None:
    """What the clusters' agents report and the binding controller rolls up (this plane runs no member
    controllers): each placed cluster's copy with its pods' use, on ``status.clusters[].usage``."""
    b = await plane.ctx.registry.try_get(BINDING, BINDING_NAME)
    if b is None:
        return
    st = dict(b.get("status") or {})
    st["clusters"] = [{"cluster": c, "replicas": n, "applied": True, "readyReplicas": n, "usage": {
        "cpu": {"used": format_cpu(cores), "requested": str(n)},
        "memory": {"used": f"{64 * n}Mi", "requested": f"{128 * n}Mi"}, "pods": n, "readyPods": n}}
        for c, (n, cores) in sorted(per_cluster.items()) if n]
    with contextlib.suppress(Conflict, NotFound):
        await plane.ctx.registry.update_status(BINDING, BINDING_NAME, st, None,
                                               resource_version=int(b["metadata"]["resourceVersion"]))


async def _replicas(plane: Plane, ok: Callable[[int, dict[str, int]], bool], what: str,
                    within_s: float = 30.0) -> dict[str, int]:
    async def check() -> dict[str, int] | None:
        st = await plane.try_status(BINDING_NAME)
        if st is None or st["scheduledGeneration"] != st["generation"] or st["phase"] == "Pending":
            return None
        got = placement(st)
        return got if ok(st["requested"], got) and sum(got.values()) == st["requested"] else None

    return await eventually(check, within_s, what)


async def test_load_ramp_scales_out_across_clusters_then_back_in(plane: Plane) -> None:
    load = {"cores": 1.0}
    async with _app_load(plane, load):
        assert (await plane.call("POST", DEPLOYMENTS, json=deployment())).status_code == 201
        r = await plane.call("POST", RPP, json={
            "apiVersion": "multicluster.io/v1alpha1", "kind": "ResourcePlacementPolicy",
            "metadata": {"name": "web"},
            "spec": {"resourceSelector": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "web",
                                          "namespace": "default"},
                     "targetClusters": [{"selectorType": "name", "values": list(OWN)}],
                     "placement": {"replicaScheduling": {"replicaSchedulingType": "Divided",
                                                         "replicaDivisionPreference": "Weighted",
                                                         "weightPreference": {"dynamicWeight": "WaterLevel"}}}}})
        assert r.status_code == 201, r.text
        await _replicas(plane, lambda n, _p: n == 2, "the template's 2 replicas placed")

        r = await plane.call("POST", FHPAS, json=fhpa())
        assert r.status_code == 201, r.text
        # A second autoscaler for the same workload is refused, naming the first.
        r = await plane.call("POST", FHPAS, json=fhpa("web-too"))
        assert r.status_code == 409 and "FederatedHPA 'web'" in r.text, r.text
        # A cron driving the FederatedHPA is one of its inputs, not a second owner.
        r = await plane.call("POST", CRONS, json={
            "apiVersion": "multicluster.io/v1alpha1", "kind": "CronFederatedHPA",
            "metadata": {"name": "web-nights", "namespace": "default"},
            "spec": {"scaleTargetRef": {"apiVersion": "multicluster.io/v1alpha1", "kind": "FederatedHPA",
                                        "name": "web"},
                     "rules": [{"name": "new-year", "schedule": "0 0 1 1 *", "targetMaxReplicas": 4}]}})
        assert r.status_code == 201, r.text

        # Burst: 7 cores of load on 2 one-core replicas. Its own pods' utilisation sets the total:
        # ceil(2 × 350 % / 50 %) = 14, each half busy, and the scheduler spreads it over all three clusters.
        load["cores"] = 7.0
        out = await _replicas(plane, lambda n, p: n >= 14 and len([c for c in p if p[c] > 0]) == 3,
                              "a scale-out across the three clusters", within_s=40)
        assert sum(out.values()) <= 24

        r = await plane.call("GET", f"{FHPAS}/web")
        st = r.json()["status"]
        assert st["desiredReplicas"] >= 14 and st["currentMetrics"][0]["resource"]["name"] == "cpu"
        r = await plane.call("GET", f"{DEPLOYMENTS}/web")
        assert r.json()["spec"]["replicas"] == 2  # the user's template is never edited

        # The load goes: back in, near the minimum (the clusters' own half-busy pods share the
        # measurement, so 4 one-core replicas at 1 core of load is within the 10 % tolerance).
        load["cores"] = 1.0
        await _replicas(plane, lambda n, _p: n <= 4, "a scale-in", within_s=40)

        r = await plane.call("GET", "/api/v1/autoscaling/history", params={"workload": "Deployment/default/web"})
        items = r.json()["items"]
        assert any(e["to"] > e["from"] for e in items) and any(e["to"] < e["from"] for e in items)
        up = next(e for e in items if e["to"] > e["from"])
        assert up["metrics"][0]["name"] == "cpu" and up["metrics"][0]["target"] == 50.0 and up["placement"]

        # Deleting the autoscaler gives the replicas back to the template.
        assert (await plane.call("DELETE", f"{FHPAS}/web")).status_code == 200
        await _replicas(plane, lambda n, _p: n == 2, "the template's count again")
