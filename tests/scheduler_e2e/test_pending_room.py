"""Replicas left pending get the room that is there: a pre-allocation hold (F6) steers new replicas
elsewhere but gives way where nowhere else has room (else they wait out the hold's horizon, 30
minutes by default, beside room), and a drained cluster's kept copy is the binding's
own load when its pending part goes back there."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

from drods.model.annotations import PREALLOCATION
from drods.model.kinds import BINDING
from drods.model.preallocation import PreallocationHold
from drods.monitor.service import MonitorSettings
from drods.store import Store
from drods.store.cas import read_modify_write
from tests.scheduler_e2e.conftest import Plane, eventually, placement, serve

LIMIT = 0.8


def _web(name: str, replicas: int) -> dict[str, object]:
    return {"name": name, "replicas": replicas, "resources": {"cpu": 1},
            "placement": {"replicaScheduling": {"replicaSchedulingType": "Divided",
                                                "weightPreference": {"dynamicWeight": "WaterLevel"}}}}


async def test_a_hold_steers_replicas_elsewhere_and_gives_way_when_nowhere_else_has_room(
        store_factory: Callable[[], Store], tmp_path: Path) -> None:
    store = store_factory()
    await store.delete_prefix("/")  # the etcd of the session is shared between tests
    async with serve(store, tmp_path / "data") as plane:
        for c in ("a", "b", "c"):
            await plane.register(c, waterLevelLimit=LIMIT)
            await plane.report(c, 25.0, cores=16)  # 4 of 16 cores: room for 8 one-core replicas under 0.8
        await plane.seen("a", "b", "c")
        hold = PreallocationHold(0.93, time.time() + 3600, "forecast water level 0.93 within 30 min")
        for c in ("a", "b"):
            r = await plane.call("PATCH", f"/apis/multicluster.io/v1alpha1/clusters/{c}",
                                 json={"metadata": {"annotations": {PREALLOCATION: hold.to_annotation()}}},
                                 headers={"content-type": "application/merge-patch+json"})
            assert r.status_code == 200, r.text
        snap = plane.scheduler.cache.snap

        async def held() -> bool:
            return all(snap.water_level[snap.index[c]] >= 0.93 for c in ("a", "b"))

        await eventually(held, 10, "the scheduler seeing a and b at their hold's forecast")

        # c has room: the hold steers every replica there
        steered = await plane.place(_web("steered", 6))
        assert steered["phase"] == "Scheduled" and placement(steered) == {"c": 6}, steered

        # c has room for 2 more (its 6 are assumed): the other 10 go to a and b's room as it is now
        st = await plane.place(_web("overflow", 12))
        got = placement(st)
        assert st["phase"] == "Scheduled" and sum(got.values()) == 12 and got.get("c", 0) <= 2, st
        assert got.get("a", 0) + got.get("b", 0) >= 10, got
        assert "pre-allocation hold set aside on a, b: no other cluster had room" in st["message"], st
        r = await plane.call("GET", "/api/v1/history/schedules", params={"binding": "overflow"})
        entry = r.json()["items"][0]
        assert entry["analysis"]["preallocationHoldsSetAside"] == ["a", "b"], entry
        # the holds stay for the decisions after: a new workload goes nowhere while c is full
        assert all(snap.water_level[snap.index[c]] >= 0.93 for c in ("a", "b"))


async def _cordon(plane: Plane, cluster: str, on: bool) -> None:
    r = await plane.call("PATCH", f"/apis/multicluster.io/v1alpha1/clusters/{cluster}",
                         json={"spec": {"unschedulable": on}}, headers={"content-type": "application/merge-patch+json"})
    assert r.status_code == 200, r.text

    async def seen() -> bool:
        return plane.scheduler.cache.clusters[cluster].spec.unschedulable is on

    await eventually(seen, 10, f"the scheduler seeing {cluster} {'cordoned' if on else 'uncordoned'}")


async def test_a_drained_clusters_kept_copy_is_the_bindings_own_load(
        store_factory: Callable[[], Store], tmp_path: Path) -> None:
    """A drain whose replicas the rest of the fleet cannot all take keeps the drained cluster's copy
    (its Work marked removing); uncordoned, the pending part goes back there, into that copy: its pods
    are the binding's own load, not another workload's (counted as another's, the cluster looked too full
    once the scheduler stopped discounting the removed replicas, and the pending part stayed pending)."""
    store = store_factory()
    await store.delete_prefix("/")
    every_report = MonitorSettings.model_validate({"rateMinIntervalSeconds": 0.0, "flushIntervalSeconds": 0.05,
                                                   "realtimeMinIntervalSeconds": 0.0})
    async with serve(store, tmp_path / "data", monitoring=every_report) as plane:
        for c in ("a", "b"):
            await plane.register(c, waterLevelLimit=0.85)
            await plane.report(c, 1.0, cores=24)
        await plane.seen("a", "b")
        body = {"name": "drained", "replicas": 4, "resources": {"cpu": 7},  # no 24-core cluster holds 4 × 7
                "placement": {"replicaScheduling": {"replicaSchedulingType": "Divided",
                                                    "weightPreference": {"dynamicWeight": "WaterLevel"}}}}
        assert placement(await plane.place(body)) == {"a": 2, "b": 2}
        for c in ("a", "b"):  # the members report the copies' 14 cores, on two of their three 8-core nodes
            await plane.report(c, 1.0 + 14 / 24 * 100, cores=24, largestNodeFree={"cpu": 6.0, "memory": 30})
        r = await plane.call("POST", "/api/v1/clusters/b/drain")
        assert r.status_code == 200 and r.json()["rescheduled"] == ["drained"], r.text

        async def partial() -> dict[str, object] | None:
            st = await plane.status("drained")
            return st if st.get("partial") else None

        assert placement(await eventually(partial, 10, "a placed, 2 pending")) == {"a": 2}
        # b's copy as the controllers show a drained cluster's: kept, its Work marked removing, until the
        # rest is ready elsewhere
        clusters = [{"cluster": "a", "observedReplicas": 2},
                    {"cluster": "b", "removing": True, "removingSince": "2026-01-01T00:00:00Z", "observedReplicas": 2}]

        async def show(_: int) -> object:
            status = (await plane.ctx.registry.get(BINDING, "drained")).get("status") or {}
            return await plane.ctx.registry.update_status(BINDING, "drained", {**status, "clusters": clusters})

        await read_modify_write(show)

        async def kept() -> bool:
            rec = plane.scheduler.bindings.cache.get(BINDING.key("drained"))
            return rec is not None and "removing" in str((rec.object().get("status") or {}).get("clusters"))

        await eventually(kept, 10, "the scheduler seeing b's kept copy")
        await _cordon(plane, "b", False)

        async def whole() -> dict[str, int] | None:
            got = placement(await plane.status("drained"))
            return got if sum(got.values()) == 4 else None

        got = await eventually(whole, 15, "the pending 2 placed on b, in the copy it kept")
        assert got == {"a": 2, "b": 2}, got
