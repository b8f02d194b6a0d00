"""Automatic operations end to end (A4, S11, F6): monitoring sees the load, the scheduler moves replicas.

One control plane with the scheduler and monitoring's components; clusters are fed by an agent-like
reporter through ``PUT /api/v1/metrics``. Time is compressed (sustained = 1 s, calm = 1 s, no rate
limit on visible changes) but nothing else is stubbed except, in the pre-allocation case, the
forecast itself (its accuracy has its own tests).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator, Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from drods.assembly import Component
from drods.model.annotations import EVACUATED_FROM, FAILED_OVER_FROM, PREALLOCATION, failover_reason
from drods.model.kinds import BINDING as BINDINGS
from drods.model.kinds import CLUSTER as CLUSTERS
from drods.monitor.autoops import AutoOpsPolicy
from drods.monitor.service import MonitorService, MonitorSettings
from drods.registry.patch import MERGE_PATCH
from drods.store import Store
from tests.scheduler_e2e.conftest import Plane, eventually, placement, serve

LIMIT = 0.8
USAGE = {"cpu": {"used": "9500m", "requested": "12"}, "pods": 12, "readyPods": 12}
WEB = {"name": "web", "replicas": 12, "resources": {"cpu": 1},
       "placement": {"replicaScheduling": {"replicaSchedulingType": "Divided",
                                           "replicaDivisionPreference": "Weighted",
                                           "weightPreference": {"dynamicWeight": "WaterLevel"}}}}


def _settings(**autoops: Any) -> tuple[MonitorSettings, AutoOpsPolicy]:
    """The monitoring and automatic-operations sections of the test's configuration."""
    return MonitorSettings.model_validate({
        "sustainedSeconds": 1.0, "rateMinIntervalSeconds": 0.0, "flushIntervalSeconds": 0.05,
        "staleCheckIntervalSeconds": 0.05, "realtimeMinIntervalSeconds": 0.0, "forecastIntervalSeconds": 0.1}), \
        AutoOpsPolicy.model_validate({
            "cooldownSeconds": 0, "restoreAfterSeconds": 1.0, "evacuateFraction": 1.0, "maxActionsPerHour": 100,
            **autoops})


@contextlib.asynccontextmanager
async def _plane(store: Store, data_dir: Path, settings: tuple[MonitorSettings, AutoOpsPolicy]
                 ) -> AsyncIterator[Plane]:
    await store.delete_prefix("/")  # the etcd of the session is shared between tests
    monitoring, autoops = settings
    async with serve(store, data_dir, components=frozenset({Component.DESCHEDULER}), monitoring=monitoring,
                     autoops=autoops) as plane:
        yield plane


@contextlib.asynccontextmanager
async def _reporting(plane: Plane, cpu: dict[str, float], *, register: bool = True,
                     clock: Callable[[], float] | None = None) -> AsyncIterator[None]:
    """An agent per cluster reporting ``cpu[cluster]`` % every 0.1 s (the dict can change meanwhile),
    stamped with ``clock`` when the plane runs on an injected one."""
    for name in cpu if register else ():
        await plane.register(name, waterLevelLimit=LIMIT)

    async def loop() -> None:
        while True:
            for name, pct in list(cpu.items()):
                now = datetime.now(UTC) if clock is None else datetime.fromtimestamp(clock(), UTC)
                body = {"cluster": name, "timestamp": now.isoformat(), "cpuCapacity": 64,
                        "cpuUsage": pct, "memoryCapacity": 256, "memoryAvailable": 192}
                r = await plane.call("PUT", "/api/v1/metrics", json=body)
                assert r.status_code == 200 and r.json()["accepted"], r.text
            await asyncio.sleep(0.1)  # the agent's report interval, not a wait for an outcome

    task = asyncio.create_task(loop())
    try:
        await plane.seen(*cpu)
        yield
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task


async def _placed(plane: Plane, name: str, ok: Callable[[dict[str, int]], bool], what: str,
                  within_s: float = 20.0) -> dict[str, int]:
    async def check() -> dict[str, int] | None:
        st = await plane.try_status(name)
        if st is None or st["scheduledGeneration"] != st["generation"] or st["phase"] == "Pending":
            return None
        got = placement(st)
        return got if ok(got) else None

    return await eventually(check, within_s, what)


