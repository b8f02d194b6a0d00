"""Peak shaving end to end: monitoring sees a cluster's background rise under replicas placed while
it was quiet, the descheduler waits the damping window (on an injected clock) and the scheduler
moves exactly the planned replicas to the clusters with room — a Rebalance with the levels before
and after."""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest

from drods.assembly import Component
from drods.model.annotations import PEAK_SHAVE_MOVES
from drods.store import Store
from tests.monitor_e2e.conftest import Clock
from tests.scheduler_e2e.conftest import eventually, serve
from tests.scheduler_e2e.test_autoops import LIMIT, WEB, _annotations, _decisions, _placed, _reporting, _settings

WINDOW_S = 30.0  # the damping window, on the injected clock


def decided_at(op: dict[str, Any]) -> float:
    return datetime.fromisoformat(str(op["time"]).replace("Z", "+00:00")).timestamp()


@pytest.fixture
def store(store_factory: Callable[[], Store]) -> Store:
    return store_factory()


async def test_a_cluster_whose_background_rises_gives_replicas_to_clusters_with_room(
        store: Store, tmp_path: Path) -> None:
    await store.delete_prefix("/")  # the etcd of the session is shared between tests
    clock = Clock(live=True)
    monitoring, autoops = _settings(peakshaveAfterSeconds=WINDOW_S, peakshaveMargin=0.01, peakshaveMinGain=0.03)
    cpu = {"a": 62.0, "b": 62.0, "c": 62.0}  # busy enough for the adjuster to spread
    async with serve(store, tmp_path / "data", components=frozenset({Component.DESCHEDULER}), monitoring=monitoring,
                     autoops=autoops, clock=clock) as plane, _reporting(plane, cpu, clock=clock):
        await plane.bind(WEB)
        first = await _placed(plane, "web", lambda p: p == {"a": 4, "b": 4, "c": 4}, "web spread 4/4/4")

        # c's own load rises under web's 4 replicas (0.0625 of it): 0.75, under the 0.8 limit (no
        # evacuation) but above the level the three could reach (0.6875: c's background alone) + margin
        cpu["c"] = 75.0
        raised_at = clock()

        async def shaved() -> dict[str, int] | None:
            clock.advance(2.0)  # the damping window passes on the injected clock, not in wall time
            st = await plane.try_status("web")
            got = {t["cluster"]: t["replicas"] for t in (st or {}).get("placement") or []}
            return got if got != first else None

        after = await eventually(shaved, 30.0, "web shaved off c")
        # the fewest replicas: c back to its background (4 moves of 1/64), split between a and b
        assert after == {"a": 6, "b": 6}

        ops = [d for d in await _decisions(plane, kind="Cluster", name="c") if d["type"] == "Rebalance"]
        assert len(ops) == 1, ops
        assert ops[0]["inputs"]["waterLevelBefore"] == pytest.approx(0.75, abs=0.005)
        assert ops[0]["inputs"]["achievableLevel"] == pytest.approx(0.6875, abs=0.005)
        assert [(o["name"], o["chosen"]) for o in ops[0]["options"]] == [("web", True)]
        moved = [d for d in await _decisions(plane, kind="Binding", name="web") if d["type"] == "Rebalance"]
        assert moved and moved[0]["trigger"]["reason"].startswith("peak shave c"), moved
        r = await plane.call("GET", "/api/v1/monitor/operations", role="viewer")
        op = next(o for o in r.json()["items"] if o["cluster"] == "c" and o["kind"] == "Rebalance")
        details = op["details"]
        assert details["outcome"] == "executed" and details["result"]["bindings"] == ["web"]
        trigger = details["trigger"]
        assert trigger["waterLevelBefore"] == pytest.approx(0.75, abs=0.005)
        assert trigger["waterLevelAfter"] == pytest.approx(0.6875, abs=0.005)
        assert trigger["achievableLevel"] == pytest.approx(0.6875, abs=0.005)
        assert trigger["targets"]["a"]["waterLevelAfter"] == pytest.approx(0.62 + 2 / 64, abs=0.005)
        assert sorted((m["to"], m["replicas"]) for m in trigger["moves"]) == [("a", 2), ("b", 2)]
        # hot for the whole damping window first, and not before c rose
        assert trigger["hotSince"] >= raised_at - 1.0 and decided_at(op) - trigger["hotSince"] >= WINDOW_S
        assert op["reason"].startswith("peak shave c: water level 0.750 above the achievable 0.688")
        assert PEAK_SHAVE_MOVES in await _annotations(plane, "bindings", "web")
        entry = (await plane.call("GET", "/api/v1/history/schedules",
                                  params={"binding": "web", "maxEntries": 1})).json()["items"][0]
        assert entry["trigger"]["reason"].startswith("peak shave c")


