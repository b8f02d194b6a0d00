"""PUT /api/v1/metrics through the monitoring pipeline, on both store backends."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from drods.model.reschedule import RescheduleRequest, RescheduleResult
from drods.store import EventType, Store
from tests.monitor_e2e.conftest import Clock, Mon, eventually, fast_settings, node_report, serve


async def test_push_auth_validation_clamping_staleness(mon: Mon) -> None:
    await mon.register("a")
    await mon.register("b")
    now = mon.clock()

    r = await mon.report("a", role="agent-a", **node_report(50))
    assert r.status_code == 200, r.text
    body = r.json()
    assert body["accepted"] and body["published"] and body["publishReason"] == "changed"
    assert body["clockSkewClamped"] is False and abs(body["waterLevel"] - 0.5) < 1e-9

    # The scheduler-visible document: contract shape plus provenance.
    doc = json.loads((await mon.store.get("/status/clusters/a")).value)  # type: ignore[union-attr]
    assert doc["status"]["cpu"] == {"capacity": 64.0, "used": 32.0}
    assert doc["status"]["waterLevel"] == 0.5 and doc["status"]["source"] == "push"
    assert doc["observed"]["cpu"]["utilisation"]["source"] == "push"
    r = await mon.call("GET", "/api/v1/clusters/a")
    assert r.json()["status"]["resources"]["memory"] == {"capacity": 256.0, "used": 64.0}

    # Authorisation: an agent reports only for its own cluster; viewers don't report; no token → 401.
    r = await mon.report("b", role="agent-a", **node_report(50))
    assert r.status_code == 403 and r.json()["code"] == "FORBIDDEN"
    r = await mon.report("a", role="viewer", at=now + 1, **node_report(50))
    assert r.status_code == 403
    r = await mon.client.put("/api/v1/metrics", json={"cluster": "a", "timestamp": "2030-01-01T00:00:00Z"})
    assert r.status_code == 401
    r = await mon.report("nope", **node_report(50))
    assert r.status_code == 404 and r.json()["code"] == "CLUSTER_NOT_FOUND"

    # Validation: 422 with field paths (top-level, nested, documented extras).
    r = await mon.report("a", at=now + 1, **node_report(140))
    assert r.status_code == 422 and r.json()["code"] == "VALIDATION_FAILED"
    assert r.json()["details"]["fields"][0]["field"] == "cpuUsage"
    r = await mon.report("a", at=now + 1, **node_report(50, cores=1e308))  # a broken agent's number
    assert r.status_code == 422 and r.json()["details"]["fields"][0]["field"] == "cpuCapacity", r.text
    r = await mon.report("a", at=now + 1, **node_report(50), largestNodeFree={"cpu": -1})
    assert r.status_code == 422 and r.json()["details"]["fields"][0]["field"] == "largestNodeFree.cpu"
    r = await mon.report("a", at=now + 1, **node_report(50), cpuAllocatable=-5)
    assert r.status_code == 422 and r.json()["details"]["fields"][0]["field"] == "cpuAllocatable"

    # Clock skew: a timestamp in the future is clamped to the server's time and flagged.
    now = mon.clock.advance(1)
    r = await mon.report("a", at=now + 3600, **node_report(50), cpuAllocatable=60, podsCapacity=500)
    assert r.status_code == 200 and r.json()["clockSkewClamped"] is True
    doc = json.loads((await mon.store.get("/status/clusters/a")).value)  # type: ignore[union-attr]
    assert doc["status"]["cpu"]["allocatable"] == 60.0 and doc["status"]["pods"] == {"used": 100, "capacity": 500.0}

    # Staleness: too old → 202 STALE_REPORT; not newer than the last accepted → 202 OUT_OF_ORDER_REPORT.
    mon.clock.advance(10)
    r = await mon.report("a", at=mon.clock() - 400, **node_report(50))
    assert r.status_code == 202 and r.json() == {
        "accepted": False, "stale": True, "cluster": "a", "code": "STALE_REPORT",
        "reason": r.json()["reason"]}
    r = await mon.report("a", at=mon.clock() - 200, **node_report(50))  # staleAfterSeconds: 180 by default
    assert r.status_code == 202 and r.json()["code"] == "STALE_REPORT" and "older than 180s" in r.json()["reason"]
    r = await mon.report("a", at=now - 5, **node_report(50))
    assert r.status_code == 202 and r.json()["code"] == "OUT_OF_ORDER_REPORT" and r.json()["stale"] is False

    # Rejections are in the failure log (one per cluster and code per minute).
    r = await mon.call("GET", "/api/v1/history/failures", params={"kind": "ReportRejected"}, role="viewer")
    codes = sorted(e["details"]["code"] for e in r.json()["items"])
    assert codes == ["OUT_OF_ORDER_REPORT", "STALE_REPORT", "VALIDATION_FAILED"], r.json()
    assert all(e["cluster"] == "a" for e in r.json()["items"])


async def test_first_run_reports_as_documented(mon: Mon) -> None:
    """The README's and the draft's reports as written: no timestamp means now; an old timestamp
    goes to history (202, stale) without touching the live view; history answers pushed names."""
    await mon.register("gcp-production")
    r = await mon.call("PUT", "/api/v1/metrics", json={"cluster": "gcp-production", "cpuCapacity": 64,
                                                       "cpuUsage": 72.4, "memoryCapacity": 256,
                                                       "memoryAvailable": 15.2})
    assert r.status_code == 200 and r.json()["accepted"], r.text
    doc = json.loads((await mon.store.get("/status/clusters/gcp-production")).value)  # type: ignore[union-attr]
    assert abs(doc["status"]["cpu"]["used"] - 64 * 0.724) < 1e-9
    assert doc["status"]["timestamp"] == doc["status"]["receivedAt"]

    old = mon.clock() - 1800
    r = await mon.report("gcp-production", at=old, cpuCapacity=64, cpuUsage=10.0, memoryCapacity=256,
                         memoryAvailable=200.0)
    assert r.status_code == 202 and r.json()["stale"] is True and r.json()["code"] == "STALE_REPORT"
    doc = json.loads((await mon.store.get("/status/clusters/gcp-production")).value)  # type: ignore[union-attr]
    assert abs(doc["status"]["cpu"]["used"] - 64 * 0.724) < 1e-9  # the live view did not move
    await mon.svc.flush()

    def window(metric: str) -> dict[str, Any]:
        return {"cluster": "gcp-production", "metric": metric, "step": "60s",
                "startTime": datetime.fromtimestamp(old - 60, UTC).isoformat(),
                "endTime": datetime.fromtimestamp(mon.clock() + 60, UTC).isoformat()}

    r = await mon.call("GET", "/api/v1/history/metrics", params=window("cpuUsage"), role="viewer")
    assert r.status_code == 200, r.text
    values = [p["value"] for p in r.json()["points"]]
    assert r.json()["storedAs"] == "cpu.utilisation"
    assert any(abs(v - 10.0) < 1e-6 for v in values) and any(abs(v - 72.4) < 1e-6 for v in values), values
    r = await mon.call("GET", "/api/v1/history/metrics", params=window("memoryAvailable"), role="viewer")
    values = [p["value"] for p in r.json()["points"]]
    assert any(abs(v - 200.0) < 1e-6 for v in values) and any(abs(v - 15.2) < 1e-6 for v in values), values
    r = await mon.call("GET", "/api/v1/history/metrics", params=window("cpuUsed"), role="viewer")
    assert r.status_code == 422 and "cpuUsage" in r.json()["details"]["allowed"]


async def test_rate_control_bounds_store_writes_under_flapping(mon: Mon) -> None:
    """Water level flapping around the 70 % threshold every 10 s for 10 minutes: without rate
    control that is 60 writes and 60 crossings seen by the scheduler; with it the visible status
    moves at most once per 30 s and steady jitter costs only heartbeats."""
    await mon.register("f")
    await mon.register("steady")
    reports = 60
    for i in range(reports):
        mon.clock.advance(10)
        r = await mon.report("f", **node_report(74 if i % 2 else 66))
        assert r.status_code == 200, r.text
        r = await mon.report("steady", **node_report(50 + (0.4 if i % 2 else -0.4)))
        assert r.status_code == 200, r.text
    flapping = await mon.store.get("/status/clusters/f")
    steady = await mon.store.get("/status/clusters/steady")
    assert flapping is not None and steady is not None
    simulated = reports * 10
    assert flapping.version <= simulated / 30 + 2, flapping.version  # visible moves at most every 30 s
    assert steady.version <= simulated / mon.svc.settings.heartbeatSeconds + 2, steady.version
    assert steady.version >= simulated / mon.svc.settings.heartbeatSeconds - 2  # heartbeats keep age known
    text = (await mon.call("GET", "/metrics")).text
    suppressed = next(float(line.split()[-1]) for line in text.splitlines()
                      if line.startswith("drods_monitor_rate_control_suppressed_total"))
    assert suppressed >= 2 * reports - flapping.version - steady.version - 1


async def test_threshold_events_prefix_watch_sustained_and_autoops(mon: Mon) -> None:
    requests: list[RescheduleRequest] = []

    async def reschedule(req: RescheduleRequest) -> RescheduleResult:
        requests.append(req)
        return RescheduleResult(True, moved=3, message="moved 3 replicas")

    assert mon.hook is not None
    mon.hook.target = reschedule
    await mon.register("hot", waterLevelLimit=0.75)
    await mon.register("cool")
    got: list[dict[str, Any]] = []
    woke = asyncio.Event()
    rev = await mon.store.current_revision()

    async def subscriber() -> None:  # a C3 subscriber: watches a prefix, wakes on every event
        async for ev in mon.store.watch("/events/thresholds/hot/", start_revision=rev + 1):
            if ev.type is EventType.PUT:
                assert ev.kv.lease != 0  # events expire with their lease
                got.append(json.loads(ev.kv.value))
                woke.set()

    task = asyncio.create_task(subscriber())

    async def autoops_leader() -> bool:
        return await mon.store.get("/leases/descheduler") is not None

    await eventually(autoops_leader, what="auto-ops leader elected")

    async def limit_known() -> bool:  # the monitor learns a cluster's limit through its watch of Clusters
        return mon.svc.water_level_limit("hot") == 0.75

    await eventually(limit_known, what="the monitor knowing hot's water-level limit")
    try:
        assert (await mon.report("cool", **node_report(30))).status_code == 200
        assert (await mon.report("hot", **node_report(50))).status_code == 200
        mon.clock.advance(10)
        r = await mon.report("hot", **node_report(78))
        assert r.json()["events"] == 2  # cpu ≥ 70 %, water level ≥ the cluster's limit (75 %)
        await asyncio.wait_for(woke.wait(), 10)

        async def both() -> bool:
            return len(got) >= 2

        await eventually(both, what="both threshold events")
        assert {(e["rule"], e["direction"]) for e in got} == {("cpu.utilisation>=0.7", "up"),
                                                             ("waterLevel>=limit", "up")}
        # Staying above the limit for sustainedSeconds (60 s) → a sustained event, a failure entry,
        # and the auto-ops leader calls the scheduler's reschedule hook.
        for _ in range(7):
            mon.clock.advance(10)
            assert (await mon.report("hot", **node_report(78))).status_code == 200
            assert (await mon.report("cool", **node_report(30))).status_code == 200
        kvs, _ = await mon.store.range("/events/sustained/hot/")
        assert [json.loads(kv.value)["kind"] for kv in kvs] == ["sustained"]

        async def failures() -> list[str] | None:
            r = await mon.call("GET", "/api/v1/history/failures", params={"cluster": "hot"})
            kinds = sorted(e["kind"] for e in r.json()["items"])
            return kinds if "SustainedAboveLimit" in kinds else None

        assert await eventually(failures) == ["SustainedAboveLimit", "WaterLevelLimitBreached"]

        async def operations() -> list[dict[str, Any]] | None:
            r = await mon.call("GET", "/api/v1/monitor/operations")
            return r.json()["items"] or None

        (op,) = await eventually(operations, what="auto-ops decision recorded")
        assert op["kind"] == "Evacuate" and op["cluster"] == "hot"
        assert op["details"]["outcome"] == "executed" and op["details"]["result"]["moved"] == 3
        assert requests[0].action == "evacuate" and requests[0].fraction == 0.25
    finally:
        task.cancel()


async def test_two_api_replicas_share_one_cluster(store_factory: Callable[[], Store], tmp_path: Path) -> None:
    """Reports of one cluster alternate between two API replicas over one store: state is rebuilt
    from the stored document, so rate control holds across replicas and an older report that
    reaches a lagging replica never overwrites a newer status."""
    first = store_factory()
    await first.delete_prefix("/")
    clock = Clock()
    data = tmp_path / "data"  # shared: same token key (and history file) for both replicas
    async with serve(first, data, fast_settings(), clock) as a, \
            serve(store_factory(), data, fast_settings(), clock) as b:
        await a.register("r")
        published = 0
        for i in range(30):
            clock.advance(10)
            replica = (a, b)[i % 2]
            r = await replica.report("r", **node_report(74 if i % 4 < 2 else 66))
            assert r.status_code == 200, r.text  # never OUT_OF_ORDER: each replica sees the other's writes
            published += r.json()["published"]
        kv = await a.store.get("/status/clusters/r")
        assert kv is not None and kv.version == published <= 300 / 30 + 2
        # A report older than the stored status, whichever replica gets it, is refused.
        latest = json.loads(kv.value)["observed"]["timestamp"]
        older = datetime.fromisoformat(latest.replace("Z", "+00:00")).timestamp() - 1
        for replica in (a, b):
            r = await replica.report("r", at=older, **node_report(10))
            assert r.status_code == 202 and r.json()["code"] == "OUT_OF_ORDER_REPORT"
        kv = await a.store.get("/status/clusters/r")
        assert kv is not None and json.loads(kv.value)["observed"]["timestamp"] == latest


async def test_a_cluster_registered_again_under_a_deleted_name_has_no_status_of_the_old_one(mon: Mon) -> None:
    """The draft's DELETE, then its POST of the same name at once: the new cluster has reported nothing."""
    await mon.register("gcp-production")
    r = await mon.report("gcp-production", **node_report(94))
    assert r.status_code == 200 and r.json()["published"], r.text
    assert await mon.store.get("/status/clusters/gcp-production") is not None
    r = await mon.call("DELETE", "/api/v1/clusters/gcp-production")
    assert r.status_code == 200, r.text

    async def dropped() -> bool:
        return await mon.store.get("/status/clusters/gcp-production") is None

    await eventually(dropped, 5.0, "the deleted cluster's status document dropped")
    await mon.register("gcp-production")
    r = await mon.call("GET", "/api/v1/clusters/gcp-production", role="viewer")
    assert r.status_code == 200 and not (r.json().get("status") or {}).get("resources"), r.json()
