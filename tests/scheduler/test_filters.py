"""Every filter plugin and the reason it gives, through the full scheduling cycle."""

from __future__ import annotations

import numpy as np

from drods.model.binding import NetworkRequirements, ReplicaRequirements
from drods.model.cluster import NetworkProfile, Taint
from drods.model.placement import (
    ClusterAffinity,
    ClusterAffinityTerm,
    FieldSelector,
    FieldSelectorRequirement,
    Placement,
    SpreadConstraint,
    Toleration,
)
from drods.model.selector import LabelSelector, LabelSelectorRequirement
from drods.scheduler import Scheduler, Snapshot, Task
from drods.scheduler.framework import ScheduleResult
from drods.scheduler.interface import Rejection
from drods.schedulerd.history import decision_record
from tests.scheduler.conftest import add, status, task


def test_readiness_reasons(snap: Snapshot, sched: Scheduler) -> None:
    add(snap, "down", ready=False)
    add(snap, "nostatus", st={})
    add(snap, "cordoned", unschedulable=True)
    add(snap, "ok")
    r = sched.schedule(task(), snap)
    assert r.placement_dict() == {"ok": 1}
    assert r.reasons == {"down": "cluster not ready", "nostatus": "no resource status reported",
                         "cordoned": "cluster cordoned (unschedulable)"}


def test_cluster_affinity_names_exclude_labels_fields(snap: Snapshot, sched: Scheduler) -> None:
    add(snap, "a", labels={"env": "prod"}, provider="aws", region="us-east")
    add(snap, "b", labels={"env": "prod"}, provider="gcp", region="us-east")
    add(snap, "c", labels={"env": "dev"}, provider="aws", region="eu")
    add(snap, "d", labels={"env": "prod"}, provider="aws", region="eu")
    add(snap, "e", labels={"env": "prod"}, provider="aws", region="ap")
    aff = ClusterAffinity(
        clusterNames=["a", "b", "c", "d"], exclude=["d"],
        labelSelector=LabelSelector(matchLabels={"env": "prod"}),
        fieldSelector=FieldSelector(matchExpressions=[
            FieldSelectorRequirement(key="provider", operator="In", values=["aws"])]),
    )
    r = sched.schedule(task(placement=Placement(clusterAffinity=aff)), snap)
    assert r.placement_dict() == {"a": 1}
    assert r.reasons == {
        "e": "not in clusterAffinity.clusterNames",
        "d": "excluded by clusterAffinity.exclude",
        "c": "cluster labels do not match clusterAffinity.labelSelector",
        "b": "provider not in [aws]",
    }


def test_label_selector_expressions(snap: Snapshot, sched: Scheduler) -> None:
    add(snap, "a", labels={"tier": "gold"})
    add(snap, "b", labels={"tier": "silver", "gpu": "yes"})
    add(snap, "c", labels={})
    sel = LabelSelector(matchExpressions=[LabelSelectorRequirement(key="tier", operator="NotIn", values=["gold"]),
                                          LabelSelectorRequirement(key="gpu", operator="DoesNotExist")])
    r = sched.schedule(task(placement=Placement(clusterAffinity=ClusterAffinity(labelSelector=sel))), snap)
    assert r.placement_dict() == {"c": 1}


def test_binding_shorthands_region_provider(snap: Snapshot, sched: Scheduler) -> None:
    add(snap, "a", region="us", provider="aws", city="DFW")
    add(snap, "b", region="eu", provider="aws", city="LHR")
    r = sched.schedule(task(cities=["LHR"]), snap)
    assert r.placement_dict() == {"b": 1}
    assert r.reasons == {"a": "city not in [LHR]"}


def test_affinity_groups_fall_back_in_order(snap: Snapshot, sched: Scheduler) -> None:
    add(snap, "primary", st=status(cpu=1))
    add(snap, "backup")
    pl = Placement(clusterAffinities=[
        ClusterAffinityTerm(affinityName="local", clusterNames=["primary"]),
        ClusterAffinityTerm(affinityName="cloud", clusterNames=["backup"]),
    ])
    r = sched.schedule(task(cpu=4, placement=pl), snap)
    assert r.affinity_term == "cloud"
    assert r.placement_dict() == {"backup": 1}
    # first group feasible → never falls through
    r = sched.schedule(task(cpu=0.5, placement=pl), snap)
    assert r.affinity_term == "local" and r.placement_dict() == {"primary": 1}
    # nothing feasible anywhere → unschedulable and says which groups were tried
    r = sched.schedule(task(cpu=500, placement=pl), snap)
    assert r.phase == "Unschedulable"
    assert "affinity groups [local, cloud]" in r.message