async def _operations(plane: Plane, cluster: str) -> list[dict[str, Any]]:
    r = await plane.call("GET", "/api/v1/monitor/operations", role="viewer")
    assert r.status_code == 200, r.text
    return [op for op in r.json()["items"] if op["cluster"] == cluster]


async def _operation(plane: Plane, cluster: str, kind: str) -> dict[str, Any]:
    async def found() -> dict[str, Any] | None:
        return next((op for op in await _operations(plane, cluster) if op["kind"] == kind), None)

    return await eventually(found, 10.0, f"a {kind} operation on {cluster}")


async def _decisions(plane: Plane, **query: str) -> list[dict[str, Any]]:
    r = await plane.call("GET", "/api/v1/decisions", params={"since": "1h", **query}, role="viewer")
    assert r.status_code == 200, r.text
    return list(r.json()["items"])


async def _annotations(plane: Plane, kind: str, name: str) -> dict[str, str]:
    r = await plane.call("GET", f"/apis/multicluster.io/v1alpha1/{kind}/{name}")
    assert r.status_code == 200, r.text
    return r.json()["metadata"].get("annotations") or {}


@pytest.fixture
def store(store_factory: Callable[[], Store]) -> Store:
    return store_factory()


async def test_overload_moves_replicas_away_and_calm_brings_them_back(store: Store, tmp_path: Path) -> None:
    cpu = {"a": 62.0, "b": 62.0, "c": 62.0}  # busy enough for the adjuster to spread
    async with _plane(store, tmp_path / "data", _settings()) as plane, _reporting(plane, cpu):
        await plane.bind(WEB)
        first = await _placed(plane, "web", lambda p: p.get("c", 0) > 0, "web spread over a, b and c")
        assert sum(first.values()) == 12

        # web's measured use, as the work-status controller rolls it up, is what its next decision saw
        await plane.ctx.registry.patch(BINDINGS, "web", {"status": {"usage": USAGE}}, MERGE_PATCH, subresource="status")
        # c's load rises past its limit and stays there: after sustainedSeconds its replicas leave.
        cpu["c"] = 92.0
        away = await _placed(plane, "web", lambda p: "c" not in p, "web moved away from c")
        assert sum(away.values()) == 12 and set(away) == {"a", "b"}
        op = await _operation(plane, "c", "Evacuate")
        assert op["details"]["outcome"] == "executed" and op["details"]["result"]["bindings"] == ["web"]
        assert "above the limit 0.80" in op["reason"]
        assert (await _annotations(plane, "bindings", "web"))[EVACUATED_FROM] == "c"
        r = await plane.call("GET", "/api/v1/history/schedules", params={"binding": "web", "maxEntries": 1})
        entry = r.json()["items"][0]
        assert entry["scheduleType"] == "RescheduleTriggered" and entry["trigger"]["reason"].startswith("evacuate c")
        assert entry["filters"]["reasonCounts"] == {"water level above 80%": 1}
        # X1: the evacuation is an eviction decision about c, with the water levels it saw and the
        # bindings it weighed; web's own reschedule reads as an eviction too
        ev = (await _decisions(plane, kind="Cluster", name="c", type="Eviction"))[0]
        seen = ev["inputs"]["waterLevels"]
        assert seen["c"]["waterLevel"] > LIMIT and seen["c"]["limit"] == LIMIT and set(seen) == {"a", "b", "c"}
        assert [(o["name"], o["chosen"], o["replicas"]) for o in ev["options"]] == [("web", True, first["c"])]
        assert ev["outcome"]["outcome"] == "executed" and ev["summary"].startswith("executed: water level")
        evicted = (await _decisions(plane, kind="Binding", name="web", type="Eviction"))[0]
        assert evicted["trigger"]["reason"].startswith("evacuate c") and evicted["inputs"]["usage"] == USAGE

        # The load falls: once c has been calm for restoreAfterSeconds, web is offered c again.
        cpu["c"] = 62.0
        back = await _placed(plane, "web", lambda p: p.get("c", 0) > 0, "web back on c")
        assert sum(back.values()) == 12
        op = await _operation(plane, "c", "Restore")
        assert op["details"]["outcome"] == "executed" and "below the limit" in op["reason"]
        assert op["details"]["result"]["offered"] == 12 and op["details"]["result"]["moved"] == 0
        assert EVACUATED_FROM not in await _annotations(plane, "bindings", "web")
        # Calm: one move away, one move back — no oscillation.
        assert sorted(o["kind"] for o in await _operations(plane, "c")) == ["Evacuate", "Restore"]
        # monitoring's events about c (its limit breached) are no decisions: only the two operations
        assert [d["type"] for d in await _decisions(plane, kind="Cluster", name="c")] == ["Rebalance", "Eviction"]


