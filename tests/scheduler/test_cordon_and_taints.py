"""Cordon, NoSchedule, NoExecute and tolerationSeconds on clusters a workload already runs on.

Karmada's TaintToleration filter passes a cluster the binding is already scheduled on: NoSchedule
(and DRO-DS's cordon) keeps new placements off and moves nothing; NoExecute evicts, and a
toleration with ``tolerationSeconds`` stops tolerating at ``timeAdded + tolerationSeconds``.
"""

from __future__ import annotations

from typing import Any

import pytest

from drods.model.app_failover import GracefulEvictionTask
from drods.model.binding import TargetCluster, placeable
from drods.model.cluster import Taint
from drods.model.placement import (
    ClusterAffinity,
    Placement,
    ReplicaScheduling,
    StaticClusterWeight,
    Toleration,
    WeightPreference,
)
from drods.scheduler import Scheduler, Snapshot, Task
from tests.scheduler.conftest import add, task

FOUR = ("m1", "m2", "m3", "m4")
T0 = 1_700_000_000.0  # 2023-11-14T22:13:20Z
T0_TEXT = "2023-11-14T22:13:20Z"


def _on(placement: dict[str, int]) -> list[TargetCluster]:
    return [TargetCluster(cluster=c, replicas=n) for c, n in placement.items()]


def _static() -> Placement:
    return Placement(replicaScheduling=ReplicaScheduling(weightPreference=WeightPreference(staticWeightList=[
        StaticClusterWeight(targetCluster=ClusterAffinity(clusterNames=[c]), weight=1) for c in FOUR])))


def _duplicated() -> Placement:
    return Placement(replicaScheduling=ReplicaScheduling(replicaSchedulingType="Duplicated"))


def _fleet(snap: Snapshot, **m1: Any) -> None:
    for c in FOUR:
        add(snap, c, **(m1 if c == "m1" else {}))


HOLDS = [pytest.param({"unschedulable": True}, id="cordoned"),
         pytest.param({"taints": [Taint(key="dedicated", value="ml", effect="NoSchedule")]}, id="NoSchedule")]


@pytest.mark.parametrize("m1", HOLDS)
@pytest.mark.parametrize("placement", [pytest.param(Placement(), id="dynamic"),
                                       pytest.param(_static(), id="static")])
def test_a_held_cluster_keeps_its_replicas_on_scale_up_and_takes_none(
        snap: Snapshot, sched: Scheduler, m1: dict[str, Any], placement: Placement) -> None:
    _fleet(snap, **m1)
    before = dict.fromkeys(FOUR, 3)
    r = sched.schedule(Task(task(replicas=16, placement=placement), name="dyn", current=_on(before)), snap)
    got = r.placement_dict()
    assert got["m1"] == 3  # kept, no more
    assert sum(got.values()) == 16
    assert all(got[c] >= 3 for c in FOUR[1:])  # a scale-up only adds


@pytest.mark.parametrize("m1", HOLDS)
def test_a_held_cluster_may_give_replicas_back_on_scale_down(
        snap: Snapshot, sched: Scheduler, m1: dict[str, Any]) -> None:
    _fleet(snap, **m1)
    r = sched.schedule(Task(task(replicas=4, placement=_static()), name="dyn",
                            current=_on(dict.fromkeys(FOUR, 3))), snap)
    assert r.placement_dict() == dict.fromkeys(FOUR, 1)  # equal weights: the held cluster too


@pytest.mark.parametrize("m1", HOLDS)
def test_a_held_cluster_keeps_a_duplicated_copy(snap: Snapshot, sched: Scheduler, m1: dict[str, Any]) -> None:
    _fleet(snap, **m1)
    r = sched.schedule(Task(task(replicas=5, placement=_duplicated()), name="dup",
                            current=_on(dict.fromkeys(FOUR, 3))), snap)
    assert r.placement_dict() == dict.fromkeys(FOUR, 5)
    fresh = sched.schedule(Task(task(replicas=5, placement=_duplicated()), name="new"), snap)
    assert "m1" not in fresh.placement_dict()  # no new copy there


