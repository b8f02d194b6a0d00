"""F1: GPUs by model with relative performance, storage by tier with capacity — what the Capability
filter asks of them, and the S3 analysis recorded in the decision."""

from __future__ import annotations

from drods.model.binding import ReplicaRequirements
from drods.model.cluster import GpuOffer, StorageOffer
from drods.scheduler import Profile, Scheduler, Snapshot, Task
from tests.scheduler.conftest import add, status, task


def fleet(snap: Snapshot) -> None:
    add(snap, "t4", gpus=[GpuOffer(model="T4", count=8, relativePerformance=0.3)],
        storage=[StorageOffer(tier="ssd", capacityGiB=100)], st=status(gpu=8))
    add(snap, "a100", gpus=[GpuOffer(model="A100", count=4, relativePerformance=1.0),
                            GpuOffer(model="T4", count=2, relativePerformance=0.3)],
        storage=[StorageOffer(tier="ssd", capacityGiB=2000)], st=status(gpu=6))
    add(snap, "h100", gpus=[GpuOffer(model="H100", count=8, relativePerformance=3.2)], st=status(gpu=8))
    add(snap, "listed", gpuModels=["A100"], storageTiers=["ssd"], st=status(gpu=4))  # no performance stated


def run(snap: Snapshot, res: ReplicaRequirements) -> tuple[dict[str, int], dict[str, str], dict[str, object]]:
    r = Scheduler(Profile.default(), rng_seed=1).schedule(Task(task(replicas=2, resources=res), name="t"), snap)
    return r.placement_dict(), r.reasons, r.analysis


def test_gpu_performance_and_model(snap: Snapshot) -> None:
    fleet(snap)
    assert snap.gpu_performance(None).tolist()[:3] == [0.3, 1.0, 3.2]
    placed, reasons, analysis = run(snap, ReplicaRequirements(cpu=1, gpu=1, minGpuPerformance=1.0))
    assert set(placed) <= {"a100", "h100"} and sum(placed.values()) == 2
    assert reasons["t4"] == "no GPU with relative performance >= 1"
    assert reasons["listed"] == "no GPU with relative performance >= 1"  # performance unknown
    assert analysis["minGpuPerformance"] == 1.0 and analysis["compute"] == "gpu:any"
    # a named model: that model's performance counts (a100's T4s are not fast enough, its A100s are)
    placed, reasons, _ = run(snap, ReplicaRequirements(cpu=1, gpu=1, gpuModel="T4", minGpuPerformance=0.5))
    assert placed == {} and reasons["a100"] == "no GPU with relative performance >= 0.5"
    assert reasons["h100"] == "no GPU model T4"
    # the model list of spec.gpus counts as offered
    placed, _, _ = run(snap, ReplicaRequirements(cpu=1, gpu=1, gpuModel="H100"))
    assert placed == {"h100": 2}


def test_storage_tier_capacity(snap: Snapshot) -> None:
    fleet(snap)
    assert snap.tier_capacity("ssd").tolist()[:2] == [100.0, 2000.0]
    placed, reasons, analysis = run(snap, ReplicaRequirements(cpu=1, storage=500, storageTier="ssd"))
    assert set(placed) <= {"a100", "listed"} and sum(placed.values()) == 2
    assert reasons["t4"] == "insufficient storage tier ssd: need 500 GiB per replica, free 100 GiB"
    assert reasons["h100"] == "no storage tier ssd"
    assert analysis["storageTier"] == "ssd"
