"""Data locality (F4): the Dataset spec, the score's golden values, the GiB a decision moves."""

from __future__ import annotations

import numpy as np
import pytest
from pydantic import ValidationError

from drods.model.binding import ObjectReference
from drods.model.cluster import CostModel
from drods.model.dataset import DatasetRead, DatasetSpec
from drods.scheduler import Profile, Scheduler, Snapshot, Task
from drods.scheduler.plugins.data_locality import DataLocality, moved_gib_per_hour
from drods.scheduler.task import analyse
from tests.scheduler.conftest import add, task


def test_dataset_spec_rules() -> None:
    DatasetSpec.model_validate({"sizeGiB": 10, "locations": [{"cluster": "a", "kind": "Primary"},
                                                            {"cluster": "b", "kind": "Cache"}]})
    with pytest.raises(ValidationError, match="at most one Primary"):
        DatasetSpec.model_validate({"sizeGiB": 1, "locations": [{"cluster": "a", "kind": "Primary"},
                                                               {"cluster": "b", "kind": "Primary"}]})
    with pytest.raises(ValidationError):
        DatasetSpec.model_validate({"sizeGiB": -1})


def fleet(snap: Snapshot) -> None:
    add(snap, "a", cost=CostModel(cpuCoreHour=0.01, egressGiB=0.05))
    add(snap, "b", cost=CostModel(cpuCoreHour=0.01, egressGiB=0.12))
    add(snap, "c")  # no price: the default egress 0.09
    snap.datasets = {"ml/images": ("a",), "ml/labels": ("b", "c")}


def test_score_golden_and_namespace(snap: Snapshot) -> None:
    fleet(snap)
    spec = task(datasets=[DatasetRead(name="images", readGiBPerHour=100),
                          DatasetRead(name="labels", readGiBPerHour=10)],
                resource=ObjectReference(apiVersion="apps/v1", kind="Deployment", name="train", namespace="ml"))
    info = analyse(spec)
    assert info.datasets == (("ml/images", 100.0), ("ml/labels", 10.0))
    plugin = DataLocality()
    assert not plugin.skip(info, snap)
    s = plugin.score(info, snap, np.ones(3, dtype=bool))
    # a: images local, labels from c (min egress of b 0.12, c 0.09) → 10·0.09 = 0.9
    # b: images from a 100·0.05 = 5, labels local → 5 ; c: 5 likewise
    # min-max: a → 100, b and c → 0
    assert s.tolist() == pytest.approx([100.0, 0.0, 0.0])
    # bytes moved by a placement: 2 replicas on a, 2 on b → images read away by half, labels by half
    moved = moved_gib_per_hour(info, snap, np.array([0, 1]), np.array([2, 2]))
    assert moved == pytest.approx(100 * 0.5 + 10 * 0.5)


def test_skipped_without_known_datasets(snap: Snapshot) -> None:
    fleet(snap)
    plugin = DataLocality()
    assert plugin.skip(analyse(task()), snap)
    assert plugin.skip(analyse(task(datasets=[DatasetRead(name="nowhere", readGiBPerHour=5)])), snap)


def test_a_dataset_that_does_not_exist_is_said_in_the_decision(snap: Snapshot) -> None:
    fleet(snap)
    spec = task(replicas=1, datasets=[DatasetRead(name="nosuch", readGiBPerHour=50),
                                      DatasetRead(name="images", readGiBPerHour=5)],
                resource=ObjectReference(apiVersion="apps/v1", kind="Deployment", name="t", namespace="ml"))
    r = Scheduler(Profile.default(), rng_seed=1).schedule(Task(spec, name="t"), snap)
    assert r.phase == "Scheduled", r.message
    assert "no copy of ml/nosuch on any cluster (no such Dataset, or no location)" in r.message, r.message
    assert "images" not in r.message


def test_decision_prefers_the_data_and_records_bytes(snap: Snapshot) -> None:
    fleet(snap)
    spec = task(replicas=2, datasets=[DatasetRead(name="images", readGiBPerHour=40)],
                resource=ObjectReference(apiVersion="apps/v1", kind="Deployment", name="t", namespace="ml"))
    r = Scheduler(Profile.default(), rng_seed=1).schedule(Task(spec, name="t"), snap)
    assert r.placement_dict() == {"a": 2} and r.data_moved_gib_per_hour == 0.0
    blind = Scheduler(Profile.from_dict({"scores": {"LeastWaterLevel": 1.0}}), rng_seed=1).schedule(
        Task(spec, name="t"), snap)
    assert blind.data_moved_gib_per_hour is not None and blind.data_moved_gib_per_hour > 0


