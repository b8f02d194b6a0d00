"""Follow-up (F3): a follower runs where its primary runs, else on the nearest feasible clusters."""

from __future__ import annotations

import numpy as np

from drods.model.binding import ObjectReference
from drods.model.cluster import NetworkProfile
from drods.scheduler import Profile, Scheduler, Snapshot, Task
from drods.scheduler.plugins.follow_up import FollowUp
from drods.scheduler.task import analyse
from tests.scheduler.conftest import add, status, task

DB = ObjectReference(apiVersion="apps/v1", kind="StatefulSet", namespace="shop", name="db")


def fleet(snap: Snapshot) -> None:
    add(snap, "a", region="eu", zone="eu-1")
    add(snap, "b", region="eu", zone="eu-2")
    add(snap, "c", region="us", zone="us-1", network=NetworkProfile(latencyMs={"a": 5.0}))
    add(snap, "d", region="us", zone="us-2")


def test_filter_keeps_the_primary_clusters_else_the_nearest(snap: Snapshot) -> None:
    fleet(snap)
    plugin = FollowUp()
    info = analyse(task(followUp=DB))
    assert info.follow == "shop/db"
    everyone = np.ones(4, dtype=bool)
    # primary not placed yet: no constraint
    assert plugin.filter(info, snap, everyone)[0].tolist() == [True] * 4
    snap.workload_placements["shop/db"] = (("a", 1),)
    mask, rej = plugin.filter(info, snap, everyone)
    assert mask.tolist() == [True, False, False, False] and rej[0].reason == "shop/db does not run here"
    # a dropped by an earlier filter: the nearest feasible — c (5 ms to a) beats b (same region, 10)
    mask, rej = plugin.filter(info, snap, np.array([False, True, True, True]))
    assert mask.tolist() == [False, False, True, False]
    assert rej[0].reason.startswith("farther from shop/db")
    # a task that follows nobody costs nothing
    assert plugin.filter(analyse(task()), snap, everyone) == (everyone, [])


def test_follower_lands_with_its_primary_not_on_the_emptier_cluster(snap: Snapshot) -> None:
    add(snap, "busy", st=status(cpu_used=60))
    add(snap, "idle", st=status(cpu_used=0))
    snap.workload_placements["shop/db"] = (("busy", 1),)
    r = Scheduler(Profile.default(), rng_seed=1).schedule(Task(task(replicas=3, followUp=DB), name="x"), snap)
    assert r.placement_dict() == {"busy": 3}
    assert r.reasons["idle"] == "shop/db does not run here"