@pytest.mark.parametrize("m1", HOLDS)
def test_a_held_cluster_gets_no_new_workload_nor_a_rebalanced_one(
        snap: Snapshot, sched: Scheduler, m1: dict[str, Any]) -> None:
    _fleet(snap, **m1)
    fresh = sched.schedule(Task(task(replicas=8), name="new", current=_on({"m2": 2})), snap)
    assert "m1" not in fresh.placement_dict()
    assert "m1" in fresh.reasons
    again = sched.schedule(Task(task(replicas=12), name="dyn", current=_on(dict.fromkeys(FOUR, 3)),
                                rebalance=True), snap)
    assert "m1" not in again.placement_dict()


@pytest.mark.parametrize("m1", [
    pytest.param({"taints": [Taint(key="failing", effect="NoExecute")]}, id="NoExecute"),
    pytest.param({"ready": False}, id="NotReady"),
    pytest.param({"unschedulable": True, "taints": [Taint(key="failing", effect="NoExecute")]},
                 id="cordoned+NoExecute"),
    pytest.param({"taints": [Taint(key="dedicated", effect="NoSchedule"), Taint(key="failing", effect="NoExecute")]},
                 id="NoSchedule+NoExecute"),
])
def test_an_evicting_cluster_is_not_kept(snap: Snapshot, sched: Scheduler, m1: dict[str, Any]) -> None:
    _fleet(snap, **m1)
    r = sched.schedule(Task(task(replicas=12), name="dyn", current=_on(dict.fromkeys(FOUR, 3))), snap)
    assert "m1" not in r.placement_dict()
    assert sum(r.placement_dict().values()) == 12


def test_a_cordoned_cluster_the_affinity_no_longer_selects_is_not_kept(snap: Snapshot, sched: Scheduler) -> None:
    _fleet(snap, unschedulable=True)
    pl = Placement(clusterAffinity=ClusterAffinity(clusterNames=list(FOUR[1:])))
    r = sched.schedule(Task(task(replicas=12, placement=pl), name="dyn", current=_on(dict.fromkeys(FOUR, 3))), snap)
    assert "m1" not in r.placement_dict()


def _clocked(now: list[float]) -> Snapshot:
    return Snapshot(clock=lambda: now[0])


def _tolerating(seconds: int | None, key: str = "failing") -> Placement:
    return Placement(clusterTolerations=[Toleration(key=key, operator="Exists", effect="NoExecute",
                                                    tolerationSeconds=seconds)])


def test_toleration_seconds_run_out_from_time_added(sched: Scheduler) -> None:
    now = [T0 + 10]
    snap = _clocked(now)
    _fleet(snap, taints=[Taint(key="failing", effect="NoExecute", timeAdded=T0_TEXT)])
    current = _on(dict.fromkeys(FOUR, 3))
    r = sched.schedule(Task(task(replicas=12, placement=_tolerating(25)), name="w", current=current), snap)
    assert r.placement_dict()["m1"] == 3  # still tolerated
    now[0] = T0 + 25
    r = sched.schedule(Task(task(replicas=12, placement=_tolerating(25)), name="w", current=current,
                            rebalance=True), snap)
    assert "m1" not in r.placement_dict()  # the eviction is not placed straight back
    assert r.reasons["m1"] == "toleration of taint failing:NoExecute ran out (25s)"
    forever = sched.schedule(Task(task(replicas=12, placement=_tolerating(None)), name="w", current=current), snap)
    assert forever.placement_dict()["m1"] == 3


def test_toleration_seconds_count_from_first_seen_without_time_added(sched: Scheduler) -> None:
    now = [T0]
    snap = _clocked(now)
    _fleet(snap, taints=[Taint(key="failing", effect="NoExecute")])
    now[0] = T0 + 20  # a spec change that keeps the taint keeps when it was first seen
    add(snap, "m1", labels={"changed": "yes"}, taints=[Taint(key="failing", effect="NoExecute")])
    pl = _tolerating(25)
    assert "m1" not in sched.schedule(Task(task(replicas=4, placement=pl), name="w"), snap).reasons
    now[0] = T0 + 30
    assert sched.schedule(Task(task(replicas=4, placement=pl), name="w"), snap).reasons == {
        "m1": "toleration of taint failing:NoExecute ran out (25s)"}


