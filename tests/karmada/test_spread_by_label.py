"""D15: a spread constraint by a cluster label is applied (Karmada's scheduler ignores ``spreadByLabel``)."""

from __future__ import annotations

from drods.model.placement import Placement, ReplicaScheduling, SpreadConstraint
from drods.scheduler import Scheduler, Snapshot
from tests.karmada.harness import differs
from tests.scheduler.conftest import add, task


def test_a_spread_by_label_groups_by_the_labels_value_and_leaves_out_clusters_without_it() -> None:
    """docs/karmada.md D15: Karmada's scheduler ignores spreadByLabel; DRO-DS applies it."""
    differs("D15")
    snap = Snapshot()
    for name, zone in (("a", "z1"), ("b", "z1"), ("c", "z2"), ("d", None)):
        add(snap, name, labels={"failuredomain.kubernetes.io/zone": zone} if zone else {})
    pl = Placement(spreadConstraints=[SpreadConstraint(spreadByLabel="failuredomain.kubernetes.io/zone",
                                                       maxGroups=2, minGroups=2)],
                   replicaScheduling=ReplicaScheduling(replicaSchedulingType="Duplicated"))
    res = Scheduler(rng_seed=0).schedule(task(replicas=1, placement=pl), snap)
    assert res.phase == "Scheduled" and "d" not in res.placement_dict()
    zones = {"a": "z1", "b": "z1", "c": "z2"}
    assert {zones[c] for c in res.placement_dict()} == {"z1", "z2"}
    bare = Snapshot()
    add(bare, "x")
    add(bare, "y")
    none = Scheduler(rng_seed=0).schedule(task(replicas=1, placement=pl), bare)
    assert none.phase == "Unschedulable" and "failuredomain.kubernetes.io/zone" in none.message, none.message