async def test_forecast_peak_preallocates_elsewhere_before_it_arrives(store: Store, tmp_path: Path) -> None:
    cpu = {"a": 62.0, "b": 62.0, "c": 62.0}  # busy enough for the adjuster to spread
    horizon_min = 0.05  # 3 s: the hold ends soon after the (never arriving) peak
    async with _plane(store, tmp_path / "data", _settings(preallocateHorizonMinutes=horizon_min,
                                                          preallocateFraction=1.0)) as plane, \
            _reporting(plane, cpu):
        await plane.bind(WEB)
        await _placed(plane, "web", lambda p: p.get("c", 0) > 0, "web spread over a, b and c")

        monitor: MonitorService = plane.ctx.monitor
        peak = {"c": 0.93}
        monitor.forecaster.modelled_water_level_in = lambda cluster, minutes: peak.get(cluster)  # type: ignore[method-assign]

        # c is still at 62 % but its forecast crosses the limit within the horizon: it is held at the
        # forecast and web's replicas there are placed elsewhere now.
        away = await _placed(plane, "web", lambda p: "c" not in p, "web pre-allocated away from c")
        assert sum(away.values()) == 12
        op = await _operation(plane, "c", "PreAllocate")
        assert op["details"]["outcome"] == "executed" and "forecast water level 0.93" in op["reason"]
        hold = json.loads((await _annotations(plane, "clusters", "c"))[PREALLOCATION])
        assert hold["waterLevel"] == 0.93 and hold["until"].endswith("Z")
        snap = plane.scheduler.cache.snap
        assert snap.water_level[snap.index["c"]] >= 0.93  # the scheduler sees the peak, not the 62 %

        # The forecast relaxes; when the hold has run out and c has stayed calm, web comes back.
        peak.clear()
        back = await _placed(plane, "web", lambda p: p.get("c", 0) > 0, "web back on c after the hold")
        assert sum(back.values()) == 12
        assert snap.water_level[snap.index["c"]] < LIMIT
        restore = await _operation(plane, "c", "Restore")
        assert restore["details"]["outcome"] == "executed"
        assert sorted(o["kind"] for o in await _operations(plane, "c")) == ["PreAllocate", "Restore"]


async def test_a_new_descheduler_leader_honours_the_cooldown_of_the_one_that_died(
        store_factory: Callable[[], Store], tmp_path: Path) -> None:
    """A6: cooldowns and the hourly rate limit are kept in the store: after a leader change the
    same cluster is not evacuated again inside its cooldown."""
    settings = _settings(cooldownSeconds=3600, restore=False)
    cpu = {"a": 62.0, "b": 62.0, "c": 62.0}
    async with _plane(store_factory(), tmp_path / "data", settings) as plane, _reporting(plane, cpu):
        await plane.bind(WEB)
        await _placed(plane, "web", lambda p: p.get("c", 0) > 0, "web spread over a, b and c")
        cpu["c"] = 92.0
        await _placed(plane, "web", lambda p: "c" not in p, "web moved away from c")
        assert (await _operation(plane, "c", "Evacuate"))["details"]["outcome"] == "executed"
    # the leader is gone; another process (same keys: the store is sealed with them) leads the descheduler
    cpu = {"a": 62.0, "b": 62.0, "c": 62.0}
    monitoring, autoops = settings
    async with serve(store_factory(), tmp_path / "data", components=frozenset({Component.DESCHEDULER}),
                     monitoring=monitoring, autoops=autoops) as plane, _reporting(plane, cpu, register=False):
        await _placed(plane, "web", lambda p: "c" not in p, "web still away from c")
        cpu["c"] = 92.0  # c overloaded again, well inside the cooldown of the first evacuation

        async def second() -> dict[str, Any] | None:
            ops = [op for op in await _operations(plane, "c") if op["kind"] == "Evacuate"]
            return ops[0] if len(ops) == 2 else None  # newest first

        op = await eventually(second, 15.0, "a second evacuation decision on c")
        assert op["details"]["outcome"] == "skipped", op
        assert op["details"]["skipReason"].startswith("cooldown"), op