def test_the_shortest_toleration_with_seconds_wins(sched: Scheduler) -> None:
    """Karmada's GetMinTolerationTime: tolerations without seconds do not extend one with seconds."""
    now = [T0 + 30]
    snap = _clocked(now)
    _fleet(snap, taints=[Taint(key="failing", effect="NoExecute", timeAdded=T0_TEXT)])
    pl = Placement(clusterTolerations=[Toleration(key="failing", operator="Exists"),
                                       Toleration(operator="Exists", effect="NoExecute", tolerationSeconds=25)])
    r = sched.schedule(Task(task(replicas=4, placement=pl), name="w"), snap)
    assert "m1" in r.reasons


@pytest.mark.parametrize("key", ["cluster.karmada.io/not-ready", "cluster.karmada.io/unreachable"])
def test_karmada_not_ready_keys_tolerate_the_drods_taint(sched: Scheduler, key: str) -> None:
    snap = Snapshot()
    _fleet(snap, taints=[Taint(key="cluster.multicluster.io/not-ready", effect="NoExecute")])
    r = sched.schedule(Task(task(replicas=4, placement=_tolerating(None, key)), name="w"), snap)
    assert "m1" not in r.reasons
    r = sched.schedule(Task(task(replicas=4), name="w"), snap)
    assert "m1" in r.reasons


def test_the_drods_key_tolerates_karmadas_taint(sched: Scheduler) -> None:
    snap = Snapshot()
    _fleet(snap, taints=[Taint(key="cluster.karmada.io/unreachable", effect="NoExecute")])
    r = sched.schedule(Task(task(replicas=4, placement=_tolerating(None, "cluster.multicluster.io/not-ready")),
                            name="w"), snap)
    assert "m1" not in r.reasons
    # Karmada's own two keys stay apart
    r = sched.schedule(Task(task(replicas=4, placement=_tolerating(None, "cluster.karmada.io/not-ready")),
                            name="w"), snap)
    assert "m1" in r.reasons


def test_a_cluster_an_eviction_task_keeps_out_is_explained_by_the_move(snap: Snapshot, sched: Scheduler) -> None:
    """The task's cluster is carried as a ``clusterAffinity.exclude`` (`placeable`); its reason names
    the move, not an exclude the policy never had."""
    _fleet(snap)
    moved = GracefulEvictionTask(fromCluster="m1", reason="ApplicationFailure", producer="application-failover",
                                 creationTimestamp=T0_TEXT)
    spec = placeable(task(replicas=4, gracefulEvictionTasks=[moved]), [])
    r = sched.schedule(Task(spec, name="web"), snap)
    assert r.phase == "Scheduled" and "m1" not in dict(r.pairs)
    assert r.reasons["m1"] == (f"moved off it (ApplicationFailure, application-failover) at {T0_TEXT}: kept out "
                               "until that move is over")


NOT_READY = "cluster.multicluster.io/not-ready"
TOLERATING_NOT_READY = [
    pytest.param(Placement(), id="failover-default"),  # none of its own: the failover controller's default
    pytest.param(_tolerating(90, NOT_READY), id="90s"),
    pytest.param(Placement(clusterTolerations=[  # Karmada's webhook default, both keys, 300 s
        Toleration(key=k, operator="Exists", effect="NoExecute", tolerationSeconds=300)
        for k in ("cluster.karmada.io/not-ready", "cluster.karmada.io/unreachable")]), id="karmada-300s"),
    pytest.param(_tolerating(None, NOT_READY), id="for-good"),
]


def _not_ready_m1(now: list[float], **extra: Any) -> Snapshot:
    """m1 NotReady since T0 with the health controller's taint (timeAdded T0); the others fine."""
    snap = _clocked(now)
    for c in FOUR:
        if c == "m1":
            add(snap, c, ready=False, taints=[Taint(key=NOT_READY, effect="NoExecute", timeAdded=T0_TEXT),
                                              *extra.get("taints", [])])
        else:
            add(snap, c)
    return snap


