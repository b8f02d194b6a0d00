"""S11: placements follow the fleet — clusters that become Ready, join or change labels are offered
to the bindings they match; the switch keeps a divided binding where it is.

The clusters report 65 % CPU: a fleet that busy is divided by spreading (a quiet one is packed onto the
fewest clusters, where new capacity rightly attracts nothing; ``scheduler/adjuster.py``)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from drods.model.kinds import CLUSTER
from drods.monitor.service import MonitorSettings
from drods.registry.patch import MERGE_PATCH
from drods.store import Store
from tests.scheduler_e2e.conftest import Plane, eventually, fast_settings, placement, serve

BUSY = 65
DUP = {"replicaScheduling": {"replicaSchedulingType": "Duplicated"}}
WATER = {"replicaScheduling": {"replicaSchedulingType": "Divided",
                               "weightPreference": {"dynamicWeight": "WaterLevel"}}}


async def _placed(plane: Plane, binding: str, check: Any, within_s: float = 10.0, what: str = "") -> dict[str, int]:
    async def ok() -> dict[str, int] | None:
        st = await plane.status(binding)
        got = placement(st)
        return got if check(got) else None

    return await eventually(ok, within_s, what or f"{binding} to be re-placed")


async def _fleet_entries(plane: Plane, binding: str) -> list[dict[str, Any]]:
    r = await plane.call("GET", "/api/v1/history/schedules", params={"binding": binding}, role="viewer")
    assert r.status_code == 200, r.text
    return [e for e in r.json()["items"] if e["scheduleType"] == "FleetChanged"]


async def test_bindings_decided_on_one_ready_cluster_spread_when_the_others_report(plane: Plane) -> None:
    for name in ("a", "b", "c"):
        await plane.register(name)
    await plane.report("a", BUSY)
    await plane.seen("a")
    dup = await plane.place({"name": "dup", "replicas": 2, "resources": {"cpu": 1}, "placement": DUP})
    wl = await plane.place({"name": "wl", "replicas": 6, "resources": {"cpu": 1}, "placement": WATER})
    assert placement(dup) == {"a": 2} and placement(wl) == {"a": 6}

    await plane.report("b", BUSY)
    await plane.report("c", BUSY)
    assert await _placed(plane, "dup", lambda p: p == {"a": 2, "b": 2, "c": 2}, 10.0,
                         "the Duplicated binding on the two clusters that reported")
    # as a first decision over the three would divide it, whether b and c are judged one after the other
    # or in one batch (a refit's division is made from scratch: no bonus for where it runs now)
    await _placed(plane, "wl", lambda p: p == {"a": 2, "b": 2, "c": 2}, 10.0,
                  "the water-level binding spread evenly over the three equally busy clusters")

    entries = await _fleet_entries(plane, "wl")
    assert entries and all(e["trigger"]["kind"] in ("ClusterReady", "FleetChanged") for e in entries), entries
    moved_to = {m["cluster"] for e in entries for m in e["trigger"]["moves"] if m["to"] > m["from"]}
    assert moved_to == {"b", "c"}, entries
    assert entries[0]["unknownClusters"] == 0  # the newest: every cluster had reported
    r = await plane.call("GET", "/api/v1/history/schedules", params={"binding": "wl"}, role="viewer")
    (first,) = [e for e in r.json()["items"] if e["scheduleType"] == "FirstSchedule"]
    assert first["unknownClusters"] == 2  # decided while b and c had not reported yet
    st = await plane.status("wl")
    assert st["message"].startswith("re-placed after Cluster"), st["message"]


async def test_a_cluster_joining_a_running_fleet_receives_its_share(plane: Plane) -> None:
    for name in ("a", "b"):
        await plane.cluster(name, BUSY)
    await plane.seen("a", "b")
    await plane.place({"name": "dup", "replicas": 1, "resources": {"cpu": 1}, "placement": DUP})
    before = placement(await plane.place({"name": "wl", "replicas": 8, "resources": {"cpu": 1},
                                          "placement": WATER}))
    assert set(before) == {"a", "b"}

    await plane.cluster("d", 60)  # joins a little quieter than the others
    assert await _placed(plane, "dup", lambda p: p == {"a": 1, "b": 1, "d": 1})
    got = await _placed(plane, "wl", lambda p: p.get("d", 0) > 0, what="a share of wl on the new cluster")
    assert sum(got.values()) == 8
    assert all(got.get(c, 0) <= before[c] for c in before), (before, got)  # replicas only came to d
    entries = await _fleet_entries(plane, "wl")
    trigger = entries[0]["trigger"]
    assert trigger["kind"] in ("ClusterAdded", "ClusterReady") and trigger["clusters"] == ["d"]


async def test_a_cordoned_cluster_keeps_its_replicas_when_a_new_cluster_draws_a_share(plane: Plane) -> None:
    for name in ("a", "b"):
        await plane.cluster(name, BUSY)
    await plane.seen("a", "b")
    before = placement(await plane.place({"name": "wl", "replicas": 8, "resources": {"cpu": 1},
                                          "placement": WATER}))
    assert set(before) == {"a", "b"}
    r = await plane.call("PATCH", "/apis/multicluster.io/v1alpha1/clusters/a", json={"spec": {"unschedulable": True}},
                         headers={"content-type": "application/merge-patch+json"})
    assert r.status_code == 200, r.text

    async def cordoned() -> bool:
        snap = plane.scheduler.cache.snap
        return bool(snap.unschedulable[snap.index["a"]])

    await eventually(cordoned, what="the scheduler to see a cordoned")
    await plane.cluster("d", 60)
    got = await _placed(plane, "wl", lambda p: p.get("d", 0) > 0, what="a share of wl on the new cluster")
    assert got["a"] == before["a"] and sum(got.values()) == 8, (before, got)  # d's share came from b alone


async def test_a_not_ready_cluster_keeps_its_replicas_when_a_new_cluster_draws_a_share(plane: Plane) -> None:
    """The not-ready taint is tolerated until failover moves the replicas (Karmada's taint manager): a
    refit for a joining cluster is a decision from scratch, and it took a's replicas early (walkthrough AJ)."""
    for name in ("a", "b"):
        await plane.cluster(name, BUSY)
    await plane.seen("a", "b")
    before = placement(await plane.place({"name": "wl", "replicas": 8, "resources": {"cpu": 1},
                                          "placement": WATER}))
    assert set(before) == {"a", "b"}
    since = datetime.now(UTC).isoformat()
    cond = {"type": "Ready", "status": "False", "reason": "ClusterNotReachable", "lastTransitionTime": since}
    await plane.ctx.registry.patch(CLUSTER, "a", {"status": {"conditions": [cond]}}, MERGE_PATCH, subresource="status")
    taint = {"key": "cluster.multicluster.io/not-ready", "effect": "NoExecute", "timeAdded": since}
    await plane.ctx.registry.patch(CLUSTER, "a", {"spec": {"taints": [taint]}}, MERGE_PATCH)

    async def not_ready() -> bool:
        snap = plane.scheduler.cache.snap
        row = snap.index["a"]
        return not bool(snap.ready[row]) and bool(snap.indexes.rows[row].taints)

    await eventually(not_ready, what="the scheduler to see a NotReady and tainted")
    await plane.cluster("d", 60)
    got = await _placed(plane, "wl", lambda p: p.get("d", 0) > 0, what="a share of wl on the new cluster")
    assert got["a"] == before["a"] and sum(got.values()) == 8, (before, got)  # d's share came from b alone


async def test_relabelling_a_cluster_out_of_the_affinity_removes_what_it_holds(plane: Plane) -> None:
    for name in ("a", "b", "c"):
        await plane.cluster(name, BUSY, {"tier": "prod"})
    await plane.seen("a", "b", "c")
    prod = {"clusterAffinity": {"labelSelector": {"matchLabels": {"tier": "prod"}}}}
    dup = await plane.place({"name": "dup", "replicas": 2, "resources": {"cpu": 1}, "placement": {**prod, **DUP}})
    wl = await plane.place({"name": "wl", "replicas": 6, "resources": {"cpu": 1}, "placement": {**prod, **WATER}})
    assert set(placement(dup)) == {"a", "b", "c"} and set(placement(wl)) == {"a", "b", "c"}

    r = await plane.call("PATCH", "/api/v1/clusters/c", json={"labels": {"tier": "dev"}})
    assert r.status_code == 200, r.text
    assert await _placed(plane, "dup", lambda p: p == {"a": 2, "b": 2})
    got = await _placed(plane, "wl", lambda p: "c" not in p)
    assert sum(got.values()) == 6, got
    entries = await _fleet_entries(plane, "wl")
    assert entries[0]["trigger"]["kind"] == "ClusterLabelsChanged", entries[0]["trigger"]

    # and back in: the Duplicated binding returns to it
    r = await plane.call("PATCH", "/api/v1/clusters/c", json={"labels": {"tier": "prod"}})
    assert r.status_code == 200, r.text
    assert await _placed(plane, "dup", lambda p: p == {"a": 2, "b": 2, "c": 2})


async def test_a_removed_clusters_replicas_go_to_the_others_whatever_the_switch(plane: Plane) -> None:
    for name, cpu in (("a", BUSY), ("b", BUSY), ("c", 30)):  # c has room for b's replicas
        await plane.cluster(name, cpu)
    await plane.seen("a", "b", "c")
    dup = await plane.place({"name": "dup", "replicas": 2, "resources": {"cpu": 1}, "placement": DUP})
    wl = await plane.place({"name": "wl", "replicas": 6, "resources": {"cpu": 1},
                            "placement": {**WATER, "rebalanceOnFleetChange": False}})
    assert set(placement(dup)) == {"a", "b", "c"} and set(placement(wl)) == {"a", "b", "c"}
    untouched = await plane.place({"name": "only-a", "replicas": 2, "resources": {"cpu": 1},
                                   "placement": {**WATER, "clusterAffinity": {"clusterNames": ["a"]}}})
    only_c = await plane.place({"name": "only-c", "replicas": 1, "resources": {"cpu": 1},
                                "placement": {**WATER, "clusterAffinity": {"clusterNames": ["c"]}}})
    some_c = await plane.place({"name": "b-and-c", "replicas": 4, "resources": {"cpu": 1},
                                "placement": {**WATER, "clusterAffinity": {"clusterNames": ["b", "c"]}}})
    assert placement(only_c) == {"c": 1} and set(placement(some_c)) == {"b", "c"}
    on_b = placement(some_c)["b"]

    r = await plane.call("DELETE", "/api/v1/clusters/c")
    assert r.status_code == 200, r.text
    # what may run only on the removed cluster is not left placed there: pending, and said so
    async def unplaced() -> dict[str, Any] | None:
        st = await plane.status("only-c")
        return st if placement(st) == {} else None

    st = await eventually(unplaced, 10.0, "only-c's replica off the removed cluster")
    assert st["phase"] == "Unschedulable" and st["message"].startswith("re-placed after ClusterRemoved c: c 1→0; ")
    (entry, *_) = await _fleet_entries(plane, "only-c")
    assert entry["trigger"]["kind"] == "ClusterRemoved", entry
    # what b runs stays where it is when b has no room for c's part (b-and-c: b's part as it was at most)
    got = await _placed(plane, "b-and-c", lambda p: "c" not in p, what="b-and-c's replicas off the removed cluster")
    assert set(got) <= {"b"} and got.get("b", 0) >= on_b, got
    assert await _placed(plane, "dup", lambda p: p == {"a": 2, "b": 2}, what="the copy on c dropped")
    got = await _placed(plane, "wl", lambda p: "c" not in p, what="wl's replicas off the removed cluster")
    assert sum(got.values()) == 6 and set(got) == {"a", "b"}, got
    (entry, *_) = await _fleet_entries(plane, "wl")
    assert entry["trigger"]["kind"] == "ClusterRemoved" and entry["trigger"]["clusters"] == ["c"], entry["trigger"]
    assert (await plane.status("wl"))["message"].startswith("re-placed after ClusterRemoved c")
    # a binding with nothing on it is not re-decided
    assert placement(await plane.status("only-a")) == placement(untouched)
    assert await _fleet_entries(plane, "only-a") == []


async def test_the_switch_keeps_a_divided_binding_where_it_is(plane: Plane) -> None:
    for name in ("a", "b"):
        await plane.register(name)
    await plane.report("a", BUSY)
    await plane.seen("a")
    kept = await plane.place({"name": "kept", "replicas": 6, "resources": {"cpu": 1},
                              "placement": {**WATER, "rebalanceOnFleetChange": False}})
    moving = await plane.place({"name": "moving", "replicas": 6, "resources": {"cpu": 1}, "placement": WATER})
    assert placement(kept) == {"a": 6} == placement(moving)

    await plane.report("b", BUSY)
    # the binding without the switch moving shows the change was handled; the other stays
    await _placed(plane, "moving", lambda p: p.get("b", 0) > 0)
    assert placement(await plane.status("kept")) == {"a": 6}
    assert await _fleet_entries(plane, "kept") == []


async def test_static_weights_are_redivided_over_the_clusters_that_now_match(plane: Plane) -> None:
    await plane.register("a")
    await plane.register("b")
    await plane.report("a", 20)
    await plane.seen("a")
    weights = {"replicaScheduling": {"weightPreference": {"staticWeightList": [
        {"targetCluster": {"clusterNames": ["a"]}, "weight": 1},
        {"targetCluster": {"clusterNames": ["b"]}, "weight": 2}]}}}
    st = await plane.place({"name": "weighted", "replicas": 6, "resources": {"cpu": 1}, "placement": weights})
    assert placement(st) == {"a": 6}
    await plane.report("b", 20)
    assert await _placed(plane, "weighted", lambda p: p == {"a": 2, "b": 4})


async def test_a_new_leader_waits_for_every_registered_cluster_first_status(
        store_factory: Callable[[], Store], tmp_path: Path) -> None:
    """No decisions on a half-known fleet: the scheduler starting over a registered fleet decides only
    once every cluster reported (or its grace ran out, which the decision record then says)."""
    store = store_factory()
    await store.delete_prefix("/")
    async with serve(store, tmp_path / "data", scheduler=False) as plane:
        for name in ("a", "b", "c"):
            await plane.register(name)
        await plane.report("a", BUSY)
        await plane.bind({"name": "early", "replicas": 6, "resources": {"cpu": 1}, "placement": WATER})
    async with serve(store_factory(), tmp_path / "data", settings=fast_settings(first_status_grace=60.0)) as plane:
        assert plane.scheduler.cache.unknown == {"b", "c"}
        await plane.report("b", BUSY)
        st = await plane.status("early")
        assert st["scheduledGeneration"] is None, st  # c is still unknown: nothing decided yet
        await plane.report("c", BUSY)
        st = await plane.decided("early")
        assert set(placement(st)) == {"a", "b", "c"}, st
        r = await plane.call("GET", "/api/v1/history/schedules", params={"binding": "early"}, role="viewer")
        assert [e["unknownClusters"] for e in r.json()["items"]] == [0]


async def test_the_grace_bounds_the_wait_and_the_record_counts_the_unknown(
        store_factory: Callable[[], Store], tmp_path: Path) -> None:
    store = store_factory()
    await store.delete_prefix("/")
    async with serve(store, tmp_path / "data", scheduler=False) as plane:
        for name in ("a", "silent"):
            await plane.register(name)
        await plane.report("a", BUSY)
        await plane.bind({"name": "early", "replicas": 2, "resources": {"cpu": 1}})
    async with serve(store_factory(), tmp_path / "data", settings=fast_settings(first_status_grace=0.5)) as plane:
        st = await plane.decided("early")
        assert placement(st) == {"a": 2}
        r = await plane.call("GET", "/api/v1/history/schedules", params={"binding": "early"}, role="viewer")
        assert [e["unknownClusters"] for e in r.json()["items"]] == [1]


async def test_a_restarted_scheduler_moves_nothing_but_toward_a_cluster_that_joined_meanwhile(
        store_factory: Callable[[], Store], tmp_path: Path) -> None:
    """The clusters a starting scheduler lists are not news to bindings decided after they joined: a
    restart re-places nothing (it once re-divided water-level bindings over every listed cluster as if
    each had just joined), while a cluster that joined while no scheduler ran still gets its share."""
    store = store_factory()
    await store.delete_prefix("/")
    async with serve(store, tmp_path / "data") as plane:
        for name in ("a", "b"):
            await plane.cluster(name, BUSY)
        await plane.seen("a", "b")
        # creation times are in whole seconds: a decision in the second a cluster joined may not have
        # seen it (and is re-decided after a restart); these are decided in a later second
        await asyncio.sleep(1.0 - time.time() % 1.0)
        dup = await plane.place({"name": "dup", "replicas": 1, "resources": {"cpu": 1}, "placement": DUP})
        wl = await plane.place({"name": "wl", "replicas": 7, "resources": {"cpu": 1}, "placement": WATER})
        pinned = await plane.place({"name": "pinned", "replicas": 5, "resources": {"cpu": 1}, "placement": {
            **WATER, "clusterAffinity": {"clusterNames": ["a", "b"]}}})
    before = placement(wl)
    assert placement(dup) == {"a": 1, "b": 1} and set(before) == {"a", "b"} and set(placement(pinned)) == {"a", "b"}
    async with serve(store_factory(), tmp_path / "data", scheduler=False) as plane:
        await plane.cluster("c", BUSY)  # joins while no scheduler runs
    async with serve(store_factory(), tmp_path / "data") as plane:
        # a restarting plane campaigns, lists and waits for the clusters' first statuses before it decides:
        # under the whole suite's load on two cores that once took longer than the default 10 s
        assert await _placed(plane, "dup", lambda p: p == {"a": 1, "b": 1, "c": 1}, 30.0)
        got = await _placed(plane, "wl", lambda p: p.get("c", 0) > 0, 30.0, what="a share of wl on c")
        assert all(got.get(k, 0) <= n for k, n in before.items()), (before, got)  # replicas only came to c
        for name in ("dup", "wl"):
            triggers = [e["trigger"] for e in await _fleet_entries(plane, name)]
            assert triggers and all(t["clusters"] == ["c"] for t in triggers), (name, triggers)
        # what c does not concern stays as decided: nothing re-divided it between a and b
        assert await _fleet_entries(plane, "pinned") == []
        assert placement(await plane.status("pinned")) == placement(pinned)


async def test_a_returning_cluster_that_is_only_as_good_moves_nothing_onto_it(
        store_factory: Callable[[], Store], tmp_path: Path) -> None:
    """A quiet fleet packs a binding onto one cluster, whose status then shows its replicas. A cluster
    that joins empty is no better once the binding's own replicas are not counted against where it runs,
    and a hair better (another binding's 0.1 core on a) is no reason to move 20 replicas: they stay (they
    moved there whole when its own load made its cluster look busier than the empty one)."""
    store = store_factory()
    await store.delete_prefix("/")
    async with serve(store, tmp_path / "data", settings=fast_settings(assume_ttl=0.3),
                     monitoring=MonitorSettings(rateMinIntervalSeconds=0.0)) as plane:
        await plane.cluster("a", 0.0, report={"mem_pct": 0.0})
        await plane.seen("a")
        wl = await plane.place({"name": "wl", "replicas": 20, "resources": {"cpu": 1}, "placement": WATER})
        dup = await plane.place({"name": "dup", "replicas": 1, "resources": {"cpu": 0.1}, "placement": DUP})
        assert placement(wl) == {"a": 20} and placement(dup) == {"a": 1}
        await asyncio.sleep(0.4)  # a's next status is made after the assumption's time
        await plane.report("a", 100 * 20.1 / 64, mem_pct=0.0)  # the member's status shows them
        snap, cache = plane.scheduler.cache.snap, plane.scheduler.cache

        async def counted_once() -> bool:
            cache.expire()
            return not cache._assumed

        await eventually(counted_once, 5.0, "the assumptions covered by a's status")
        await plane.cluster("b", 0.0, report={"mem_pct": 0.0})
        # the fleet change is decided: the Duplicated binding gains its copy on b in the same pass
        assert await _placed(plane, "dup", lambda p: p == {"a": 1, "b": 1})
        assert placement(await plane.status("wl")) == {"a": 20}
        assert await _fleet_entries(plane, "wl") == []
        assert snap.water_level[snap.index["a"]] == pytest.approx(20.1 / 64, abs=1e-3)  # its own load again


async def test_a_duplicated_copy_held_back_for_room_is_placed_when_room_frees(
        store_factory: Callable[[], Store], tmp_path: Path) -> None:
    """Karmada leaves such a copy out until something else re-decides the binding; here the cluster's
    room coming back retries it (as a partial placement is retried), and the status says why it waits."""
    store = store_factory()
    await store.delete_prefix("/")
    async with serve(store, tmp_path / "data", monitoring=MonitorSettings(rateMinIntervalSeconds=0.0)) as plane:
        await plane.cluster("a", 30, report={"mem_pct": 0.0})
        await plane.cluster("b", 95, report={"mem_pct": 0.0})  # above its water-level limit
        await plane.seen("a", "b")
        dup = await plane.place({"name": "dup", "replicas": 2, "resources": {"cpu": 1}, "placement": DUP})
        assert placement(dup) == {"a": 2}
        assert "b" in ((await plane.status("dup")).get("reasons") or {})  # why b has no copy
        await plane.report("b", 30, mem_pct=0.0)  # b has room again: nothing else changed
        assert await _placed(plane, "dup", lambda p: p == {"a": 2, "b": 2}, what="the copy on b")


async def test_a_failover_keeps_the_replicas_running_on_a_healthy_cluster_that_is_full(plane: Plane) -> None:
    """b fails while a is over its water-level limit: b's replicas go to c, and a keeps what runs there —
    a fresh division dropped a (full, for new replicas) and deleted its running replicas with b's."""
    from datetime import UTC, datetime

    from drods.model.annotations import failover_reason
    from drods.model.kinds import CLUSTER
    from drods.registry.patch import MERGE_PATCH

    for name, cpu in (("a", BUSY), ("b", BUSY), ("c", 30)):  # c has room for b's replicas
        await plane.cluster(name, cpu)
    await plane.seen("a", "b", "c")
    await plane.bind({"name": "web", "replicas": 30, "resources": {"cpu": 1}, "placement": WATER})
    spread = await _placed(plane, "web", lambda p: len(p) == 3 and sum(p.values()) == 30, what="web on a, b and c")
    r = await plane.call("PATCH", "/api/v1/clusters/a", json={"waterLevelLimit": 0.6})
    assert r.status_code == 200, r.text  # a (at 0.65) is above its limit now: no room for one more replica
    cond = {"type": "Ready", "status": "False", "reason": "Test", "lastTransitionTime": datetime.now(UTC).isoformat()}
    await plane.ctx.registry.patch(CLUSTER, "b", {"status": {"conditions": [cond]}}, MERGE_PATCH, subresource="status")
    snap = plane.scheduler.cache.snap

    async def seen() -> bool:
        return not bool(snap.ready[snap.index["b"]]) and float(snap.limit[snap.index["a"]]) == 0.6

    await eventually(seen, what="the scheduler to see b NotReady and a full")
    await plane.ctx.rescheduler.failover("web", "b", failover_reason("b", "now", 0))
    moved = await _placed(plane, "web", lambda p: "b" not in p, what="web off b")
    assert moved == {"a": spread["a"], "c": spread["c"] + spread["b"]}, (spread, moved)


async def test_a_copy_left_on_a_cluster_relabelled_out_goes_once_another_cluster_matches(plane: Plane) -> None:
    """Relabelled out of the affinity while no other cluster matches, a binding stays where it runs and
    says why (Unschedulable, its placement kept); once another cluster matches, the change re-decides it
    and the copy on the cluster that no longer matches goes — it stayed there for good, re-decisions
    changing only the changed cluster's part."""
    for name, env in (("m1", "prod"), ("m2", "prod"), ("m3", "dev")):
        await plane.cluster(name, BUSY, {"env": env})
    await plane.seen("m1", "m2", "m3")
    dev = {"clusterAffinity": {"labelSelector": {"matchLabels": {"env": "dev"}}}}
    dup = await plane.place({"name": "dup", "replicas": 1, "resources": {"cpu": 1}, "placement": {**dev, **DUP}})
    wl = await plane.place({"name": "wl", "replicas": 4, "resources": {"cpu": 1}, "placement": {**dev, **WATER}})
    assert placement(dup) == {"m3": 1} and placement(wl) == {"m3": 4}

    r = await plane.call("PATCH", "/api/v1/clusters/m3", json={"labels": {"env": "staging"}})
    assert r.status_code == 200, r.text
    for name, kept in (("dup", {"m3": 1}), ("wl", {"m3": 4})):
        async def explained(name: str = name) -> dict[str, Any] | None:
            st = await plane.status(name)
            return st if st["phase"] == "Unschedulable" else None

        st = await eventually(explained, 10.0, f"{name}'s status to say m3 no longer matches")
        assert placement(st) == kept, st  # nothing else fits: what runs stays
        assert st["message"].startswith("kept on m3, which no longer matches the placement after "
                                        "ClusterLabelsChanged m3: no other cluster fits"), st["message"]
        (entry, *_) = await _fleet_entries(plane, name)
        assert entry["trigger"]["kind"] == "ClusterLabelsChanged" and entry["trigger"]["moves"] == [], entry

    r = await plane.call("PATCH", "/api/v1/clusters/m2", json={"labels": {"env": "dev"}})
    assert r.status_code == 200, r.text
    assert await _placed(plane, "dup", lambda p: p == {"m2": 1}, what="dup's copy on m2 alone")
    assert await _placed(plane, "wl", lambda p: p == {"m2": 4}, what="wl's replicas on m2 alone")
    for name in ("dup", "wl"):
        st = await plane.status(name)
        assert st["phase"] == "Scheduled", st


async def test_a_copy_on_a_cluster_relabelled_out_while_no_scheduler_ran_goes_with_the_next_change(
        store_factory: Callable[[], Store], tmp_path: Path) -> None:
    """A cluster relabelled out of a binding's affinity while no scheduler ran is not news to a restarted
    one (nothing is re-decided for the listing); the next change that re-decides the binding, about
    another cluster, drops the copy there too, not only the changed cluster's part."""
    store = store_factory()
    await store.delete_prefix("/")
    dev = {"clusterAffinity": {"labelSelector": {"matchLabels": {"env": "dev"}}}}
    async with serve(store, tmp_path / "data") as plane:
        for name, env in (("m1", "prod"), ("m2", "prod"), ("m3", "dev")):
            await plane.cluster(name, BUSY, {"env": env})
        await plane.seen("m1", "m2", "m3")
        await asyncio.sleep(1.0 - time.time() % 1.0)  # decided in a later second than the clusters joined
        dup = await plane.place({"name": "dup", "replicas": 1, "resources": {"cpu": 1}, "placement": {**dev, **DUP}})
        wl = await plane.place({"name": "wl", "replicas": 4, "resources": {"cpu": 1},
                                "placement": {**dev, **WATER}})
    assert placement(dup) == {"m3": 1} and placement(wl) == {"m3": 4}
    async with serve(store_factory(), tmp_path / "data", scheduler=False) as plane:
        r = await plane.call("PATCH", "/api/v1/clusters/m3", json={"labels": {"env": "staging"}})
        assert r.status_code == 200, r.text
    async with serve(store_factory(), tmp_path / "data") as plane:
        await plane.seen("m1", "m2", "m3")
        sched = plane.scheduler

        async def leads() -> bool:
            return sched.ready.is_set()

        await eventually(leads, 30.0, "the scheduler to lead, its fleet known")
        assert placement(await plane.status("dup")) == {"m3": 1}  # a restart re-decides nothing
        r = await plane.call("PATCH", "/api/v1/clusters/m2", json={"labels": {"env": "dev"}})
        assert r.status_code == 200, r.text
        assert await _placed(plane, "dup", lambda p: p == {"m2": 1}, 15.0, "dup's copy on m2 alone")
        assert await _placed(plane, "wl", lambda p: p == {"m2": 4}, 15.0, "wl's replicas on m2 alone")
        (entry, *_) = await _fleet_entries(plane, "dup")
        assert entry["trigger"]["kind"] == "ClusterLabelsChanged" and entry["trigger"]["clusters"] == ["m2"], entry
        assert "(m3 no longer matches the placement)" in entry["trigger"]["reason"], entry["trigger"]
        assert {(m["cluster"], m["from"], m["to"]) for m in entry["trigger"]["moves"]} == {("m2", 0, 1), ("m3", 1, 0)}