def test_taint_toleration(snap: Snapshot, sched: Scheduler) -> None:
    add(snap, "ns", taints=[Taint(key="dedicated", value="ml", effect="NoSchedule")])
    add(snap, "ne", taints=[Taint(key="failing", effect="NoExecute")])
    add(snap, "pref", taints=[Taint(key="soft", effect="PreferNoSchedule")])
    r = sched.schedule(task(replicas=1), snap)
    assert r.placement_dict() == {"pref": 1}
    assert r.reasons == {"ns": "untolerated taint dedicated=ml:NoSchedule", "ne": "untolerated taint failing:NoExecute"}
    tol = [Toleration(key="dedicated", operator="Equal", value="ml", effect="NoSchedule"),
           Toleration(key="failing", operator="Exists")]
    r = sched.schedule(task(replicas=3, placement=Placement(clusterTolerations=tol)), snap)
    assert r.feasible == 3
    wrong = [Toleration(key="dedicated", operator="Equal", value="web")]
    r = sched.schedule(task(placement=Placement(clusterTolerations=wrong)), snap)
    assert "ns" in r.reasons
    everything = [Toleration(operator="Exists")]
    r = sched.schedule(task(placement=Placement(clusterTolerations=everything)), snap)
    assert r.feasible == 3


def test_capability_gpu_model_storage_tier(snap: Snapshot, sched: Scheduler) -> None:
    add(snap, "a100", capabilities=["gpu", "tls-encryption"], gpuModels=["A100"], storageTiers=["ssd"],
        st=status(gpu=8))
    add(snap, "t4", capabilities=["gpu"], gpuModels=["T4"], storageTiers=["ssd"], st=status(gpu=8))
    add(snap, "cpu", capabilities=["tls-encryption"], storageTiers=["hdd"])
    spec = task(resources=ReplicaRequirements(cpu=1, memory=1, gpu=1, gpuModel="A100", storageTier="ssd"),
                capabilities=["tls-encryption"])
    r = sched.schedule(spec, snap)
    assert r.placement_dict() == {"a100": 1}
    assert r.reasons == {"t4": "missing capability tls-encryption", "cpu": "no GPU model A100"}
    assert r.analysis == {"storageTier": "ssd", "networkIdentifier": None, "compute": "gpu:A100"}


def test_network_fit(snap: Snapshot, sched: Scheduler) -> None:
    add(snap, "near", network=NetworkProfile(bandwidthMbps=1000, latencyMs={"edge-dfw": 5}))
    add(snap, "far", network=NetworkProfile(bandwidthMbps=1000, latencyMs={"edge-dfw": 80}))
    add(snap, "thin", network=NetworkProfile(bandwidthMbps=10, latencyMs={"edge-dfw": 1}))
    add(snap, "unknown")
    net = NetworkRequirements(identifier="edge-dfw", maxLatencyMs=20, minBandwidthMbps=100)
    r = sched.schedule(task(network=net), snap)
    assert r.placement_dict() == {"near": 1}
    assert r.reasons == {"unknown": "bandwidth unknown", "thin": "bandwidth below 100 Mbps",
                         "far": "latency to edge-dfw above 20 ms (80 ms)"}


def test_resource_fit_reasons(snap: Snapshot, sched: Scheduler) -> None:
    add(snap, "small", st=status(cpu=2, mem=400))
    add(snap, "lowmem", st=status(cpu=100, mem=1))
    add(snap, "nogpu", st=status())
    add(snap, "fits", st=status(gpu=2))
    r = sched.schedule(task(resources=ReplicaRequirements(cpu=4, memory=8, gpu=1)), snap)
    assert r.placement_dict() == {"fits": 1}
    assert r.reasons == {
        "small": "insufficient cpu: need 4 cores, free 2 cores",
        "lowmem": "insufficient memory: need 8 GiB, free 1 GiB",
        "nogpu": "insufficient gpu: need 1, free 0",
    }