def _with(pl: Placement, **kw: Any) -> Placement:
    return pl.model_copy(update=kw)


@pytest.mark.parametrize("tolerated", TOLERATING_NOT_READY)
@pytest.mark.parametrize("weights", [pytest.param(None, id="dynamic"), pytest.param(_static(), id="static")])
def test_a_scale_up_keeps_a_tolerated_not_ready_clusters_replicas_and_adds_none_there(
        sched: Scheduler, tolerated: Placement, weights: Placement | None) -> None:
    """Walkthrough AJ 1: a FederatedHPA scale-up 30 s into a NotReady episode (toleration 90 s) took the
    NotReady cluster's replicas away ("cluster not ready"). As in Karmada (the tolerated NoExecute taint
    passes a cluster the binding targets), they stay; the failover controller moves them once the
    toleration runs out."""
    now = [T0 + 30]
    snap = _not_ready_m1(now)
    pl = tolerated if weights is None else _with(weights, clusterTolerations=tolerated.clusterTolerations)
    before = {"m1": 3, "m2": 3, "m3": 3, "m4": 3}
    r = sched.schedule(Task(task(replicas=16, placement=pl), name="web", current=_on(before)), snap)
    got = r.placement_dict()
    assert got["m1"] == 3, (got, r.reasons)  # kept, and no more on a NotReady cluster
    assert sum(got.values()) == 16 and all(got[c] >= 3 for c in FOUR[1:])  # the extra ones went elsewhere
    # a scale-down may take from it, like from any cluster that keeps what it has
    down = sched.schedule(Task(task(replicas=4, placement=_with(_static(), clusterTolerations=pl.clusterTolerations)),
                               name="web", current=_on(before)), snap).placement_dict()
    assert down == dict.fromkeys(FOUR, 1)


@pytest.mark.parametrize("tolerated", TOLERATING_NOT_READY)
def test_a_not_ready_cluster_gets_no_new_workload_and_a_decision_from_scratch_leaves_it(
        sched: Scheduler, tolerated: Placement) -> None:
    now = [T0 + 30]
    snap = _not_ready_m1(now)
    fresh = sched.schedule(Task(task(replicas=8, placement=tolerated), name="new", current=_on({"m2": 2})), snap)
    assert "m1" not in fresh.placement_dict() and fresh.reasons["m1"] == "cluster not ready"
    again = sched.schedule(Task(task(replicas=12, placement=tolerated), name="web",
                                current=_on(dict.fromkeys(FOUR, 3)), rebalance=True), snap)
    assert "m1" not in again.placement_dict() and sum(again.placement_dict().values()) == 12


def test_a_not_ready_clusters_replicas_go_once_its_toleration_ran_out(sched: Scheduler) -> None:
    """Past ``timeAdded + tolerationSeconds`` a scale no longer keeps them (the failover controller's
    eviction is not placed back)."""
    now = [T0 + 90]
    snap = _not_ready_m1(now)
    r = sched.schedule(Task(task(replicas=16, placement=_tolerating(90, NOT_READY)), name="web",
                            current=_on(dict.fromkeys(FOUR, 3))), snap)
    assert "m1" not in r.placement_dict() and sum(r.placement_dict().values()) == 16
    assert r.reasons["m1"] == f"toleration of taint {NOT_READY}:NoExecute ran out (90s)"


def test_a_not_ready_cluster_with_another_untolerated_no_execute_taint_is_not_kept(sched: Scheduler) -> None:
    now = [T0 + 30]
    snap = _not_ready_m1(now, taints=[Taint(key="failing", effect="NoExecute")])
    r = sched.schedule(Task(task(replicas=16, placement=_tolerating(90, NOT_READY)), name="web",
                            current=_on(dict.fromkeys(FOUR, 3))), snap)
    assert "m1" not in r.placement_dict()
    assert r.reasons["m1"] == "untolerated taint failing:NoExecute"
    # the same without a toleration of the not-ready taint: the evicting taint explains it, not the held one
    r = sched.schedule(Task(task(replicas=16), name="web", current=_on(dict.fromkeys(FOUR, 3))), snap)
    assert "m1" not in r.placement_dict()
