"""Stateful topology (F3): the primary whole on the best cluster (beside its data's Primary copy), the
replicas on distinct other clusters spread by region then zone, promotion of a replica cluster when the
primary's cluster is lost, and the validation of the field."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from drods.model.binding import BindingSpec, ObjectReference, TargetCluster
from drods.model.dataset import DatasetRead
from drods.model.placement import Placement
from drods.scheduler import Scheduler, Snapshot, Task
from drods.scheduler.plugins.data_locality import DataLocality
from drods.scheduler.task import analyse
from tests.scheduler.conftest import add, status, task

DB = ObjectReference(apiVersion="apps/v1", kind="StatefulSet", namespace="shop", name="db")
TOPO = {"primary": {"replicas": 3}, "replicas": {"clusters": 2, "replicasPerCluster": 1}}


def fleet(snap: Snapshot) -> None:
    # eu-a is the emptiest; the dataset's Primary copy is on us-a, a Replica copy on eu-a
    add(snap, "eu-a", region="eu", zone="eu-1", st=status(cpu_used=5))
    add(snap, "eu-b", region="eu", zone="eu-2", st=status(cpu_used=10))
    add(snap, "eu-c", region="eu", zone="eu-2", st=status(cpu_used=12))
    add(snap, "us-a", region="us", zone="us-1", st=status(cpu_used=30))
    add(snap, "ap-a", region="ap", zone="ap-1", st=status(cpu_used=60))
    snap.datasets = {"shop/orders": ("us-a", "eu-a")}
    snap.dataset_primaries = {"shop/orders": "us-a"}


def stateful(**topo: object) -> BindingSpec:
    return task(replicas=3, resource=DB, datasets=[DatasetRead(name="orders", readGiBPerHour=200)],
                placement=Placement.model_validate({"statefulTopology": {**TOPO, **topo}}))


def roles(result: object) -> dict[str, tuple[int, str]]:
    pairs = dict(result.pairs)  # type: ignore[attr-defined]
    return {c: (pairs[c], r) for c, r in result.roles.items()}  # type: ignore[attr-defined]


def test_primary_beside_the_primary_copy_replicas_spread_over_regions(snap: Snapshot, sched: Scheduler) -> None:
    fleet(snap)
    info = analyse(stateful())
    assert info.replicas == 5 and info.topology is not None  # 3 + 2 × 1: the topology's counts
    # DataLocality measures a topology's reads from the Primary copy only: us-a 100, the others 0
    s = DataLocality().score(info, snap, snap.ready[: snap.n].copy())
    assert s.tolist() == pytest.approx([0.0, 0.0, 0.0, 100.0, 0.0])
    r = sched.schedule(stateful(), snap, name="db")
    assert r.phase == "Scheduled" and r.division == "StatefulTopology" and not r.partial
    # the primary on us-a (its data's writes land there); replicas: the best cluster of a new region
    # (eu-a, emptiest), then the only other new region (ap-a) before a second eu cluster
    assert roles(r) == {"us-a": (3, "Primary"), "eu-a": (1, "Replica"), "ap-a": (1, "Replica")}
    assert r.topology == {"primary": "us-a", "replicas": ["eu-a", "ap-a"], "primaryChosenBy": "affinity"}
    assert r.placement == [TargetCluster(cluster="ap-a", replicas=1), TargetCluster(cluster="eu-a", replicas=1),
                           TargetCluster(cluster="us-a", replicas=3)]


def test_zones_when_regions_run_out_and_partial_when_clusters_do(snap: Snapshot, sched: Scheduler) -> None:
    add(snap, "a1", region="eu", zone="z1", st=status(cpu_used=1))
    add(snap, "a2", region="eu", zone="z1", st=status(cpu_used=2))
    add(snap, "b1", region="eu", zone="z2", st=status(cpu_used=40))
    spec = task(replicas=1, placement=Placement.model_validate({"statefulTopology": {
        "replicas": {"clusters": 2}}}))
    r = sched.schedule(spec, snap, name="x")
    # primary (1 replica by default) on the best, a1; a new zone (b1) before the better a2
    assert roles(r) == {"a1": (1, "Primary"), "b1": (1, "Replica"), "a2": (1, "Replica")}
    spec3 = task(replicas=1, placement=Placement.model_validate({"statefulTopology": {
        "replicas": {"clusters": 3}}}))
    r = sched.schedule(spec3, snap, name="y")
    assert r.partial and r.placed == 3 and r.requested == 4
    assert "2/3 replica clusters found" in r.message
    # nothing can hold the primary: unschedulable, with the reason
    big = task(replicas=1, cpu=1.0, placement=Placement.model_validate({"statefulTopology": {
        "primary": {"replicas": 500}, "replicas": {"clusters": 1}}}))
    r = sched.schedule(big, snap, name="z")
    assert r.phase == "Unschedulable" and "can hold the primary's 500 replicas" in r.message


def test_failover_promotes_a_replica_cluster(snap: Snapshot, sched: Scheduler) -> None:
    fleet(snap)
    current = [TargetCluster(cluster="us-a", replicas=3), TargetCluster(cluster="eu-a", replicas=1),
               TargetCluster(cluster="ap-a", replicas=1)]
    # the primary's cluster is lost (NotReady): a replica cluster is promoted — not eu-b, although
    # eu-b is as good as eu-a by score — and the lost replica slot is filled from the rest
    add(snap, "us-a", region="us", zone="us-1", ready=False, st=status(cpu_used=30))
    r = sched.schedule(Task(stateful(), name="db", current=current, rebalance=True, primary="us-a"), snap)
    assert r.topology is not None and r.topology["promotedFrom"] == "us-a"
    assert r.topology["primaryChosenBy"] == "promoted"
    got = roles(r)
    assert got["eu-a"] == (3, "Primary") and got["ap-a"] == (1, "Replica")  # the surviving replica stays
    assert len(got) == 3 and "us-a" not in got
    # the primary's cluster is healthy: it stays primary, however the scores moved
    add(snap, "us-a", region="us", zone="us-1", st=status(cpu_used=90))
    r = sched.schedule(Task(stateful(), name="db", current=current, primary="us-a"), snap)
    assert roles(r) == {"us-a": (3, "Primary"), "eu-a": (1, "Replica"), "ap-a": (1, "Replica")}
    assert r.topology is not None and r.topology["primaryChosenBy"] == "current"


@pytest.mark.parametrize(("placement", "error"), [
    ({"statefulTopology": {"replicas": {"clusters": 0}}}, "greater than or equal to 1"),
    ({"statefulTopology": {"primary": {"replicas": 1}}}, "replicas"),
    ({"statefulTopology": {"replicas": {"clusters": 2, "copies": 1}}}, "Extra inputs"),
    ({"statefulTopology": {"replicas": {"clusters": "2"}}}, "valid integer"),
    ({"statefulTopology": {"replicas": {"clusters": 1}},
      "replicaScheduling": {"replicaSchedulingType": "Duplicated"}}, "remove replicaScheduling"),
    ({"statefulTopology": {"replicas": {"clusters": 1}},
      "spreadConstraints": [{"spreadByField": "region", "maxGroups": 2}]}, "remove spreadConstraints"),
])
def test_validation(placement: dict[str, object], error: str) -> None:
    with pytest.raises(ValidationError, match=error):
        Placement.model_validate(placement)


def test_a_follower_follows_the_primary_cluster(snap: Snapshot) -> None:
    from drods.scheduler.plugins.follow_up import FollowUp

    fleet(snap)
    snap.workload_placements["shop/db"] = (("ap-a", 1), ("eu-a", 1), ("us-a", 3))
    snap.workload_primaries["shop/db"] = "us-a"
    mask, _ = FollowUp().filter(analyse(task(followUp=DB)), snap, snap.ready[: snap.n].copy())
    assert [snap.names[r] for r in mask.nonzero()[0]] == ["us-a"]


def test_status_and_record_carry_the_roles() -> None:
    import json

    from drods.schedulerd.records import Decision, decode_binding, merge_status

    placed = (("eu-a", 1), ("us-a", 3), ("ap-a", 1))
    d = Decision(True, placed, "ok", {}, 1, 0.0, roles={"us-a": "Primary", "eu-a": "Replica", "ap-a": "Replica"})
    st = merge_status({}, d)
    assert st["placement"][1] == {"cluster": "us-a", "replicas": 3, "role": "Primary"}
    obj = {"metadata": {"name": "db", "generation": 1},
           "spec": {"replicas": 3, "placement": {"statefulTopology": TOPO}}, "status": st}
    rec = decode_binding("/k", json.dumps(obj).encode(), 5)
    assert rec is not None and rec.primary == "us-a" and rec.replicas == 5 and not rec.partial
    # the same clusters with the primary moved is a new placement (phase back to Scheduled)
    promoted = Decision(True, placed, "ok", {}, 1, 0.0, roles={"eu-a": "Primary", "us-a": "Replica",
                                                                "ap-a": "Replica"})
    assert merge_status({**st, "phase": "Running"}, promoted)["phase"] == "Scheduled"
    assert merge_status({**st, "phase": "Running"}, d)["phase"] == "Running"


def test_the_members_copy_is_labelled_with_its_role() -> None:
    from drods.controllers.manifests import Target, plan

    sts = {"apiVersion": "apps/v1", "kind": "StatefulSet", "metadata": {"name": "db", "namespace": "shop"},
           "spec": {"replicas": 3, "template": {"spec": {"containers": [{"name": "db", "image": "pg"}]}}}}
    plans = plan("b", "uid", sts, [Target("us-a", 3, {}, "Primary"), Target("eu-a", 1, {}, "Replica"),
                                   Target("other", 2, {})], [], [])
    main = {c: p.manifests[-1] for c, p in plans.items()}  # type: ignore[union-attr]
    assert main["us-a"]["metadata"]["labels"]["multicluster.io/stateful-role"] == "primary"
    assert main["us-a"]["spec"]["replicas"] == 3
    assert main["eu-a"]["metadata"]["labels"]["multicluster.io/stateful-role"] == "replica"
    assert "multicluster.io/stateful-role" not in (main["other"]["metadata"].get("labels") or {})
    assert plans["us-a"].hash != plan("b", "uid", sts, [Target("us-a", 3, {}, "Replica")], [], [])["us-a"].hash  # type: ignore[union-attr]


def test_the_detector_leaves_a_topology_to_the_scheduler() -> None:
    from drods.model.detection import PolicyMatch, desired_binding
    from drods.model.kinds import PROPAGATION_POLICY, TEMPLATE_KINDS

    kinds = {k.kind: k for k in TEMPLATE_KINDS}
    sts = {"metadata": {"name": "db", "namespace": "shop"}, "spec": {"replicas": 3, "template": {"spec": {}}}}
    whole = PolicyMatch(1, 3, 0, 1, "p", PROPAGATION_POLICY, {}, (), ())
    # without a topology a StatefulSet is kept on one cluster
    assert desired_binding(kinds["StatefulSet"], sts, whole)["spec"]["placement"]["spreadConstraints"] == [
        {"spreadByField": "cluster", "maxGroups": 1}]
    topo = PolicyMatch(1, 3, 0, 1, "p", PROPAGATION_POLICY, {"statefulTopology": TOPO}, (), ())
    spec = desired_binding(kinds["StatefulSet"], sts, topo)["spec"]
    assert spec["placement"] == {"statefulTopology": TOPO}
    BindingSpec.model_validate(spec)  # a valid Binding: no spread constraint beside the topology
    # a kind without replicas with a topology: placed by it, not duplicated
    ing = {"metadata": {"name": "db", "namespace": "shop"}, "spec": {}}
    spec = desired_binding(kinds["Ingress"], ing, topo)["spec"]
    assert spec["placement"] == {"statefulTopology": TOPO}


def test_scaled_to_zero_runs_nowhere(snap: Snapshot, sched: Scheduler) -> None:
    fleet(snap)
    spec = stateful()
    spec.replicas = 0
    r = sched.schedule(spec, snap, name="db")
    assert r.phase == "Scheduled" and r.pairs == () and r.roles == {}
