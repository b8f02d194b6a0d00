"""F1/S3 through the API of one real control plane: GPUs of a model are a consumed capacity. One
cluster's member reports its A100 allocation, the other's is silent (its spec's count and what
DRO-DS placed are all there is); replicas go in proportion to free A100s, the 13th is refused with
a reason naming the GPUs, the decision's analysis in history shows the headroom used, and deleting
a binding gives its GPUs back to the parked one; storage by tier is consumed the same way."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest

from drods.store import Store
from tests.scheduler_e2e.conftest import Plane, eventually, placement, serve

BY_FREE_GPUS = {"replicaScheduling": {"replicaSchedulingType": "Divided", "replicaDivisionPreference": "Weighted",
                                      "weightPreference": {"dynamicWeight": "AvailableReplicas"}}}


@pytest.fixture
async def plane(store_factory: Callable[[], Store], tmp_path: Path) -> AsyncIterator[Plane]:
    store = store_factory()
    await store.delete_prefix("/")
    async with serve(store, tmp_path / "data") as p:
        yield p


def train(name: str, replicas: int) -> dict[str, Any]:
    return {"name": name, "replicas": replicas, "placement": BY_FREE_GPUS,
            "resources": {"cpu": 1, "memory": 2, "gpu": 1, "gpuModel": "A100"}}


@pytest.mark.parametrize("store_factory", ["sqlite"], indirect=True)
async def test_replicas_follow_free_a100s_and_the_13th_is_refused(plane: Plane) -> None:
    await plane.cluster("a100-4", 10, gpus=[{"model": "A100", "count": 4, "relativePerformance": 1.0}])
    # 10 A100s, 2 of them allocated by others, as the member's agent reports
    await plane.cluster("a100-8", 10, gpus=[{"model": "A100", "count": 10}],
                        storage=[{"tier": "ssd", "capacityGiB": 1000}],
                        report={"gpuCapacity": 10, "gpuUsage": 20,
                                "gpuByModel": {"A100": {"capacity": 10, "allocated": 2}},
                                "storageByTier": {"ssd": {"allocated": 600}}})
    await plane.cluster("cpu-only", 5)
    await plane.seen("a100-4", "a100-8", "cpu-only")

    st = await plane.place(train("train", 6))
    assert placement(st) == {"a100-4": 2, "a100-8": 4}  # 4 : 8 free
    r = await plane.call("GET", "/api/v1/history/schedules", params={"binding": "train"})
    entry = r.json()["items"][0]
    assert entry["analysis"]["headroom"] == {"gpus": {"perReplica": 1, "eligible": "GPUs (A100)", "clusters": {
        "a100-4": {"free": {"A100": 4.0}, "used": 2.0}, "a100-8": {"free": {"A100": 8.0}, "used": 4.0}}}}
    assert entry["filters"]["reasons"]["cpu-only"] == "no GPU model A100"

    st = await plane.place(train("more", 6))
    assert placement(st) == {"a100-4": 2, "a100-8": 4}  # the remaining 2 : 4

    st = await plane.place(train("extra", 1))  # the 13th A100 replica
    assert st["phase"] == "Unschedulable" and st["placement"] == []
    assert st["message"] == "0/3 clusters available: 2 insufficient GPUs (A100), 1 no GPU model A100."
    assert st["reasons"]["a100-4"] == "insufficient GPUs (A100): need 1 per replica, free 0"
    assert st["reasons"]["a100-8"] == "insufficient GPUs (A100): need 1 per replica, free 0"

    r = await plane.call("DELETE", "/api/v1/bindings/train")
    assert r.status_code in (200, 202), r.text

    async def placed() -> dict[str, Any] | None:
        s = await plane.status("extra")
        return s if s["phase"] != "Unschedulable" and s["placement"] else None

    st = await eventually(placed, what="the parked binding to take the freed GPUs")
    assert sum(placement(st).values()) == 1

    # storage by tier the same way: 400 of a100-8's 1000 ssd GiB are free, as its member reports
    st = await plane.place({"name": "db", "replicas": 3, "resources": {"cpu": 1, "storage": 150, "storageTier": "ssd"}})
    assert placement(st) == {"a100-8": 2} and st["phase"] == "Scheduled"
    assert st["message"].startswith("partially scheduled: placed 2/3 replicas")
    assert st["reasons"] == {"a100-4": "no storage tier ssd", "cpu-only": "no storage tier ssd"}
    r = await plane.call("GET", "/api/v1/history/schedules", params={"binding": "db"})
    assert r.json()["items"][0]["analysis"]["headroom"] == {"storage": {
        "tier": "ssd", "perReplicaGiB": 150.0, "clusters": {"a100-8": {"freeGiB": 400.0, "usedGiB": 300.0}}}}
