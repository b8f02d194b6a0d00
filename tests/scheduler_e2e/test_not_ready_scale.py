"""A scale while a member is NotReady (walkthrough AJ 1): the not-ready taint is tolerated for the
failover controller's seconds, so the NotReady member keeps the replicas it runs and the extra ones go
elsewhere; failover, once the toleration has run out, moves them (Karmada: the TaintToleration filter
passes a tolerated NoExecute taint on a cluster the binding targets; eviction is the taint manager's)."""

from __future__ import annotations

from datetime import UTC, datetime

from drods.model.annotations import failover_reason
from drods.model.kinds import CLUSTER
from drods.registry.patch import MERGE_PATCH
from tests.scheduler_e2e.conftest import Plane, eventually, placement

STATIC = {"replicaScheduling": {"replicaSchedulingType": "Divided", "weightPreference": {"staticWeightList": [
    {"targetCluster": {"clusterNames": ["a"]}, "weight": 2}, {"targetCluster": {"clusterNames": ["b"]}, "weight": 1}]}},
    "clusterAffinity": {"clusterNames": ["a", "b"]}}


async def test_a_scale_up_keeps_a_not_ready_members_replicas_until_failover_moves_them(plane: Plane) -> None:
    for name in ("a", "b"):
        await plane.cluster(name, 40)
    await plane.seen("a", "b")
    st = await plane.place({"name": "web", "replicas": 3, "resources": {"cpu": 1}, "placement": STATIC})
    assert placement(st) == {"a": 2, "b": 1}
    since = datetime.now(UTC).isoformat()
    cond = {"type": "Ready", "status": "False", "reason": "ClusterNotReachable", "lastTransitionTime": since}
    await plane.ctx.registry.patch(CLUSTER, "a", {"status": {"conditions": [cond]}}, MERGE_PATCH, subresource="status")
    taint = {"key": "cluster.multicluster.io/not-ready", "effect": "NoExecute", "timeAdded": since}
    await plane.ctx.registry.patch(CLUSTER, "a", {"spec": {"taints": [taint]}}, MERGE_PATCH)
    snap = plane.scheduler.cache.snap

    async def seen() -> bool:
        row = snap.index["a"]
        return not bool(snap.ready[row]) and bool(snap.indexes.rows[row].taints)

    await eventually(seen, what="the scheduler to see a NotReady and tainted")
    r = await plane.call("PATCH", "/api/v1/bindings/web", json={"replicas": 5},
                         headers={"content-type": "application/merge-patch+json"})
    assert r.status_code == 200, r.text
    st = await plane.decided("web")
    assert placement(st) == {"a": 2, "b": 3}, st  # a keeps its 2 (none more there); the extra ones go to b
    # the toleration ran out: failover moves a's replicas
    await plane.ctx.rescheduler.failover("web", "a", failover_reason("a", since, 90))

    async def moved() -> dict[str, int] | None:
        got = placement(await plane.status("web"))
        return got if "a" not in got else None

    assert await eventually(moved, 10, "web off a") == {"b": 5}
