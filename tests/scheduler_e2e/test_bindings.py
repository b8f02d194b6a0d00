"""API5 through the running control plane: submit tasks, read their state and placement."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any

import pytest

from drods.model.kinds import BINDING
from drods.store import Compare, Put, TxnResult
from drods.store.base import TxnOp
from tests.scheduler_e2e.conftest import Plane, eventually, placement

ISSUE_EXAMPLE: dict[str, Any] = {
    "name": "web", "replicas": 6, "priority": 0,
    "resources": {"cpu": 0.5, "memory": 1},
    "placement": {"clusterAffinity": {"labelSelector": {"matchLabels": {"tier": "prod"}}},
                  "replicaScheduling": {"replicaSchedulingType": "Divided",
                                        "replicaDivisionPreference": "Weighted",
                                        "weightPreference": {"dynamicWeight": "WaterLevel"}},
                  "waterLevelLimit": 0.85},
}


async def test_issue_example_spreads_by_water_level(plane: Plane) -> None:
    await plane.cluster("a", 75, {"tier": "prod"})
    await plane.cluster("b", 60, {"tier": "prod"})
    await plane.cluster("c", 10, {"tier": "dev"})  # emptiest, but not selected
    await plane.seen("a", "b", "c")

    created = await plane.bind(ISSUE_EXAMPLE)
    assert created["id"] == "web" and created["phase"] == "Pending" and created["uid"]
    assert created["statusUrl"] == "/api/v1/bindings/web/status"

    st = await plane.decided("web")
    got = placement(st)
    assert st["phase"] == "Scheduled" and st["message"].startswith("scheduled 6 replicas")
    assert sum(got.values()) == 6 and set(got) <= {"a", "b"}
    assert got["b"] > got.get("a", 0) >= 1, got  # busy fleet → spread, more where the water level is lower
    assert st["requested"] == 6 and st["placed"] == 6 and st["partial"] is False and st["scheduledTime"]

    # The same object on the Kubernetes path, and in the list.
    r = await plane.call("GET", "/apis/multicluster.io/v1alpha1/bindings/web")
    assert r.status_code == 200 and r.json()["status"]["phase"] == "Scheduled"
    r = await plane.call("GET", "/api/v1/bindings", role="viewer")
    assert [b["id"] for b in r.json()["items"]] == ["web"]

    # A binding without a name gets a unique ID.
    ids = {(await plane.bind({"replicas": 1, "resources": {"cpu": 0.1}}))["id"] for _ in range(3)}
    assert len(ids) == 3 and all(i.startswith("binding-") for i in ids)
    r = await plane.call("POST", "/api/v1/bindings", json=ISSUE_EXAMPLE)
    assert r.status_code == 409 and r.json()["code"] == "BINDING_CONFLICT"


async def test_validation_errors_are_clear_422s(plane: Plane) -> None:
    cases = [
        ({"replicas": -1}, "replicas"),
        ({"replicas": 2, "resources": {"cpu": "lots"}}, "resources.cpu"),
        ({"replicas": 2, "placement": {"waterLevelLimit": 1.5}}, "placement.waterLevelLimit"),
        ({"replicas": 2, "placement": {"replicaScheduling": {"replicaSchedulingType": "Sideways"}}},
         "placement.replicaScheduling.replicaSchedulingType"),
        ({"replicas": 2, "colour": "blue"}, "colour"),
        ({"name": "Not_A_Name", "replicas": 1}, "name"),
    ]
    for body, field in cases:
        r = await plane.call("POST", "/api/v1/bindings", json=body)
        assert r.status_code == 422, (body, r.text)
        err = r.json()
        assert err["code"] == "VALIDATION_FAILED"
        assert field in [f["field"] for f in err["details"]["fields"]], (field, err)
    r = await plane.call("GET", "/api/v1/bindings/nope/status")
    assert r.status_code == 404 and r.json()["code"] == "BINDING_NOT_FOUND"
    r = await plane.call("POST", "/api/v1/bindings", json={"replicas": 1}, role="viewer")
    assert r.status_code == 403


async def test_fragmentation_conflicts_and_explicit_targets(plane: Plane) -> None:
    # frag: 48 free cores in total, but no node has more than 2 free.
    await plane.cluster("frag", 25, {"tier": "prod"}, region="eu", provider="gcp",
                        report={"largestNodeFree": {"cpu": 2, "memory": 64}})
    await plane.cluster("roomy", 50, {"tier": "prod"}, region="us", provider="aws")
    await plane.seen("frag", "roomy")

    st = await plane.place({"name": "big", "replicas": 2, "resources": {"cpu": 4, "memory": 4}})
    assert placement(st) == {"roomy": 2}
    r = await plane.call("GET", "/api/v1/history/schedules", params={"binding": "big"})
    verdicts = r.json()["items"][0]["filters"]
    assert verdicts["reasons"]["frag"].startswith("no node fits 1 replica: largest free node has cpu 2/4")
    assert verdicts["reasonCounts"] == {"no node fits 1 replica": 1}

    # Only the fragmented cluster allowed: unschedulable, and the reason says why.
    st = await plane.place({"name": "frag-only", "replicas": 1, "targetClusters": ["frag"],
                                                "resources": {"cpu": 4, "memory": 4}})
    assert st["phase"] == "Unschedulable" and st["placement"] == []
    assert st["message"].startswith("0/2 clusters available:")
    assert "no node fits 1 replica" in st["reasons"]["frag"] and st["reasons"]["roomy"] == "not in targetClusters"
    assert "Targets: frag: no node fits 1 replica" in st["message"]

    # Conflicting constraints: region eu is only gcp, provider aws is only in us.
    st = await plane.place({"name": "conflict", "replicas": 1, "regions": ["eu"],
                                                "providers": ["aws"], "resources": {"cpu": 1}})
    assert st["phase"] == "Unschedulable"
    assert st["message"].startswith("0/2 clusters available: ")
    assert set(st["reasons"]) == {"frag", "roomy"}

    # Explicit targets that don't fit, and one that doesn't exist.
    st = await plane.place({"name": "too-big", "replicas": 1, "targetClusters": ["roomy", "ghost"],
                                                "resources": {"cpu": 100}})
    assert st["phase"] == "Unschedulable"
    # 32 cores free by the report, 8 of them assumed by "big" (the member does not show them yet)
    assert st["reasons"]["roomy"] == "insufficient cpu: need 100 cores, free 24 cores"
    assert st["reasons"]["ghost"] == "target cluster not registered"
    assert "Target clusters not registered: ghost" in st["message"]
    # placed on the registered target: the status still names the one that is not there
    st = await plane.place({"name": "half-there", "replicas": 1, "targetClusters": ["roomy", "ghost"],
                            "resources": {"cpu": 1}})
    assert st["phase"] == "Scheduled" and [p["cluster"] for p in st["placement"]] == ["roomy"]
    assert st["reasons"]["ghost"] == "target cluster not registered"
    assert st["message"].endswith("; target clusters not registered: ghost")
    # a typo in an affinity's clusterNames is said in the status too, not only filtered
    st = await plane.place({"name": "typo", "replicas": 1, "resources": {"cpu": 1},
                            "placement": {"clusterAffinity": {"clusterNames": ["roomy", "rooomy"]}}})
    assert st["phase"] == "Scheduled" and [p["cluster"] for p in st["placement"]] == ["roomy"]
    assert st["reasons"]["rooomy"] == "named in clusterAffinity.clusterNames, not registered"
    assert st["message"].endswith("; clusterAffinity.clusterNames not registered: rooomy")

    # Unschedulable attempts are in the failure log.
    async def logged() -> bool:
        r = await plane.call("GET", "/api/v1/history/failures", params={"kind": "Unschedulable"}, role="viewer")
        return {e["binding"] for e in r.json()["items"]} >= {"frag-only", "conflict", "too-big"}

    await eventually(logged, what="unschedulable attempts in /api/v1/history/failures")


async def test_duplicated_static_weights_and_stable_scaling(plane: Plane) -> None:
    for name, cpu in (("a", 20), ("b", 30), ("c", 40)):
        await plane.cluster(name, cpu, report={"cores": 256})
    await plane.seen("a", "b", "c")

    st = await plane.place({
        "name": "dup", "replicas": 3, "resources": {"cpu": 1},
        "placement": {"clusterAffinity": {"clusterNames": ["a", "b"]},
                      "replicaScheduling": {"replicaSchedulingType": "Duplicated"}}})
    assert placement(st) == {"a": 3, "b": 3} and st["placed"] == 3

    st = await plane.place({
        "name": "weighted", "replicas": 6, "resources": {"cpu": 1},
        "placement": {"replicaScheduling": {"weightPreference": {"staticWeightList": [
            {"targetCluster": {"clusterNames": ["a"]}, "weight": 1},
            {"targetCluster": {"clusterNames": ["b"]}, "weight": 2}]}},
            "clusterAffinity": {"clusterNames": ["a", "b"]}}})
    assert placement(st) == {"a": 2, "b": 4}

    # Scaling by merge patch re-divides stably: up only adds, down only removes.
    st = await plane.place({"name": "elastic", "replicas": 10, "resources": {"cpu": 2}})
    before = placement(st)
    assert sum(before.values()) == 10
    r = await plane.call("PATCH", "/api/v1/bindings/elastic", json={"replicas": 17},
                         headers={"content-type": "application/merge-patch+json"})
    assert r.status_code == 200 and r.json()["replicas"] == 17 and r.json()["generation"] == 2
    st = await plane.decided("elastic")
    up = placement(st)
    assert sum(up.values()) == 17 and all(up.get(c, 0) >= n for c, n in before.items()), (before, up)
    r = await plane.call("PATCH", "/api/v1/bindings/elastic", json={"replicas": 5})
    st = await plane.decided("elastic")
    down = placement(st)
    assert sum(down.values()) == 5 and all(down.get(c, 0) <= n for c, n in up.items()), (up, down)
    r = await plane.call("GET", "/api/v1/history/schedules", params={"binding": "elastic"})
    assert [e["scheduleType"] for e in r.json()["items"]] == ["ScaleSchedule", "ScaleSchedule", "FirstSchedule"]

    r = await plane.call("PATCH", "/api/v1/bindings/elastic", json={"replicas": "many"})
    assert r.status_code == 422 and r.json()["details"]["fields"][0]["field"] == "replicas"
    r = await plane.call("DELETE", "/api/v1/bindings/elastic")
    assert r.status_code == 200
    r = await plane.call("GET", "/api/v1/bindings/elastic/status")
    assert r.status_code == 404


async def test_an_unschedulable_status_names_a_few_clusters_per_verdict(plane: Plane) -> None:
    """The status samples the dropped clusters (every informer holds it); the history names more."""
    full = [f"full-{i}" for i in range(7)]
    for name in full:
        await plane.cluster(name, 95)
    await plane.cluster("tainted", 10, taints=[{"key": "gpu", "value": "only", "effect": "NoSchedule"}])
    await plane.seen(*full, "tainted")
    st = await plane.place({"name": "nowhere", "replicas": 1, "resources": {"cpu": 1}})
    assert st["phase"] == "Unschedulable"
    assert st["message"].startswith("0/8 clusters available: 7 water level above 85%, 1 untolerated taint")
    shown = st["reasons"]
    assert len(shown) == 6 and shown["tainted"].startswith("untolerated taint gpu=only")
    assert sum(why.startswith("water level above 85%") for why in shown.values()) == 5
    # the clusters the sample leaves out are still counted, by verdict
    assert st["reasonCounts"]["water level above 85%"] == 7 and sum(st["reasonCounts"].values()) == 8
    assert st["reasonsOmitted"] == 2
    r = await plane.call("GET", "/api/v1/history/schedules", params={"binding": "nowhere"}, role="viewer")
    entry = r.json()["items"][0]
    assert set(entry["filters"]["reasons"]) == {*full, "tainted"} and entry["filters"]["reasonsOmitted"] == 0


async def test_parked_bindings_keep_a_bounded_spec_cache_and_still_retry(plane: Plane) -> None:
    assert plane.scheduler is not None
    plane.scheduler._specs.size = 2
    await plane.cluster("small", 10, report={"cores": 4, "mem_gib": 16})
    await plane.seen("small")
    names = [f"parked-{i}" for i in range(4)]
    for nm in names:
        st = await plane.place({"name": nm, "replicas": 1, "targetClusters": ["later"], "resources": {"cpu": 1}})
        assert st["phase"] == "Unschedulable"
    assert len(plane.scheduler._specs) <= 2
    await plane.cluster("later", 10)  # every parked binding is retried, evicted specs validated again
    for nm in names:
        async def placed(nm: str = nm) -> bool:
            return placement(await plane.status(nm)) == {"later": 1}

        await eventually(placed, 15, f"{nm} placed on the new cluster")
    assert len(plane.scheduler._specs) <= 2


async def test_decisions_made_while_a_status_write_is_in_flight_go_in_the_next_transaction(
        plane: Plane, monkeypatch: pytest.MonkeyPatch) -> None:
    """Group commit: the scheduler's first status transaction is held; four bindings decided meanwhile
    are written together once it lands, and every decision is in the store."""
    await plane.cluster("a", 10)
    await plane.seen("a")
    svc = plane.scheduler
    real = svc.store.txn
    held, release = asyncio.Event(), asyncio.Event()
    per_txn: list[int] = []  # decisions in each of the scheduler's status transactions

    async def txn(compares: Sequence[Compare], success: Sequence[TxnOp], failure: Sequence[TxnOp] = ()) -> TxnResult:
        if any(c.key == svc.lease_key for c in compares):  # fenced on the scheduler's lease
            per_txn.append(sum(isinstance(op, Put) and op.key.startswith(BINDING.key_prefix()) for op in success))
            if len(per_txn) == 1:
                held.set()
                await release.wait()
        return await real(compares, success, failure)

    monkeypatch.setattr(svc.store, "txn", txn)
    await plane.bind({"name": "g0", "replicas": 1, "resources": {"cpu": 0.5}})
    await asyncio.wait_for(held.wait(), 15)  # the first status write
    for i in range(1, 5):
        await plane.bind({"name": f"g{i}", "replicas": 1, "resources": {"cpu": 0.5}})

    async def all_decided_none_written() -> bool:  # g0 waits for its write, g1..g4 for the next one
        c = svc.queue.counts()
        return c["processing"] == 5 and c["active"] == 0

    await eventually(all_decided_none_written, what="four decisions waiting behind the held write")
    assert per_txn == [1]
    release.set()
    for i in range(5):
        assert placement(await plane.decided(f"g{i}")) == {"a": 1}
    assert per_txn == [1, 4]
    text = (await plane.call("GET", "/metrics", role="viewer")).text
    for line in ("drods_scheduler_status_write_batch_size_count 2.0", "drods_scheduler_status_write_batch_size_sum 5.0",
                 'drods_scheduler_status_write_batch_size_bucket{le="2.0"} 1.0',
                 'drods_scheduler_status_write_batch_size_bucket{le="4.0"} 2.0'):
        assert line in text, line


async def test_a_pinned_binding_keeps_saying_which_users_it_was_placed_for(plane: Plane) -> None:
    """A MigrationPlan's pin writes the pinned placement without weighing users; the users the last
    decision used stay on the status (they went, and `drods get bindings -o wide` showed none)."""
    from drods.model.annotations import PINNED_PLACEMENT
    from drods.model.migration import pin_annotation

    await plane.cluster("dfw", 20, region="us", network={"latencyMs": {"eu": 40}})
    await plane.cluster("lhr", 20, region="eu", network={"latencyMs": {"us": 40}})
    await plane.seen("dfw", "lhr")
    st = await plane.place({"name": "pw", "replicas": 2, "resources": {"cpu": 0.5},
                            "placement": {"users": [{"region": "us"}], "latencySLOMs": 30}})
    assert placement(st) == {"dfw": 2} and st["users"]["source"] == "declared", st
    pin = pin_annotation("MigrationPlan default/m", {"dfw": 2, "lhr": 2})
    r = await plane.call("PATCH", "/apis/multicluster.io/v1alpha1/bindings/pw",
                         json={"metadata": {"annotations": {PINNED_PLACEMENT: pin}}},
                         headers={"content-type": "application/merge-patch+json"})
    assert r.status_code == 200, r.text

    async def pinned() -> dict[str, Any] | None:
        now = await plane.status("pw")
        return now if placement(now) == {"dfw": 2, "lhr": 2} else None

    now = await eventually(pinned, 15, "the pinned placement")
    assert "pinned by MigrationPlan default/m" in now["message"], now
    assert now["users"] == st["users"], now
