"""Snapshot: status defaults, incremental upsert/remove, assume/forget, water level."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from drods.model.binding import ReplicaRequirements, TargetCluster
from drods.model.cluster import ClusterSpec, Taint
from drods.scheduler import Snapshot, parse_status
from drods.scheduler.indexes import codes_in
from drods.scheduler.resources import CPU, GPU, MEM, PODS, STORAGE
from tests.scheduler.conftest import add, status


def test_parse_status_defaults() -> None:
    p = parse_status({"cpu": {"capacity": 10}, "memory": {"capacity": 40, "allocatable": 32, "allocated": 8,
                                                          "used": 16}})
    assert p.alloc[CPU] == 10 and p.load[CPU] == 0
    assert p.alloc[MEM] == 32 and p.load[MEM] == 16  # load = max(allocated, used)
    assert p.alloc[GPU] == 0
    assert math.isinf(p.alloc[PODS]) and math.isinf(p.alloc[STORAGE])
    # missing largestNodeFree = allocatable - max(allocated, used), as one node
    assert list(p.largest) == [10, 16, 0]
    assert p.present


def test_parse_status_used_defaults_to_allocated_and_storage() -> None:
    p = parse_status({"cpu": {"capacity": 8, "allocated": 6}, "storage": {"capacity": 100, "available": 30},
                      "pods": {"capacity": 110, "used": 10}, "largestNodeFree": {"cpu": 1.5}})
    assert p.load[CPU] == 6
    assert p.alloc[STORAGE] == 100 and p.load[STORAGE] == 70
    assert p.alloc[PODS] == 110 and p.load[PODS] == 10
    assert p.largest[0] == 1.5
    assert not parse_status(None).present


def test_water_level_computed_and_status_override(snap: Snapshot) -> None:
    add(snap, "a", st=status(cpu=100, mem=100, cpu_used=30, mem_used=50))
    add(snap, "b", st=status(cpu=100, mem=100, cpu_used=30, mem_used=50, waterLevel=0.7))
    assert snap.water_level[snap.index["a"]] == pytest.approx(0.5)
    assert snap.water_level[snap.index["b"]] == pytest.approx(0.7)
    # assumed placements add on top of the observed level
    snap.assume([TargetCluster(cluster="a", replicas=10), TargetCluster(cluster="b", replicas=10)],
                ReplicaRequirements(cpu=1, memory=1))
    assert snap.water_level[snap.index["a"]] == pytest.approx(0.6)
    assert snap.water_level[snap.index["b"]] == pytest.approx(0.8)


def test_assume_forget_by_key_and_by_value(snap: Snapshot) -> None:
    add(snap, "a")
    req = ReplicaRequirements(cpu=2, memory=4)
    pl = [TargetCluster(cluster="a", replicas=3)]
    snap.assume(pl, req, key="w1")
    assert snap.free[0, CPU] == pytest.approx(94)
    snap.assume(pl, req, key="w1")  # same key replaces, does not double count
    assert snap.free[0, CPU] == pytest.approx(94)
    assert snap.forget(key="w1")
    assert snap.free[0, CPU] == pytest.approx(100)
    snap.assume(pl, req)
    snap.forget(pl, req)
    assert snap.free[0, MEM] == pytest.approx(400)
    assert not snap.forget(key="nope")


def test_upsert_remove_keeps_indexes_consistent() -> None:
    snap = Snapshot(capacity=2)  # force growth
    for i in range(7):
        add(snap, f"c{i}", labels={"tier": "gold" if i % 2 else "silver", f"only{i}": "x"},
            region=f"r{i % 3}", capabilities=["gpu"] if i % 2 else [],
            taints=[Taint(key="t", value=str(i), effect="NoSchedule")] if i == 6 else [])
    assert snap.n == 7
    snap.remove_cluster("c1")
    snap.remove_cluster("c3")
    assert snap.n == 5
    names = set(snap.names)
    assert names == {"c0", "c2", "c4", "c5", "c6"}
    for nm in names:
        r = snap.index[nm]
        assert snap.names[r] == nm and snap.names_arr[r] == nm
        i = int(nm[1:])
        assert bool(snap.label_in("tier", ["gold"])[r]) == bool(i % 2)
        assert bool(snap.set_mask("capability", "gpu")[r]) == bool(i % 2)
        assert bool(snap.field_in("region", [f"r{i % 3}"])[r])
        assert bool(snap.label_exists(f"only{i}")[r])
    assert snap.label_exists("only1").sum() == 0
    assert ("t", "6", "NoSchedule") in snap.indexes.taints
    assert snap.indexes.taints[("t", "6", "NoSchedule")][: snap.n].sum() == 1
    snap.remove_cluster("c6")
    assert ("t", "6", "NoSchedule") not in snap.indexes.taints  # value index freed with its last user


def test_update_changes_labels_and_spec(snap: Snapshot) -> None:
    add(snap, "a", labels={"env": "dev"}, region="eu")
    tv = snap.topology_version
    snap.upsert_cluster("a", {"env": "prod"}, ClusterSpec(region="us"), True, status())
    assert snap.topology_version > tv
    assert snap.label_in("env", ["prod"]).tolist() == [True]
    assert snap.label_in("env", ["dev"]).tolist() == [False]
    assert snap.field_in("region", ["us"]).tolist() == [True]
    tv = snap.topology_version
    snap.set_status("a", status(cpu=50))
    assert snap.topology_version == tv  # status-only update keeps selector caches
    assert snap.alloc[0, CPU] == 50


def test_fleet_water_level_is_capacity_weighted(snap: Snapshot) -> None:
    add(snap, "big", st=status(cpu=300, mem=300, cpu_used=0))
    add(snap, "small", st=status(cpu=100, mem=100, cpu_used=100, mem_used=100))
    assert snap.fleet_water_level() == pytest.approx(0.25)
    assert snap.fleet_water_level(np.array([False, True])) == pytest.approx(1.0)


def test_assume_refreshes_only_touched_rows_with_the_same_numbers() -> None:
    """Assume/forget update the derived arrays in place; a full recompute must agree."""
    import numpy as np

    from drods.model.binding import ReplicaRequirements, TargetCluster
    from drods.scheduler import Snapshot
    from tests.scheduler.conftest import add, status

    snap = Snapshot()
    for i in range(6):
        add(snap, f"c{i}", st=status(cpu=10.0 + i, mem=40.0, cpu_used=i, largest={"cpu": 3.0, "memory": 8.0}))
    _ = snap.water_level  # derived arrays are current
    req = ReplicaRequirements(cpu=1.5, memory=2.0)
    snap.assume([TargetCluster(cluster="c1", replicas=2), TargetCluster(cluster="c4", replicas=1)], req, key="k")
    snap.forget(key="k")
    snap.assume([TargetCluster(cluster="c2", replicas=3)], req, key="j")
    got = (snap.free.copy(), snap.fractions.copy(), snap.water_level.copy(), snap.largest_free.copy())
    snap._derived_version = -1  # force the full recompute
    want = (snap.free, snap.fractions, snap.water_level, snap.largest_free)
    for g, w in zip(got, want, strict=True):
        np.testing.assert_allclose(g, w)


@given(st.lists(st.integers(-1, 30), max_size=200), st.lists(st.integers(0, 30), max_size=6))
def test_membership_by_table_agrees_with_isin(values: list[int], codes: list[int]) -> None:
    """The table that answers "is this row's code one of these" (topology and label queries, the
    preference for where a workload runs now) says what ``np.isin`` says; -1, no value, is never in."""
    arr = np.asarray(values, dtype=np.int32)
    got = codes_in(arr, codes, 31)
    assert got.dtype == bool and got.shape == arr.shape
    assert np.array_equal(got, np.isin(arr, codes))
