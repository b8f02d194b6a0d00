"""The scheduler in the running control plane: bursts, history, rescheduling, metrics."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from drods.model.reschedule import RescheduleRequest
from tests.scheduler_e2e.conftest import Plane, eventually, placement


async def test_burst_of_1000_spreads_by_water_level(plane: Plane) -> None:
    """Each task alone would fit anywhere; assume-then-bind keeps the burst from piling up."""
    levels = {"w20": 20, "w40": 40, "w60": 60, "w75": 75, "w90": 90}
    for name, pct in levels.items():
        await plane.cluster(name, pct, report={"cores": 256, "mem_gib": 1024})
    await plane.seen(*levels)
    sem = asyncio.Semaphore(32)

    async def post(i: int) -> None:
        async with sem:
            await plane.bind({"name": f"burst-{i:04d}", "replicas": 1, "resources": {"cpu": 0.25, "memory": 0.5}})

    await asyncio.gather(*(post(i) for i in range(1000)))

    async def all_decided() -> list[dict[str, Any]] | None:
        r = await plane.call("GET", "/api/v1/bindings")
        items = r.json()["items"]
        done = [b for b in items if b["status"].get("scheduledGeneration") == b["generation"]]
        return items if len(done) == 1000 else None

    items = await eventually(all_decided, 60, "1000 decisions")
    per: dict[str, int] = dict.fromkeys(levels, 0)
    for b in items:
        assert b["status"]["phase"] == "Scheduled", b
        for p in b["status"]["placement"]:
            per[p["cluster"]] += p["replicas"]
    assert sum(per.values()) == 1000
    assert per["w90"] == 0, per  # already above the limit
    # No cluster is taken above its 85 % limit: reported use + what the burst added.
    final = {n: (256 * pct / 100 + per[n] * 0.25) / 256 for n, pct in levels.items() if n != "w90"}
    assert max(final.values()) <= 0.85 + 1e-9, final
    # Lower water level → more replicas; the clusters that took replicas end level (water filling).
    order = [per[n] for n in ("w20", "w40", "w60", "w75")]
    assert order == sorted(order, reverse=True) and order[0] > order[1] > order[2] > 0, per
    used = [final[n] for n in final if per[n]]
    assert max(used) - min(used) < 0.03 and all(final[n] >= min(used) for n in final if not per[n]), final


async def test_history_explains_decisions_and_honours_time_window(plane: Plane) -> None:
    await plane.cluster("a", 30, {"tier": "prod"})
    await plane.cluster("b", 50, {"tier": "prod"})
    await plane.cluster("c", 95, {"tier": "prod"})  # above the limit
    await plane.seen("a", "b", "c")
    t0 = datetime.now(UTC) - timedelta(seconds=1)
    for i in range(3):
        await plane.place({"name": f"h{i}", "replicas": 4, "resources": {"cpu": 1, "memory": 1}})
    await plane.place({"name": "h-bad", "replicas": 1, "targetClusters": ["c"],
                                           "resources": {"cpu": 1}})
    t1 = datetime.now(UTC) + timedelta(seconds=1)

    r = await plane.call("GET", "/api/v1/history/schedules", role="viewer")
    assert r.status_code == 200
    body = r.json()
    items = body["items"]
    assert [e["binding"] for e in items] == ["h-bad", "h2", "h1", "h0"] and body["truncated"] is False
    e = items[-1]
    assert e["result"]["phase"] == "Scheduled" and e["result"]["placed"] == 4 and e["scheduleType"] == "FirstSchedule"
    assert e["candidates"] == {"total": 3, "feasible": 2}
    assert e["filters"]["reasonCounts"] == {"water level above 85%": 1}
    assert e["filters"]["reasons"]["c"].startswith("water level above 85% (water level 95%)")
    chosen = {p["cluster"] for p in e["result"]["placement"]}
    assert set(e["scores"]) >= {"LeastWaterLevel", "BalancedAllocation", "ClusterLocality", "total"}
    assert all(set(v) == chosen for v in e["scores"].values())
    assert set(e["weights"]) == set(e["baseWeights"]) and e["adjuster"]["mode"] in ("spread", "pack", "blend")
    assert 0 <= e["adjuster"]["spread"] <= 1 and e["adjuster"]["fleetWaterLevel"] > 0
    assert e["timingsMs"]["total"] > 0 and "WaterLevelLimit" in e["timingsMs"]
    assert items[0]["result"]["phase"] == "Unschedulable" and items[0]["adjuster"]["mode"] is None

    def at(dt: datetime) -> str:
        return dt.isoformat().replace("+00:00", "Z")

    r = await plane.call("GET", "/api/v1/history/schedules", params={"maxEntries": 2})
    assert [x["binding"] for x in r.json()["items"]] == ["h-bad", "h2"] and r.json()["truncated"] is True
    r = await plane.call("GET", "/api/v1/history/schedules", params={"startTime": at(t0), "endTime": at(t1)})
    assert len(r.json()["items"]) == 4
    r = await plane.call("GET", "/api/v1/history/schedules", params={"startTime": at(t1)})
    assert r.json()["items"] == []
    r = await plane.call("GET", "/api/v1/history/schedules", params={"endTime": at(t0)})
    assert r.json()["items"] == []
    middle = datetime.fromisoformat(items[1]["time"].replace("Z", "+00:00"))
    r = await plane.call("GET", "/api/v1/history/schedules", params={"endTime": at(middle)})
    assert [x["binding"] for x in r.json()["items"]] == ["h2", "h1", "h0"]
    # A traffic surge published by monitoring raises the network weight of the next decisions (S5).
    await plane.store.put("/status/surge", b'{"fleet": {"active": true, "magnitude": 1.0}, "clusters": {}}')

    async def surged() -> bool:
        return plane.scheduler.cache.snap.signals.get("trafficSurge") == 1.0

    await eventually(surged, what="the scheduler to see the surge")
    await plane.place({"name": "h-surge", "replicas": 1, "resources": {"cpu": 1}})
    r = await plane.call("GET", "/api/v1/history/schedules", params={"binding": "h-surge"})
    surge = r.json()["items"][0]
    assert surge["adjuster"]["surge"] == 1.0
    assert surge["weights"]["NetworkLocality"] == pytest.approx(3 * e["weights"]["NetworkLocality"], rel=1e-3)

    for params, field in (({"startTime": "yesterday"}, "startTime"), ({"endTime": "2026-13-01T00:00:00Z"}, "endTime"),
                          ({"maxEntries": 0}, "maxEntries"), ({"maxEntries": "ten"}, "maxEntries"),
                          ({"startTime": at(t1), "endTime": at(t0)}, "startTime")):
        r = await plane.call("GET", "/api/v1/history/schedules", params=params)
        assert r.status_code == 422 and r.json()["code"] == "VALIDATION_FAILED", (params, r.text)
        assert r.json()["details"]["fields"][0]["field"].removeprefix("query.") == field


async def test_a_cluster_left_out_by_static_weights_is_explained_by_its_weight(plane: Plane) -> None:
    for name, cpu in (("a", 60), ("b", 60), ("c", 10)):  # c is the quietest, and has no weight
        await plane.cluster(name, cpu)
    await plane.seen("a", "b", "c")
    weights = {"replicaScheduling": {"weightPreference": {"staticWeightList": [
        {"targetCluster": {"clusterNames": ["a"]}, "weight": 1},
        {"targetCluster": {"clusterNames": ["b"]}, "weight": 2}]}}}
    assert placement(await plane.place({"name": "weighted", "replicas": 3, "resources": {"cpu": 1},
                                        "placement": weights})) == {"a": 1, "b": 2}
    r = await plane.call("GET", "/api/v1/history/schedules", params={"binding": "weighted"}, role="viewer")
    options = {o["cluster"]: o for o in r.json()["items"][0]["options"]}
    assert {c: o.get("staticWeight") for c, o in options.items()} == {"a": 1.0, "b": 2.0, "c": 0.0}
    r = await plane.call("GET", "/api/v1/decisions", params={"since": "1h", "type": "Placement"}, role="viewer")
    rec = next(d for d in r.json()["items"] if d["source"]["binding"] == "weighted")
    assert rec["runnerUp"]["name"] == "c"
    assert rec["runnerUp"]["why"] == "c has no static weight: no rule of the staticWeightList names it (weight 0)"
    r = await plane.call("GET", "/api/v1/decisions", params={"since": "abc"}, role="viewer")
    assert r.status_code == 422 and "or a duration back from now (90s, 15m, 2h, 7d)" in r.json()["message"], r.text


async def test_reschedule_moves_away_from_a_failed_cluster(plane: Plane) -> None:
    for name in ("a", "b", "c"):
        await plane.cluster(name, 40, report={"cores": 128})
    await plane.seen("a", "b", "c")
    weights = [{"targetCluster": {"clusterNames": [c]}, "weight": 1} for c in ("a", "b", "c")]
    st = await plane.place({"name": "svc", "replicas": 9, "resources": {"cpu": 1}, "placement": {
        "replicaScheduling": {"weightPreference": {"staticWeightList": weights}}}})
    assert placement(st) == {"a": 3, "b": 3, "c": 3}
    st2 = await plane.place({"name": "svc2", "replicas": 3, "targetClusters": ["a", "b"],
                                                 "resources": {"cpu": 1}})
    before = st["scheduledTime"]

    # The health controller marks a NotReady and taints b NoExecute.
    r = await plane.call("PATCH", "/apis/multicluster.io/v1alpha1/clusters/a/status",
                         headers={"content-type": "application/merge-patch+json"},
                         json={"status": {"conditions": [
                             {"type": "Ready", "status": "False", "reason": "Unreachable"}]}})
    assert r.status_code == 200, r.text
    r = await plane.call("PATCH", "/api/v1/clusters/b", json={"taints": [
        {"key": "cluster.multicluster.io/unreachable", "effect": "NoExecute"}]})
    assert r.status_code == 200, r.text
    snap = plane.scheduler.cache.snap

    async def seen_failed() -> bool:
        return not snap.ready[snap.index["a"]] and bool(snap.indexes.taints)

    await eventually(seen_failed, what="the scheduler to see a NotReady and b tainted")

    # The entry point failover uses (in-process hook) …
    result = await plane.ctx.rescheduler("svc", "cluster a NotReady")
    assert result.accepted
    st = await eventually(lambda: _moved(plane, "svc", before), what="svc re-placed")
    assert placement(st) == {"c": 9} and st["phase"] == "Scheduled"
    r = await plane.call("GET", "/api/v1/history/schedules", params={"binding": "svc", "maxEntries": 1})
    e = r.json()["items"][0]
    assert e["scheduleType"] == "RescheduleTriggered" and e["trigger"]["reason"] == "cluster a NotReady"
    assert e["filters"]["reasonCounts"] == {"cluster not ready": 1, "untolerated taint "
                                            "cluster.multicluster.io/unreachable:NoExecute": 1}

    # … and the same through the API: a binding whose only targets failed is Unschedulable, kept where it was.
    r = await plane.call("PATCH", "/api/v1/bindings/svc2", json={"rescheduleTriggeredAt": _now()})
    assert r.status_code == 200
    kept = placement(st2)
    st2 = await eventually(lambda: _moved(plane, "svc2", st2["scheduledTime"]), what="svc2 re-decided")
    assert st2["phase"] == "Unschedulable" and placement(st2) == kept  # never evicted by an Unschedulable result
    assert st2["reasons"] == {"a": "cluster not ready", "b": "untolerated taint "
                              "cluster.multicluster.io/unreachable:NoExecute", "c": "not in targetClusters"}

    # Monitoring's automatic operations use the same hook with a cluster-level request.
    out = await plane.ctx.rescheduler(RescheduleRequest("evacuate", "c", "sustained above limit", 0.5,
                                                                    1.0, {}))
    assert out.accepted and out.moved == 9 and "svc" in out.message
    out = await plane.ctx.rescheduler(RescheduleRequest("preallocate", "c", "forecast", 0.2, 1.0, {}))
    assert not out.accepted and "details.forecast" in out.message  # a hold needs the forecast and its horizon


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


async def _moved(plane: Plane, name: str, before: str) -> dict[str, Any] | None:
    st = await plane.status(name)
    return st if st["scheduledTime"] != before and st["scheduledGeneration"] == st["generation"] else None


async def test_metrics_use_karmada_names(plane: Plane) -> None:
    await plane.cluster("a", 30)
    await plane.seen("a")
    await plane.place({"name": "m", "replicas": 2, "resources": {"cpu": 1}})
    await plane.place({"name": "m-bad", "replicas": 2, "resources": {"cpu": 1000}})
    needles = (
        'karmada_scheduler_schedule_attempts_total{result="success",scheduleType="FirstSchedule"} 1.0',
        'karmada_scheduler_schedule_attempts_total{result="unschedulable",scheduleType="FirstSchedule"} 1.0',
        'karmada_scheduler_e2e_scheduling_duration_seconds_count{result="success",scheduleType="FirstSchedule"} 1.0',
        'karmada_scheduler_scheduling_algorithm_duration_seconds_count{scheduleStep="Schedule"} 2.0',
        'karmada_scheduler_plugin_execution_duration_seconds_count{extension_point="Filter",plugin="ResourceFit",'
        'result="success"} 1.0',
        'karmada_scheduler_framework_extension_point_duration_seconds_count{extension_point="Score",'
        'result="success"} 1.0',
        'karmada_scheduler_queue_incoming_bindings_total{event="BindingAdd"} 2.0',
        'karmada_scheduler_pending_bindings{queue="unschedulable"} 1.0',
        "drods_scheduler_is_leader 1.0",
    )

    async def exposed() -> bool:
        text = (await plane.call("GET", "/metrics", role="viewer")).text
        return all(n in text for n in needles)

    await eventually(exposed, what=f"{needles} on /metrics")  # counted right after the status write

    async def parked() -> dict[str, Any] | None:
        # a status report from "a" may retry m-bad for a moment; it parks again after that attempt
        info: dict[str, Any] = (await plane.call("GET", "/api/v1/scheduler", role="viewer")).json()
        return info if info["local"]["queue"]["unschedulable"] == 1 else None

    info = await eventually(parked, what="m-bad parked as unschedulable")
    assert info["leader"] == info["local"]["identity"] and info["local"]["leading"] is True
    assert info["local"]["clusters"] == 1