async def test_a_not_ready_blink_between_two_fail_back_passes_is_heard(store: Store, tmp_path: Path) -> None:
    """A cluster NotReady for a moment (two writes back to back, far inside the 0.1 s between fail-back
    passes) is watched all the same: the descheduler hears every readiness change, not only the
    readiness of its pass's moment. Once calm it is offered back (nothing failed over from it here)."""
    cpu = {"a": 62.0, "b": 62.0, "c": 62.0}
    async with _plane(store, tmp_path / "data", _settings(failbackAfterSeconds=1.0)) as plane, \
            _reporting(plane, cpu):
        await plane.bind(WEB)
        await _placed(plane, "web", lambda p: p.get("c", 0) > 0, "web spread over a, b and c")
        await _set_ready(plane, "c", False)
        await _set_ready(plane, "c", True)
        op = await _operation(plane, "c", "Rebalance")
        assert op["reason"].startswith("cluster c Ready again")
        assert op["details"]["outcome"] == "refused"
        assert op["details"]["result"]["message"] == "no binding failed over from c"


async def _set_ready(plane: Plane, cluster: str, ready: bool) -> None:
    """The Ready condition as the health controller writes it."""
    cond = {"type": "Ready", "status": "True" if ready else "False", "reason": "Test",
            "lastTransitionTime": datetime.now(UTC).isoformat()}
    await plane.ctx.registry.patch(CLUSTERS, cluster, {"status": {"conditions": [cond]}}, MERGE_PATCH,
                                   subresource="status")


async def test_replicas_fail_back_once_the_cluster_is_ready_and_calm(store: Store, tmp_path: Path) -> None:
    cpu = {"a": 62.0, "b": 62.0, "c": 62.0}  # busy enough for the adjuster to spread
    async with _plane(store, tmp_path / "data", _settings(failbackAfterSeconds=1.0)) as plane, \
            _reporting(plane, cpu):
        await plane.bind(WEB)
        await _placed(plane, "web", lambda p: p.get("c", 0) > 0, "web spread over a, b and c")

        # c goes NotReady and its toleration runs out: failover moves web off it (S11) and web remembers c
        await _set_ready(plane, "c", False)
        snap = plane.scheduler.cache.snap

        async def c_not_ready() -> bool:  # as a real failover comes only after NotReady has lasted
            return not bool(snap.ready[snap.index["c"]])

        await eventually(c_not_ready, what="the scheduler to see c NotReady")
        await plane.ctx.rescheduler.failover("web", "c", failover_reason("c", "now", 0))
        away = await _placed(plane, "web", lambda p: "c" not in p, "web failed over off c")
        assert sum(away.values()) == 12
        assert (await _annotations(plane, "bindings", "web"))[FAILED_OVER_FROM] == "c"
        assert not [o for o in await _operations(plane, "c") if o["kind"] == "Rebalance"]  # not while NotReady

        # c is Ready again and stays calm for failbackAfterSeconds: the descheduler fails web back
        await _set_ready(plane, "c", True)
        back = await _placed(plane, "web", lambda p: p.get("c", 0) > 0, "web back on c", 45.0)
        assert sum(back.values()) == 12
        op = await _operation(plane, "c", "Rebalance")
        assert op["details"]["outcome"] == "executed" and op["details"]["result"]["bindings"] == ["web"]
        # the operation offered web's 12 replicas back; how many went is the scheduler's decision, not a move
        assert op["details"]["result"]["offered"] == 12 and op["details"]["result"]["moved"] == 0
        assert op["reason"].startswith("cluster c Ready again") and op["details"]["trigger"]["recovered"] == "c"
        assert FAILED_OVER_FROM not in await _annotations(plane, "bindings", "web")
        r = await plane.call("GET", "/api/v1/history/schedules", params={"binding": "web", "maxEntries": 1})
        assert r.json()["items"][0]["trigger"]["reason"].startswith("fail back to c: cluster c Ready again")