def test_largest_node_total_fits_but_no_node_does(snap: Snapshot, sched: Scheduler) -> None:
    # 64 free cores in total, but spread over nodes of at most 2 free cores
    add(snap, "fragmented", st=status(cpu=64, mem=256, largest={"cpu": 2, "memory": 8}))
    r = sched.schedule(task(replicas=1, cpu=4, mem=4), snap)
    assert r.phase == "Unschedulable"
    assert r.message == "0/1 clusters available: 1 no node fits 1 replica."
    assert r.reasons["fragmented"].startswith("no node fits 1 replica: largest free node has cpu 2/4")
    # never placed, whatever the division or the count
    add(snap, "whole", st=status(cpu=8, mem=64))
    for n in (1, 5, 50):
        r = sched.schedule(task(replicas=n, cpu=4, mem=4), snap)
        assert "fragmented" not in r.placement_dict()


def test_water_level_limit(snap: Snapshot, sched: Scheduler) -> None:
    add(snap, "hot", st=status(cpu_used=90))
    add(snap, "edge", st=status(cpu_used=84))
    add(snap, "strict", st=status(cpu_used=60), waterLevelLimit=0.5)
    add(snap, "cool", st=status(cpu_used=10))
    r = sched.schedule(task(cpu=2), snap)
    assert r.placement_dict() == {"cool": 1}
    assert r.reasons == {
        "hot": "water level above 85% (water level 90%)",
        "strict": "water level above 50% (water level 60%)",
        "edge": "1 replica would raise water level above 85% (water level 86%)",
    }
    # a policy limit lower than the cluster's wins too
    r = sched.schedule(task(cpu=2, placement=Placement(waterLevelLimit=0.05)), snap)
    assert r.phase == "Unschedulable"


def test_water_level_limit_caps_division(snap: Snapshot, sched: Scheduler) -> None:
    add(snap, "a", st=status(cpu=100, mem=1000, cpu_used=80))  # 5 cores below 85%
    r = sched.schedule(task(replicas=10, cpu=1, mem=1), snap)
    assert r.placed == 5 and r.partial
    assert "placed 5/10" in r.message


def test_spread_constraint_min_groups_unsatisfiable(snap: Snapshot, sched: Scheduler) -> None:
    add(snap, "a", region="us")
    add(snap, "b", region="us")
    add(snap, "c", region="eu")
    add(snap, "noregion")
    pl = Placement(spreadConstraints=[SpreadConstraint(spreadByField="region", minGroups=3)])
    r = sched.schedule(task(replicas=3, placement=pl), snap)
    assert r.phase == "Unschedulable"
    assert r.reasons["noregion"] == "no region set (spread by region)"
    assert r.reasons["a"] == "spread by region: 2 feasible groups < minGroups 3"
    assert r.message == ("0/4 clusters available: 3 spread by region: 2 feasible groups < minGroups 3, "
                         "1 no region set (spread by region).")


def test_spread_constraint_selects_groups(snap: Snapshot, sched: Scheduler) -> None:
    for i, reg in enumerate(["us", "us", "eu", "eu", "ap"]):
        add(snap, f"c{i}", region=reg)
    pl = Placement(spreadConstraints=[SpreadConstraint(spreadByField="region", minGroups=2, maxGroups=2)])
    r = sched.schedule(task(replicas=2, placement=pl), snap)
    regions = {snap.row_spec(c).region for c in r.placement_dict()}  # type: ignore[union-attr]
    assert len(regions) == 2
    pl = Placement(spreadConstraints=[SpreadConstraint(spreadByField="cluster", maxGroups=2)])
    r = sched.schedule(task(replicas=10, placement=pl), snap)
    assert len(r.placement) <= 2 and r.placed == 10


def test_conflicting_constraints_unschedulable_with_summary(snap: Snapshot, sched: Scheduler) -> None:
    add(snap, "a", region="us", st=status(cpu_used=90))
    add(snap, "b", region="us", st=status(cpu_used=95))
    add(snap, "c", region="us", st=status(cpu_used=88))
    add(snap, "d", region="eu", st=status(cpu=64, largest={"cpu": 1, "memory": 64}))
    add(snap, "e", region="eu", st=status(cpu=64, largest={"cpu": 1, "memory": 64}))
    r = sched.schedule(task(cpu=2), snap)
    assert r.phase == "Unschedulable"
    assert r.message == "0/5 clusters available: 3 water level above 85%, 2 no node fits 1 replica."
    assert set(r.reasons) == {"a", "b", "c", "d", "e"}
    # affinity to eu plus a GPU capability nobody has: each cluster has its own first reason
    spec = task(regions=["eu"], capabilities=["gpu"])
    r = sched.schedule(spec, snap)
    assert r.reason_counts() == {"region not in [eu]": 3, "missing capability gpu": 2}


