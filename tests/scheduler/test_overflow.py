"""overflowAffinities (F6, Karmada 1.18): tier shares, scale-up and scale-down order, first-tier-wins,
the water-level limit in every tier, and the Karmada policy API accepting the field."""

from __future__ import annotations

from typing import Any

import pytest

from drods.model.binding import BindingSpec, TargetCluster
from drods.model.karmada import KarmadaPropagationSpec
from drods.scheduler import Profile, Scheduler, Snapshot, Task
from drods.scheduler.tiers import tier_totals
from tests.scheduler.conftest import add, status

DIVIDED = {"replicaSchedulingType": "Divided", "replicaDivisionPreference": "Weighted"}


def test_tier_totals_golden() -> None:
    # from scratch: 4 + 6 fill the first two tiers, 2 go to the third
    assert tier_totals(12, [4.0, 6.0, 9.0], [0, 0, 0], regroup=True) == [4, 6, 2]
    # scale-down 12 → 7 from 4/6/2: the last tier empties first, then the second shrinks
    assert tier_totals(7, [4.0, 6.0, 9.0], [4, 6, 2], regroup=True) == [4, 3, 0]
    # scale-up with room back in the primary: regroup (Karmada) refills the primary first ...
    assert tier_totals(8, [6.0, 6.0], [2, 5], regroup=True) == [6, 2]
    # ... without regroup (affinity concentration) held replicas stay and the new one goes first
    assert tier_totals(8, [6.0, 6.0], [2, 5], regroup=False) == [3, 5]
    # nothing fits anywhere: what fits
    assert tier_totals(10, [2.0, 2.0], [0, 0], regroup=True) == [2, 2]
    # an unchanged count moves nothing even when the primary has room
    assert tier_totals(7, [9.0, 9.0], [2, 5], regroup=True) == [2, 5]


def spec(replicas: int, **placement: Any) -> BindingSpec:
    pl = {"replicaScheduling": DIVIDED,
          "clusterAffinities": [{"affinityName": "idc", "labelSelector": {"matchLabels": {"site": "idc"}},
                                 "overflowAffinities": [{"affinityName": "cloud-a", "clusterNames": ["a1", "idc2"]},
                                                        {"affinityName": "cloud-b", "clusterNames": ["b1"]}]}],
          **placement}
    return BindingSpec.model_validate({"replicas": replicas, "resources": {"cpu": 1, "memory": 1}, "placement": pl})


@pytest.fixture
def fleet() -> Snapshot:
    snap = Snapshot()
    # at 85 % of 100 cpu with 80 used, 5 replicas of 1 cpu fit on each IDC cluster
    add(snap, "idc1", labels={"site": "idc"}, st=status(cpu=100, cpu_used=80))
    add(snap, "idc2", labels={"site": "idc"}, st=status(cpu=100, cpu_used=80))
    add(snap, "a1", st=status(cpu=100, cpu_used=75))    # 10 fit
    add(snap, "b1", st=status(cpu=1000, cpu_used=0))    # plenty, and the best scored
    add(snap, "elsewhere", st=status(cpu=1000))          # in no group
    return snap


def run(snap: Snapshot, replicas: int, current: dict[str, int] | None = None) -> dict[str, int]:
    sched = Scheduler(Profile.default(), rng_seed=1)
    cur = [TargetCluster(cluster=c, replicas=k) for c, k in (current or {}).items()]
    return sched.schedule(Task(spec(replicas), name="ns/app", current=cur), snap).placement_dict()


def test_primary_first_then_overflow_in_order(fleet: Snapshot) -> None:
    # idc2 is named by cloud-a too: it belongs to the first tier naming it (idc)
    assert run(fleet, 8) == {"idc1": 4, "idc2": 4}
    assert run(fleet, 10) == {"idc1": 5, "idc2": 5}
    assert run(fleet, 14) == {"a1": 4, "idc1": 5, "idc2": 5}
    assert run(fleet, 25) == {"a1": 10, "b1": 5, "idc1": 5, "idc2": 5}


def test_scale_down_shrinks_the_overflow_first(fleet: Snapshot) -> None:
    now = {"a1": 10, "b1": 5, "idc1": 5, "idc2": 5}
    for name, k in now.items():  # what those replicas hold is already in the clusters' use
        fleet.assume([TargetCluster(cluster=name, replicas=k)], spec(1).resources, key=f"ns/app-{name}")
    assert run(fleet, 18, now) == {"a1": 8, "idc1": 5, "idc2": 5}
    down = run(fleet, 9, now)
    assert set(down) == {"idc1", "idc2"} and sum(down.values()) == 9  # which IDC cluster loses one: a tie


def test_karmada_policy_api_accepts_overflow() -> None:
    pp = KarmadaPropagationSpec.model_validate({
        "resourceSelectors": [{"apiVersion": "apps/v1", "kind": "Deployment", "name": "nginx"}],
        "placement": {"clusterAffinities": [{"affinityName": "on-prem", "clusterNames": ["cluster1"],
                                             "overflowAffinities": [{"affinityName": "public-cloud",
                                                                     "clusterNames": ["cluster2", "cluster3"]}]}],
                      "replicaScheduling": {**DIVIDED, "weightPreference": {"dynamicWeight": "AvailableReplicas"}}}})
    assert pp.placement is not None
    assert pp.placement.clusterAffinities[0].overflowAffinities[0].clusterNames == ["cluster2", "cluster3"]
    with pytest.raises(ValueError, match="at most 32"):
        spec(1, clusterAffinities=[{"affinityName": "x", "clusterNames": ["a"],
                                    "overflowAffinities": [{"affinityName": "y" * 33, "clusterNames": ["b"]}]}])
