"""F1/S3: GPUs by model and storage by tier as consumed capacity — golden fits, draws, reasons, the
decision's headroom analysis, and a task without such needs doing no array work for them."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pytest

from drods.model.binding import ReplicaRequirements
from drods.model.cluster import GpuOffer, StorageOffer
from drods.scheduler import Profile, Scheduler, Snapshot, Task
from drods.scheduler.plugins import gpu_storage_fit
from drods.scheduler.plugins.gpu_storage_fit import GpuStorageFit
from drods.scheduler.task import analyse
from tests.scheduler.conftest import add, status, task

AVAILABLE = {"replicaScheduling": {"replicaSchedulingType": "Divided", "replicaDivisionPreference": "Weighted",
                                   "weightPreference": {"dynamicWeight": "AvailableReplicas"}}}


def fleet(snap: Snapshot) -> None:
    # mixed: 4 A100 (1 allocated, as its member reports) and 8 T4; h100: 8 H100, member silent
    add(snap, "mixed", gpus=[GpuOffer(model="A100", count=4, relativePerformance=1.0),
                             GpuOffer(model="T4", count=8, relativePerformance=0.3)],
        storage=[StorageOffer(tier="ssd", capacityGiB=1000)],
        st=status(gpuByModel={"A100": {"capacity": 4, "allocated": 1}}, storageByTier={"ssd": {"allocated": 200}}))
    add(snap, "h100", gpus=[GpuOffer(model="H100", count=8, relativePerformance=3.2)])
    add(snap, "listed", gpuModels=["A100"], storageTiers=["ssd"], st=status(gpu=4))  # no counts stated


def fit(snap: Snapshot, **res: Any) -> list[float]:
    info = analyse(task(resources=ReplicaRequirements(cpu=1, **res)))
    return GpuStorageFit().max_replicas(info, snap).tolist()  # type: ignore[no-any-return]


def test_gpu_fit_per_model_golden(snap: Snapshot) -> None:
    fleet(snap)
    assert fit(snap, gpu=2, minGpuPerformance=1.0) == [1.0, 4.0, math.inf]  # 3 free A100 hold one 2-GPU replica
    assert fit(snap, gpu=2) == [5.0, 4.0, math.inf]  # A100 1 + T4 4: a replica's GPUs are of one model
    assert fit(snap, gpu=1, gpuModel="T4") == [8.0, math.inf, math.inf]  # h100 has no T4: Capability's to drop
    assert fit(snap, gpu=3, gpuModel="A100") == [1.0, math.inf, math.inf]
    assert fit(snap, storage=300, storageTier="ssd") == [2.0, math.inf, math.inf]  # 800 GiB free on mixed


def test_reported_assumed_and_placed_load(snap: Snapshot) -> None:
    fleet(snap)
    a100 = analyse(task(resources=ReplicaRequirements(cpu=1, gpu=1, gpuModel="A100"))).demand
    vec = np.array([1.0, 0, 1, 1, 0])
    # mixed reports its A100s: a binding's hold does not count there, what is assumed does
    snap.place_offers("w", (("mixed", 2),), a100)
    assert fit(snap, gpu=1, gpuModel="A100")[0] == 3.0
    snap.assume((("mixed", 2),), vec, key="w", demand=a100, hold=False)
    assert fit(snap, gpu=1, gpuModel="A100")[0] == 1.0  # 4 - (1 reported + 2 assumed)
    snap.set_status("mixed", status(gpuByModel={"A100": {"capacity": 4, "allocated": 3}}))  # the member sees them
    snap.forget(key="w", offers=False)
    assert fit(snap, gpu=1, gpuModel="A100")[0] == 1.0 and "w" in snap.offers.placements
    snap.set_status("mixed", status(gpuByModel={"A100": {"allocatable": 3, "allocated": 3}}))
    assert fit(snap, gpu=1, gpuModel="A100")[0] == 0.0  # reported allocatable wins over the spec's count
    snap.set_status("mixed", status())  # silent on GPUs by model: the hold is all we know
    assert fit(snap, gpu=1, gpuModel="A100")[0] == 2.0
    snap.drop_offers("w")
    assert fit(snap, gpu=1, gpuModel="A100")[0] == 4.0


def test_draws_take_the_slowest_eligible_model_first(snap: Snapshot) -> None:
    fleet(snap)
    req = ReplicaRequirements(cpu=1, gpu=1)
    snap.assume((("mixed", 10),), req, key="w")
    assert snap.offers.gpus.key_names == ["A100", "T4", "H100"]
    gpus = snap.offers.gpus
    assert gpus.placed[0].tolist() == [2.0, 8.0, 0.0] and gpus.assumed[0].tolist() == [2.0, 8.0, 0.0]
    assert snap.offers.placements["w"][0] == (("mixed", "T4", 8.0), ("mixed", "A100", 2.0))
    assert fit(snap, gpu=1)[0] == 1.0  # A100: 4 - (1 reported + 2 assumed); T4 (not reported): 8 - 8 held
    snap.forget(key="w")
    assert not snap.offers.gpus.placed.any() and not snap.offers.gpus.assumed.any()
    assert "w" not in snap.offers.placements and "w" not in snap.offers.assumed


def test_reasons_name_the_capacity_and_analysis_shows_headroom(snap: Snapshot) -> None:
    fleet(snap)
    sched = Scheduler(Profile.default(), rng_seed=1)
    spec = task(replicas=7, resources=ReplicaRequirements(cpu=1, gpu=1, gpuModel="A100", storage=100,
                                                          storageTier="ssd"), placement=AVAILABLE)
    r = first = sched.schedule(Task(spec, name="ns/a"), snap)
    assert r.placement_dict() == {"listed": 4, "mixed": 3}  # listed: no count stated, its 4 generic GPUs
    assert r.reasons["h100"] == "no GPU model A100"
    assert r.analysis["headroom"] == {
        "gpus": {"perReplica": 1, "eligible": "GPUs (A100)", "clusters": {"mixed": {"free": {"A100": 3.0},
                                                                                     "used": 3.0}}},
        "storage": {"tier": "ssd", "perReplicaGiB": 100.0, "clusters": {"mixed": {"freeGiB": 800.0,
                                                                                  "usedGiB": 300.0}}}}
    snap.assume(r.pairs, spec.resources, key="ns/a")
    snap.set_status("listed", status(gpu=4, gpuByModel={"A100": {"capacity": 4, "allocated": 4}}))
    big = task(replicas=1, resources=ReplicaRequirements(cpu=1, gpu=1, gpuModel="A100"))
    r = sched.schedule(Task(big, name="ns/b"), snap)
    assert r.phase == "Unschedulable"
    assert r.message == "0/3 clusters available: 2 insufficient GPUs (A100), 1 no GPU model A100."
    assert r.reasons["mixed"] == "insufficient GPUs (A100): need 1 per replica, free 0"
    tier = task(replicas=1, resources=ReplicaRequirements(cpu=1, storage=600, storageTier="ssd"))
    r = sched.schedule(Task(tier, name="ns/c"), snap)
    assert r.placement_dict() == {"listed": 1}  # listed states no ssd capacity: not enforced
    assert r.reasons["mixed"] == "insufficient storage tier ssd: need 600 GiB per replica, free 500 GiB"
    # deciding ns/a again, what it has there counts as free to it
    again = sched.schedule(Task(spec, name="ns/a", current=first.placement), snap)
    assert again.placement_dict() == {"listed": 4, "mixed": 3}
    assert again.analysis["headroom"]["gpus"]["clusters"]["mixed"] == {"free": {"A100": 3.0}, "used": 3.0}  # type: ignore[index]


def test_no_gpu_or_tier_need_does_no_array_work(snap: Snapshot, monkeypatch: pytest.MonkeyPatch) -> None:
    fleet(snap)

    def boom(*_: Any) -> Any:
        raise AssertionError("GPU/tier arrays touched for a task without such needs")

    monkeypatch.setattr(gpu_storage_fit, "gpu_fit", boom)
    monkeypatch.setattr(gpu_storage_fit, "tier_fit", boom)
    monkeypatch.setattr(gpu_storage_fit, "headroom", boom)
    info = analyse(task(resources=ReplicaRequirements(cpu=1, storage=10)))  # storage without a tier: generic
    assert info.demand is None and GpuStorageFit.skip(info, snap)
    r = Scheduler(Profile.default(), rng_seed=1).schedule(Task(task(replicas=3), name="cpu"), snap)
    assert r.placed == 3 and "headroom" not in r.analysis and "GpuStorageFit" not in r.timings_ms  # not even called


def test_rows_follow_grow_and_swap_remove(snap: Snapshot) -> None:
    for i in range(20):  # past the initial capacity of 16 rows
        add(snap, f"c{i:02d}", gpus=[GpuOffer(model="A100", count=i)])
    snap.place_offers("w", (("c19", 3),), analyse(task(resources=ReplicaRequirements(gpu=1))).demand)
    snap.remove_cluster("c05")  # c19 moves into row 5
    assert snap.index["c19"] == 5
    assert fit(snap, gpu=1)[5] == 16.0 and fit(snap, gpu=1)[19:] == []
    snap.drop_offers("w")
    assert fit(snap, gpu=1)[5] == 19.0 and np.all(snap.offers.gpus.placed == 0)