def test_explicit_targets_validated(snap: Snapshot, sched: Scheduler) -> None:
    add(snap, "gcp-production", st=status(cpu=4))
    add(snap, "aws-us-east")
    r = sched.schedule(task(cpu=8, targetClusters=["gcp-production", "azure-europe"]), snap)
    assert r.phase == "Unschedulable"
    assert r.reasons["gcp-production"] == "insufficient cpu: need 8 cores, free 4 cores"
    assert r.reasons["aws-us-east"] == "not in targetClusters"
    assert r.reasons["azure-europe"] == "target cluster not registered"
    assert "Target clusters not registered: azure-europe" in r.message
    assert "gcp-production: insufficient cpu: need 8 cores, free 4 cores" in r.message
    # fits 3 replicas of 1 core below the 85% water level on 4 cores: partial, and says so
    r = sched.schedule(task(cpu=1, replicas=4, targetClusters=["gcp-production"]), snap)
    assert r.placement_dict() == {"gcp-production": 3} and r.partial
    r = sched.schedule(task(cpu=0.5, replicas=4, targetClusters=["gcp-production"]), snap)
    assert r.placement_dict() == {"gcp-production": 4}


def test_existing_replicas_kept_when_cluster_is_full(snap: Snapshot, sched: Scheduler) -> None:
    add(snap, "full", st=status(cpu_used=99))
    add(snap, "free")
    from drods.model.binding import TargetCluster

    cur = [TargetCluster(cluster="full", replicas=3)]
    r = sched.schedule(Task(task(replicas=5), name="w", current=cur), snap)
    assert r.placement_dict()["full"] == 3  # kept, not grown
    assert r.placement_dict()["free"] == 2


def test_a_reasons_sample_takes_a_few_clusters_of_every_verdict(snap: Snapshot, sched: Scheduler) -> None:
    for i in range(30):
        add(snap, f"down{i:02d}", ready=False)
    for i in range(4):
        add(snap, f"cordoned{i}", unschedulable=True)
    add(snap, "nostatus", st={})
    r = sched.schedule(task(), snap)
    assert r.phase == "Unschedulable"
    shown, total = r.reasons_sample(8, per_reason=3)
    assert total == 35
    assert shown == {"down00": "cluster not ready", "down01": "cluster not ready", "down02": "cluster not ready",
                     "nostatus": "no resource status reported",
                     "cordoned0": "cluster cordoned (unschedulable)", "cordoned1": "cluster cordoned (unschedulable)",
                     "cordoned2": "cluster cordoned (unschedulable)"}
    shown, _ = r.reasons_sample(5, per_reason=3)
    assert list(shown) == ["down00", "down01", "down02", "nostatus", "cordoned0"]
    shown, _ = r.reasons_sample(8)  # without a per-verdict bound the first verdict takes it all
    assert list(shown) == [f"down{i:02d}" for i in range(8)]
    assert len(r.reasons) == 35  # the whole explanation is still there


def test_a_history_entry_names_a_rare_verdict_next_to_a_common_one(snap: Snapshot, sched: Scheduler) -> None:
    for i in range(14):
        add(snap, f"down{i:02d}", ready=False)
    add(snap, "cordoned", unschedulable=True)
    r = sched.schedule(task(), snap)
    entry = decision_record(r, binding="b", generation=1, schedule_type="FirstSchedule", ts=0.0,
                            scheduler="s", profile="default", base_weights={})
    f = entry["filters"]
    assert f["reasonCounts"] == {"cluster not ready": 14, "cluster cordoned (unschedulable)": 1}
    assert f["reasons"]["cordoned"] == "cluster cordoned (unschedulable)"
    assert sum(why == "cluster not ready" for why in f["reasons"].values()) == 10
    assert f["reasonsOmitted"] == 4


def test_a_decision_names_its_clusters_as_they_were_after_one_is_removed(snap: Snapshot, sched: Scheduler) -> None:
    add(snap, "down-a", ready=False)
    add(snap, "down-b", ready=False)
    add(snap, "ok")
    add(snap, "last", ready=False)
    r = sched.schedule(task(), snap)
    snap.remove_cluster("down-a")  # the last row moves into its place
    snap.remove_cluster("ok")
    add(snap, "newcomer", ready=False)
    assert r.reasons_sample(10, per_reason=5)[0] == {"down-a": "cluster not ready", "down-b": "cluster not ready",
                                                     "last": "cluster not ready"}
    assert set(r.reasons) == {"down-a", "down-b", "last"}
    assert sched.schedule(task(), snap).reasons == {c: "cluster not ready" for c in ("down-b", "last", "newcomer")}


