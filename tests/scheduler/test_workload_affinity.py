"""Karmada 1.17 workloadAffinity: a group's workloads share clusters (affinity) or keep apart
(anti-affinity); groups are per namespace and the group's first workload places freely."""

from __future__ import annotations

import numpy as np

from drods.model.binding import BindingAffinityGroups, ObjectReference
from drods.model.detection import affinity_groups
from drods.scheduler import Profile, Scheduler, Snapshot, Task
from drods.scheduler.plugins.workload_affinity import WorkloadAffinity
from drods.scheduler.task import analyse
from tests.scheduler.conftest import add, status, task


def ref(name: str, ns: str = "shop") -> ObjectReference:
    return ObjectReference(apiVersion="apps/v1", kind="Deployment", namespace=ns, name=name)


def grouped(name: str, ns: str = "shop", *, affinity: str | None = None, anti: str | None = None,
            replicas: int = 1) -> Task:
    spec = task(replicas=replicas, resource=ref(name, ns),
                affinityGroups=BindingAffinityGroups(affinityGroup=affinity, antiAffinityGroup=anti))
    return Task(spec, name=f"deployment-{ns}-{name}", workload=f"{ns}/{name}")


def test_the_detector_groups_by_the_templates_label() -> None:
    rules = {"affinity": {"groupByLabelKey": "app.group"}, "antiAffinity": {"groupByLabelKey": "ha"}}
    assert affinity_groups(rules, {"app.group": "front", "ha": "x"}) == \
        {"affinityGroup": "app.group=front", "antiAffinityGroup": "ha=x"}
    assert affinity_groups(rules, {"other": "1"}) == {}  # no label: in no group
    assert affinity_groups(None, {"app.group": "front"}) == {}


def test_filter_masks_the_clusters_of_placed_peers(snap: Snapshot) -> None:
    for c in ("a", "b", "c"):
        add(snap, c)
    plugin = WorkloadAffinity()
    everyone = np.ones(3, dtype=bool)
    info = analyse(grouped("web", affinity="app.group=front"))
    assert info.affinity_group == "shop/app.group=front"
    # the group's first workload: nothing placed yet, no constraint
    snap.workload_groups.set("shop/web", ["shop/app.group=front"])
    snap.workload_groups.set("shop/api", ["shop/app.group=front"])
    assert plugin.filter(info, snap, everyone) == (everyone, [])
    snap.workload_placements["shop/api"] = (("b", 2),)
    mask, rej = plugin.filter(info, snap, everyone)
    assert mask.tolist() == [False, True, False]
    assert rej[0].reason == "workload affinity app.group=front: none of shop/api runs here"
    anti = analyse(grouped("web", anti="app.group=front"))
    mask, rej = plugin.filter(anti, snap, everyone)
    assert mask.tolist() == [True, False, True]
    assert rej[0].reason == "workload anti-affinity app.group=front: shop/api runs here"
    # a peer that leaves the group stops constraining
    snap.workload_groups.set("shop/api", [])
    assert plugin.filter(info, snap, everyone) == (everyone, [])


def test_affinity_co_locates_and_anti_affinity_separates(snap: Snapshot) -> None:
    add(snap, "busy", st=status(cpu_used=60))
    add(snap, "idle", st=status(cpu_used=0))
    sched = Scheduler(Profile.default(), rng_seed=1)
    snap.workload_groups.set("shop/api", ["shop/app.group=front"])
    snap.workload_groups.set("shop/web", ["shop/app.group=front"])
    snap.workload_placements["shop/api"] = (("busy", 1),)
    r = sched.schedule(grouped("web", affinity="app.group=front", replicas=3), snap)
    assert r.placement_dict() == {"busy": 3}
    assert r.reasons["idle"].startswith("workload affinity app.group=front")
    snap.workload_placements["shop/api"] = (("idle", 1),)
    r = sched.schedule(grouped("web", anti="app.group=front", replicas=3), snap)
    assert r.placement_dict() == {"busy": 3}
    # the same label in another namespace is another group
    r = sched.schedule(grouped("web", "other", anti="app.group=front", replicas=2), snap)
    assert r.phase == "Scheduled" and "idle" in r.placement_dict()


def test_anti_affinity_with_every_cluster_taken_is_unschedulable(snap: Snapshot) -> None:
    add(snap, "a")
    snap.workload_groups.set("shop/api", ["shop/ha=db"])
    snap.workload_groups.set("shop/web", ["shop/ha=db"])
    snap.workload_placements["shop/api"] = (("a", 1),)
    r = Scheduler(Profile.default(), rng_seed=1).schedule(grouped("web", anti="ha=db"), snap)
    assert r.phase == "Unschedulable" and "workload anti-affinity ha=db" in r.message
