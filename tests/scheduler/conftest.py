"""Helpers to build small fleets for scheduler tests."""

from __future__ import annotations

from typing import Any

import pytest

from drods.model.binding import BindingSpec, ReplicaRequirements
from drods.model.cluster import ClusterSpec
from drods.scheduler import Profile, Scheduler, Snapshot


def status(cpu: float = 100.0, mem: float = 400.0, cpu_used: float = 0.0, mem_used: float = 0.0,
           gpu: float = 0.0, largest: dict[str, float] | None = None, **extra: Any) -> dict[str, Any]:
    doc: dict[str, Any] = {
        "timestamp": "2024-01-01T00:00:00Z", "source": "push",
        "cpu": {"capacity": cpu, "allocatable": cpu, "allocated": cpu_used},
        "memory": {"capacity": mem, "allocatable": mem, "allocated": mem_used},
    }
    if gpu:
        doc["gpu"] = {"capacity": gpu, "allocatable": gpu, "allocated": 0}
    if largest is not None:
        doc["largestNodeFree"] = largest
    doc.update(extra)
    return doc


def add(snap: Snapshot, name: str, *, labels: dict[str, str] | None = None, ready: bool = True,
        st: dict[str, Any] | None = None, **spec: Any) -> None:
    snap.upsert_cluster(name, labels or {}, ClusterSpec(**spec), ready, st if st is not None else status())


def task(replicas: int = 1, cpu: float = 1.0, mem: float = 1.0, **kw: Any) -> BindingSpec:
    res = kw.pop("resources", None) or ReplicaRequirements(cpu=cpu, memory=mem)
    return BindingSpec(replicas=replicas, resources=res, **kw)


@pytest.fixture
def snap() -> Snapshot:
    return Snapshot()


@pytest.fixture
def sched() -> Scheduler:
    return Scheduler(Profile.default(), rng_seed=7)