def test_a_second_reasons_sample_renders_no_reason_twice(snap: Snapshot, sched: Scheduler) -> None:
    for i in range(12):
        add(snap, f"full{i:02d}", st=status(cpu=16, cpu_used=16))
    add(snap, "ok")
    r = sched.schedule(task(), snap)
    rendered: list[int] = []
    rej = r._rejections[0]
    detail = rej.detail
    assert detail is not None
    rej.detail = lambda k: (rendered.append(k), detail(k))[1]
    status_sample, _ = r.reasons_sample(20, per_reason=5)
    history_sample, total = r.reasons_sample(50, per_reason=10)
    assert total == 12 and len(status_sample) == 5 and len(history_sample) == 10
    assert all(history_sample[c] == why for c, why in status_sample.items())
    assert sorted(rendered) == list(range(10))  # the status's five, then five more: none twice


def test_a_cluster_named_by_two_verdicts_keeps_the_first_in_a_reasons_sample() -> None:
    names = np.array(["a", "b", "c", "d"], dtype=object)
    r = ScheduleResult(name="w", phase="Unschedulable", requested=1, placed=0, message="", clusters=4, feasible=0,
                       division="Duplicated", _names=names,
                       _rejections=[Rejection("first", np.array([1, 2])), Rejection("second", np.array([2, 3, 0]))])
    shown, total = r.reasons_sample(10, per_reason=10)
    assert list(shown.items()) == [("b", "first"), ("c", "first"), ("d", "second"), ("a", "second")]
    assert total == 5
    assert r.reasons == shown


def test_a_binding_without_replicas_is_not_barred_by_the_water_level(snap: Snapshot, sched: Scheduler) -> None:
    """A ConfigMap's or a Service's Binding runs nothing: a cluster above its water-level limit still
    gets it (Karmada places it wherever the policy says); a workload's replica does not."""
    from drods.model.placement import Placement

    add(snap, "busy", st=status(cpu_used=95.0))
    add(snap, "calm", st=status(cpu_used=10.0))
    dup = Placement.model_validate({"replicaScheduling": {"replicaSchedulingType": "Duplicated"}})
    res = sched.schedule(task(replicas=1, resources=ReplicaRequirements(), placement=dup), snap, name="cm")
    assert res.phase == "Scheduled" and {c for c, _ in res.pairs} == {"busy", "calm"}, (res.pairs, res.reasons)
    res = sched.schedule(task(replicas=1, cpu=1.0, placement=dup), snap, name="web")
    assert {c for c, _ in res.pairs} == {"calm"} and "water level above" in res.reasons["busy"], res.reasons


def test_an_affinity_naming_a_cluster_not_registered_says_so(snap: Snapshot, sched: Scheduler) -> None:
    """A typo in clusterAffinity.clusterNames places on the others and names the one not there (it was
    only "not in clusterAffinity.clusterNames" for every other cluster)."""
    add(snap, "gcp-production")
    add(snap, "aws-us-east")
    aff = ClusterAffinity(clusterNames=["gcp-production", "gcp-prodution"])
    r = sched.schedule(task(replicas=2, placement=Placement(clusterAffinity=aff)), snap)
    assert r.placement_dict() == {"gcp-production": 2}
    assert r.message.endswith("; clusterAffinity.clusterNames not registered: gcp-prodution")
    assert r.reasons["gcp-prodution"] == "named in clusterAffinity.clusterNames, not registered"
    r = sched.schedule(task(placement=Placement(clusterAffinity=ClusterAffinity(clusterNames=["gcp-prodution"]))),
                       snap)
    assert r.phase == "Unschedulable"
    assert r.message.endswith(" clusterAffinity.clusterNames not registered: gcp-prodution.")
    # named in full, nothing to say
    r = sched.schedule(task(placement=Placement(clusterAffinity=ClusterAffinity(clusterNames=["aws-us-east"]))),
                       snap)
    assert r.placement_dict() == {"aws-us-east": 1} and "not registered" not in r.message
