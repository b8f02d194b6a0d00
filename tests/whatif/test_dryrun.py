"""Dry-run placement (W1) as a library: the copy is private, the decision is the scheduler's."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from drods.errors import ApiError
from drods.model.binding import BindingSpec
from drods.model.cluster import ClusterSpec
from drods.scheduler.framework import Scheduler
from drods.scheduler.profile import Profile
from drods.scheduler.snapshot import Snapshot
from drods.scheduler.task import Task
from drods.schedulerd.view import ClusterFacts, LiveView
from drods.whatif.dryrun import Change, apply_changes, dry_run, workload_binding


def status(used: float) -> dict[str, Any]:
    return {"cpu": {"allocatable": 64, "used": used}, "memory": {"allocatable": 256, "used": 0}}


def live() -> tuple[Snapshot, dict[str, ClusterFacts]]:
    snap = Snapshot()
    facts = {}
    for i, name in enumerate(("a", "b", "c")):
        spec = ClusterSpec(region="eu" if i < 2 else "us")
        snap.upsert_cluster(name, {"tier": "prod"}, spec, True, status(16.0 * (i + 1)))
        facts[name] = ClusterFacts({"tier": "prod"}, spec, True, status(16.0 * (i + 1)), None)
    return snap, facts


SPEC = BindingSpec.model_validate({"replicas": 6, "resources": {"cpu": 2, "memory": 1}})


def test_same_decision_as_the_scheduler_and_the_live_state_untouched() -> None:
    snap, facts = live()
    rng = np.random.default_rng(9)
    profile = Profile.default()
    version, state = snap.version, rng.bit_generator.state
    out = dry_run(LiveView.of(snap, profile, rng, facts), SPEC, "web", now=0.0)
    assert snap.version == version and rng.bit_generator.state == state and snap.assumed_keys() == []
    real = Scheduler(profile)
    real.rng = rng
    res = real.schedule(Task(SPEC, name="web"), snap)
    assert out["placement"] == [{"cluster": t.cluster, "replicas": t.replicas} for t in res.placement]
    assert out["phase"] == "Scheduled" and out["explanation"]["result"]["placed"] == 6
    assert out["explanation"]["time"] == "1970-01-01T00:00:00.000Z" and out["explanation"]["scheduler"] == "whatif"


def test_changes_apply_to_the_copy_only() -> None:
    snap, facts = live()
    view = LiveView.of(snap, Profile.default(), np.random.default_rng(1), facts)
    apply_changes(view, [Change(cluster="a", waterLevel=0.95), Change(cluster="b", waterLevelDelta=0.5),
                         Change(cluster="c", cordon=True)])
    wl = view.snapshot.water_level
    assert wl[view.snapshot.index["a"]] == pytest.approx(0.95)
    assert wl[view.snapshot.index["b"]] == pytest.approx(0.5 + 0.5)  # 32/64 shifted by 0.5
    assert bool(view.snapshot.unschedulable[view.snapshot.index["c"]])
    assert snap.water_level.tolist() == pytest.approx([0.25, 0.5, 0.75]) and not snap.unschedulable[:3].any()
    assert facts["c"].spec.unschedulable is False
    out = dry_run(view, SPEC, "web")
    assert out["phase"] == "Unschedulable" and out["placement"] == []


@pytest.mark.parametrize("change, field", [
    (Change(cluster="zz", down=True), "changes[0].cluster"),
    (Change(addCluster={"name": "a"}), "changes[0].addCluster.name"),
    (Change(addCluster={"name": "n", "waterLevelLimit": 3}), "changes[0].addCluster.waterLevelLimit"),
    (Change(profile={"scores": {"Nope": 1}}), "changes[0].profile"),
])
def test_bad_changes_are_422_with_the_field(change: Change, field: str) -> None:
    snap, facts = live()
    with pytest.raises(ApiError) as e:
        apply_changes(LiveView.of(snap, Profile.default(), np.random.default_rng(1), facts), [change])
    assert e.value.status == 422 and e.value.details["fields"][0]["field"] == field


def test_a_change_has_exactly_one_kind() -> None:
    for bad in ({"cluster": "a"}, {"cluster": "a", "down": True, "cordon": True}, {"down": True},
                {"cluster": "a", "profile": {}}):
        with pytest.raises(ValueError):
            Change.model_validate(bad)


def test_workload_binding_is_the_detectors() -> None:
    deploy = {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "shop", "namespace": "ns"},
              "spec": {"replicas": 4, "template": {"spec": {"containers": [
                  {"name": "c", "resources": {"requests": {"cpu": "250m", "memory": "512Mi"}}},
                  {"name": "d", "resources": {"limits": {"cpu": "1"}}}]}}}}
    name, spec = workload_binding(deploy, {"placement": {"clusterAffinity": {"clusterNames": ["a"]}}})
    assert name == "deployment-ns-shop" and spec.replicas == 4
    assert spec.resources.cpu == pytest.approx(1.25) and spec.resources.memory == pytest.approx(0.5)
    assert spec.placement.clusterAffinity is not None and spec.placement.clusterAffinity.clusterNames == ["a"]
    stored = [{"kind": "PropagationPolicy", "metadata": {"name": "other"},
               "spec": {"resourceSelectors": [{"apiVersion": "apps/v1", "kind": "Deployment", "name": "x"}]}},
              {"kind": "PropagationPolicy", "metadata": {"name": "mine"},
               "spec": {"resourceSelectors": [{"apiVersion": "apps/v1", "kind": "Deployment", "name": "shop"}],
                        "placement": {"clusterAffinity": {"clusterNames": ["b"]}}}}]
    _, spec = workload_binding(deploy, None, stored)
    assert spec.placement.clusterAffinity is not None and spec.placement.clusterAffinity.clusterNames == ["b"]
    with pytest.raises(ApiError) as e:
        workload_binding(deploy, None, stored[:1])
    assert e.value.code == "NO_MATCHING_POLICY"
    # a bad policy names each bad field, as a write of it would (it said only "policy: not a valid …")
    karmada = {"apiVersion": "policy.karmada.io/v1alpha1", "kind": "PropagationPolicy",
               "metadata": {"name": "bad", "namespace": "ns"},
               "spec": {"resourceSelectors": [{"apiVersion": "apps/v1", "kind": "Deployment", "name": "shop"}],
                        "placement": {"replicaScheduling": {"replicaSchedulingType": "Halved"}}, "colour": "red"}}
    with pytest.raises(ApiError) as e:
        workload_binding(deploy, karmada)
    fields = {f["field"] for f in (e.value.details or {})["fields"]}
    assert {"policy.spec.colour", "policy.spec.placement.replicaScheduling.replicaSchedulingType"} <= fields, fields


def test_a_binding_not_stored_yet_is_decided_with_its_workloads_traffic_peers() -> None:
    """The what-if of a new Binding for ``shop/web`` weighs the traffic to ``shop/db`` (placed on c, the
    busiest), as the real decision of that Binding does once written."""
    snap, facts = live()
    snap.traffic["shop/web"] = {"shop/db": 5e6}
    snap.workload_placements["shop/db"] = (("c", 1),)
    spec = BindingSpec.model_validate({"replicas": 1, "resources": {"cpu": 1, "memory": 1}, "resource": {
        "apiVersion": "apps/v1", "kind": "Deployment", "namespace": "shop", "name": "web"}})
    out = dry_run(LiveView.of(snap, Profile.default(), np.random.default_rng(3), facts), spec, "web2")
    assert "TrafficAffinity" in out["explanation"]["scores"], out["explanation"]["scores"]
    assert out["placement"] == [{"cluster": "c", "replicas": 1}]


def test_a_placed_binding_whose_new_decision_places_nothing_keeps_its_placement() -> None:
    """As the scheduler writes it: an Unschedulable decision keeps what runs. The what-if answered an empty
    placement, as if every replica were about to go (walkthrough AC: a policy naming only absent clusters)."""
    snap, facts = live()
    view = LiveView.of(snap, Profile.default(), np.random.default_rng(3), facts, current={"web": {"a": 2, "b": 1}})
    spec = BindingSpec.model_validate({"replicas": 3, "resources": {"cpu": 1, "memory": 1},
                                       "placement": {"clusterAffinity": {"clusterNames": ["nosuch"]}}})
    out = dry_run(view, spec, "web")
    assert out["phase"] == "Unschedulable" and out["placementKept"] is True
    assert out["placement"] == [{"cluster": "a", "replicas": 2}, {"cluster": "b", "replicas": 1}]
    first = dry_run(view, spec, "new")  # nothing runs yet: nothing is kept
    assert first["placement"] == [] and "placementKept" not in first