async def test_a_cluster_far_above_where_its_replicas_could_go_is_shaved_after_the_shorter_window_and_says_so(
        store: Store, tmp_path: Path) -> None:
    await store.delete_prefix("/")
    clock = Clock(live=True)
    severe_s = 10.0
    monitoring, autoops = _settings(peakshaveAfterSeconds=3600.0, peakshaveMargin=0.01, peakshaveMinGain=0.03,
                                    peakshaveSevereMargin=0.05, peakshaveSevereAfterSeconds=severe_s)
    cpu = {"a": 62.0, "b": 62.0, "c": 62.0}
    async with serve(store, tmp_path / "data", components=frozenset({Component.DESCHEDULER}), monitoring=monitoring,
                     autoops=autoops, clock=clock) as plane, _reporting(plane, cpu, clock=clock):
        await plane.bind(WEB)
        first = await _placed(plane, "web", lambda p: p == {"a": 4, "b": 4, "c": 4}, "web spread 4/4/4")
        cpu["c"] = 75.0  # 0.0625 above the 0.6875 the three could reach: far above, at least 0.05
        raised_at = clock()

        async def shaved() -> dict[str, int] | None:
            clock.advance(1.0)  # far less than the hour's window passes on the injected clock
            st = await plane.try_status("web")
            got = {t["cluster"]: t["replicas"] for t in (st or {}).get("placement") or []}
            return got if got != first else None

        assert await eventually(shaved, 30.0, "web shaved off c") == {"a": 6, "b": 6}
        assert clock() - raised_at < 3600.0
        r = await plane.call("GET", "/api/v1/monitor/operations", role="viewer")
        op = next(o for o in r.json()["items"] if o["cluster"] == "c" and o["kind"] == "Rebalance")
        trigger = op["details"]["trigger"]
        assert trigger["severe"] is True and decided_at(op) - trigger["hotSince"] >= severe_s


async def test_replicas_placed_away_from_their_users_go_back_once_their_cluster_has_had_room(
        store: Store, tmp_path: Path) -> None:
    """web's users are in eu, where near is too busy at first: web goes to far-2 in us (90 ms, within
    its 150 ms SLO). When near calms and has had room for the damping window, the pass sends replicas
    back to it — no higher than the fleet's fill level − the margin — as a peak shave on near."""
    await store.delete_prefix("/")
    clock = Clock(live=True)
    monitoring, autoops = _settings(peakshaveAfterSeconds=WINDOW_S, peakshaveMargin=0.01, peakshaveMinGain=0.03)
    # % used: near above the 0.8 limit; far-1 (not web's) at 0.6 is the fleet's top, so far-2 at 0.5
    # with web's 12 replicas (0.1875 of it) is not hot: what moves is the return, not a shave
    cpu = {"far-1": 60.0, "far-2": 50.0, "near": 95.0}
    web = {**WEB, "placement": {**WEB["placement"], "users": [{"region": "eu"}], "latencySLOMs": 150,
                                "clusterAffinity": {"clusterNames": ["near", "far-2"]}}}
    async with serve(store, tmp_path / "data", components=frozenset({Component.DESCHEDULER}), monitoring=monitoring,
                     autoops=autoops, clock=clock) as plane:
        await plane.register("near", waterLevelLimit=LIMIT, region="eu")
        for name in ("far-1", "far-2"):
            await plane.register(name, waterLevelLimit=LIMIT, region="us", network={"latencyMs": {"eu": 90}})
        async with _reporting(plane, cpu, register=False, clock=clock):
            await plane.bind(web)
            first = await _placed(plane, "web", lambda p: p == {"far-2": 12}, "web on far-2")
            # near idle (0.25: its memory): web's 12 cores would fill near and far-2 (0.3125 without
            # them) to 0.375; near takes them back up to 0.365 = 7 replicas of 1/64
            cpu["near"] = 0.0
            calmed_at = clock()

            async def returned() -> dict[str, int] | None:
                clock.advance(2.0)  # the damping window passes on the injected clock
                st = await plane.try_status("web")
                got = {t["cluster"]: t["replicas"] for t in (st or {}).get("placement") or []}
                return got if got != first else None

            after = await eventually(returned, 30.0, "web's replicas back near its users")
            assert after == {"far-2": 5, "near": 7}
            r = await plane.call("GET", "/api/v1/monitor/operations", role="viewer")
            op = next(o for o in r.json()["items"] if o["cluster"] == "near" and o["kind"] == "Rebalance")
            trigger = op["details"]["trigger"]
            assert op["details"]["outcome"] == "executed" and trigger["kind"] == "return"
            assert op["reason"].startswith("peak shave near: 7 replica(s) back near their users from 1 cluster(s)")
            assert trigger["achievableLevel"] == pytest.approx(0.375, abs=0.005)
            assert trigger["waterLevelAfter"] == pytest.approx(0.25 + 7 / 64, abs=0.005)
            assert trigger["sources"]["far-2"]["waterLevelAfter"] == pytest.approx(0.5 - 7 / 64, abs=0.005)
            assert decided_at(op) - calmed_at >= WINDOW_S  # near had room for the whole window first
            moved = [d for d in await _decisions(plane, kind="Binding", name="web") if d["type"] == "Rebalance"]
            assert moved and moved[0]["trigger"]["reason"].startswith("peak shave near"), moved