def test_bandwidth_weighs_the_transfer(snap: Snapshot) -> None:
    """bytes ÷ bandwidth × egress: the nearest copy is the one behind the faster, cheaper link."""
    from drods.model.cluster import NetworkProfile

    add(snap, "d1", cost=CostModel(egressGiB=0.05), network=NetworkProfile(bandwidthMbps=500))
    add(snap, "d2", cost=CostModel(egressGiB=0.08), network=NetworkProfile(bandwidthMbps=2000))
    add(snap, "x", network=NetworkProfile(bandwidthMbps=1000))
    add(snap, "y", network=NetworkProfile(bandwidthMbps=250))
    add(snap, "z")  # no bandwidth: the reference link (1000 Mbps)
    snap.datasets = {"ml/logs": ("d1", "d2")}
    info = analyse(task(datasets=[DatasetRead(name="logs", readGiBPerHour=100)],
                        resource=ObjectReference(apiVersion="apps/v1", kind="Deployment", name="t", namespace="ml")))
    plugin = DataLocality()
    s = plugin.score(info, snap, np.ones(5, dtype=bool))
    # x: from d1 min(500,1000)=500 → 100·0.05·1000/500 = 10; from d2 min(2000,1000)=1000 → 100·0.08 = 8 → 8
    # y: d1 250 → 100·0.05·4 = 20; d2 250 → 100·0.08·4 = 32 → 20 ; z: d1 5, d2 8 → 5 (unknown = reference)
    # min-max over [0, 0, 8, 20, 5]: 100·(20 − cost)/20
    assert s.tolist() == pytest.approx([100.0, 100.0, 60.0, 0.0, 75.0])
    # a measured pair (C2 network status) replaces the profiles: d1 ↔ y at 4000 Mbps → 100·0.05/4 = 1.25
    snap.set_network_pair("d1", "y", delay_ms=3.0, bandwidth_mbps=4000)
    s = plugin.score(info, snap, np.ones(5, dtype=bool))
    assert s.tolist() == pytest.approx([100.0, 100.0, 0.0, 100 * (8 - 1.25) / 8, 100 * 3 / 8])
    assert snap.latency_array("y") is not None and snap.latency_array("y")[snap.index["d1"]] == 3.0


def test_dataset_size_charges_the_copy_in_proportion(snap: Snapshot) -> None:
    """A cluster without a copy pays the one-time transfer of the whole dataset (size × egress ÷ the
    amortisation hours), in proportion to its size; a dataset of unknown size adds no such charge."""
    add(snap, "home", cost=CostModel(egressGiB=0.1))
    add(snap, "far")  # default egress 0.09
    spec = task(datasets=[DatasetRead(name="big", readGiBPerHour=0), DatasetRead(name="small", readGiBPerHour=1)],
                resource=ObjectReference(apiVersion="apps/v1", kind="Deployment", name="t", namespace="ml"))
    info = analyse(spec)
    mask = np.ones(2, dtype=bool)
    snap.set_dataset("ml/small", {"spec": {"locations": [{"cluster": "far"}]}})
    snap.set_dataset("ml/big", {"spec": {"locations": [{"cluster": "home"}]}})  # no size: unknown
    assert "ml/big" not in snap.dataset_sizes
    # home reads 1 GiB/h of small from far (0.09/h); far pays nothing for big's unknown size
    assert DataLocality().score(info, snap, mask).tolist() == pytest.approx([0.0, 100.0])
    snap.set_dataset("ml/big", {"spec": {"sizeGiB": 240, "locations": [{"cluster": "home"}]}})
    assert snap.dataset_sizes["ml/big"] == 240.0
    # far now pays 240 GiB × 0.1 ÷ 24 h = 1.0/h > 0.09/h: home wins
    assert DataLocality().score(info, snap, mask).tolist() == pytest.approx([100.0, 0.0])
    snap.set_dataset("ml/big", {"spec": {"sizeGiB": 0.24, "locations": [{"cluster": "home"}]}})
    # a thousand times smaller: 0.001/h < 0.09/h, far wins again
    assert DataLocality().score(info, snap, mask).tolist() == pytest.approx([0.0, 100.0])
