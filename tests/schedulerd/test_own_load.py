"""A binding's own load is not another's (walkthrough AK #1): a placement offer keeps the copies that
run, and a fresh division lifts what the binding measurably uses where it runs, not only its requests."""

from __future__ import annotations

import json
from typing import Any

import pytest

from drods.controllers.rescheduler import Rescheduler
from drods.model.annotations import PLACEMENT_OFFERS, RESCHEDULE_REASON
from drods.model.cluster import ClusterSpec
from drods.model.kinds import BINDING
from drods.model.reschedule import RescheduleRequest
from drods.model.timefmt import rfc3339_ms
from drods.scheduler.framework import Scheduler
from drods.scheduler.profile import Profile
from drods.schedulerd.cache import ClusterRecord, SchedulerCache, StatusRecord, measured_use
from drods.schedulerd.decision_task import decision_task
from drods.schedulerd.records import RESCHEDULE, decode_binding, schedule_type
from drods.schedulerd.spec_cache import SpecCache

CORES = 24.0


def _cache(levels: dict[str, float]) -> SchedulerCache:
    cache = SchedulerCache(clock=lambda: 1000.0)
    for name, used in levels.items():
        cache.on_cluster(name, ClusterRecord(name, {}, ClusterSpec(), True))
        cache.on_status(name, StatusRecord(name, {"cpu": {"capacity": CORES, "allocated": 2.0, "used": used},
                                                  "memory": {"capacity": 64.0, "allocated": 4.0}}, 1000.0))
    return cache


def _binding(reason: str, offers: str, usage: dict[str, Any] | None = None) -> dict[str, Any]:
    clusters = [{"cluster": c, "replicas": 1, **({"usage": usage[c]} if usage and c in usage else {})}
                for c in ("aws-dfw", "azure-lhr")]
    return {"metadata": {"name": "video", "generation": 1,
                         "annotations": {RESCHEDULE_REASON: reason, PLACEMENT_OFFERS: offers}},
            "spec": {"replicas": 1, "resources": {"cpu": 1.0, "memory": 1.0},
                     "rescheduleTriggeredAt": rfc3339_ms(1001.0),
                     "targetClusters": ["aws-dfw", "azure-lhr"],
                     "placement": {"replicaScheduling": {"replicaSchedulingType": "Duplicated"}}},
            "status": {"phase": "Scheduled", "scheduledGeneration": 1, "scheduledTime": rfc3339_ms(1000.0),
                       "placement": [{"cluster": "aws-dfw", "replicas": 1}, {"cluster": "azure-lhr", "replicas": 1}],
                       "clusters": clusters}}


class _Registry:
    """What `Rescheduler.offer` reads and writes of a registry."""

    def __init__(self, binding: dict[str, Any]) -> None:
        self.binding = binding

    async def get(self, kind: Any, name: str, namespace: str | None = None) -> dict[str, Any]:
        return self.binding if kind is BINDING else {"metadata": {"name": name}}

    async def patch(self, kind: Any, name: str, patch: dict[str, Any], _type: str) -> dict[str, Any]:
        assert kind is BINDING
        self.binding["metadata"]["annotations"].update(patch["metadata"]["annotations"])
        self.binding["spec"].update(patch["spec"])
        return self.binding


async def test_a_placement_offer_adds_a_copy_and_keeps_one_on_a_cluster_hot_with_its_own_load() -> None:
    """An offer makes a cluster a candidate; the Duplicated copy on aws-dfw, at 92 % by the workload's
    own use, was dropped by the offer's fresh division and re-added by a retry (its Deployment recreated)."""
    obj = _binding("requested", "")
    obj["metadata"]["annotations"].pop(PLACEMENT_OFFERS)
    registry = _Registry(obj)
    res = await Rescheduler(registry, clock=lambda: 1001.0)(  # type: ignore[arg-type]
        RescheduleRequest("offer", "gcp-sin", "no instance meets the SLA for SIN", 0.0, 1.0,
                          {"binding": "video"}))
    assert res.accepted, res.message
    cache = _cache({"aws-dfw": 0.92 * CORES, "azure-lhr": 4.0, "gcp-sin": 4.0})
    rec = decode_binding("/registry/multicluster.io/bindings/video", json.dumps(obj).encode(), 2)
    assert rec is not None and schedule_type(rec) == RESCHEDULE
    spec = SpecCache().spec(rec.name, rec.generation, obj)
    task, _ = decision_task(spec, rec, obj, RESCHEDULE)
    result = Scheduler(Profile.default(), rng_seed=7).schedule(task, cache.snap)
    assert result.phase == "Scheduled", result.message
    assert dict(result.pairs) == {"aws-dfw": 1, "azure-lhr": 1, "gcp-sin": 1}


def test_a_fresh_division_lifts_the_binding_own_measured_use() -> None:
    """Where it uses more than it requests, lifting its requests left its own use on the cluster: the
    cluster looked busy by the binding itself (92 % of 24 cores, 21 of them its own)."""
    cache = _cache({"aws-dfw": 0.92 * CORES, "azure-lhr": 4.0})
    usage = {"aws-dfw": {"cpu": {"used": "21", "requested": "1"}, "memory": {"used": "512Mi", "requested": "1Gi"},
                         "pods": 1, "readyPods": 1}}
    obj = _binding("requested", "", usage)
    used = measured_use(obj)
    assert used == {"aws-dfw": pytest.approx((21.0, 0.5))}
    rec = decode_binding("/registry/multicluster.io/bindings/video", json.dumps(obj).encode(), 2)
    assert rec is not None
    row = cache.snap.index["aws-dfw"]
    before = float(cache.snap.water_level[row])
    assert before == pytest.approx(0.92)
    with cache.excluding(rec.name, rec.placement, rec.requirements, used):
        # 22.08 − 21 cores: the others' use; memory lifted by its request (more than its use)
        assert float(cache.snap.load[row, 0]) == pytest.approx(0.92 * CORES - 21.0)
        assert float(cache.snap.load[row, 1]) == pytest.approx(3.0)
        assert float(cache.snap.water_level[row]) < 0.1
    assert float(cache.snap.water_level[row]) == pytest.approx(before)
    # without a measurement, its requests are what is lifted
    with cache.excluding(rec.name, rec.placement, rec.requirements):
        assert float(cache.snap.load[row, 0]) == pytest.approx(0.92 * CORES - 1.0)
    # a division from scratch (no bonus for what runs) keeps aws-dfw only once its own use is lifted
    task, _ = decision_task(SpecCache().spec(rec.name, rec.generation, obj), rec, obj, RESCHEDULE)
    assert task.rebalance
    sched = Scheduler(Profile.default(), rng_seed=7)
    with cache.excluding(rec.name, rec.placement, rec.requirements, used):
        assert dict(sched.schedule(task, cache.snap).pairs) == {"aws-dfw": 1, "azure-lhr": 1}
    with cache.excluding(rec.name, rec.placement, rec.requirements):
        assert dict(sched.schedule(task, cache.snap).pairs) == {"azure-lhr": 1}
    assert measured_use({"status": {"clusters": [{"cluster": "x", "usage": {"pods": 1, "metricsUnavailable": "no"}},
                                                 {"cluster": "y"}, "junk"]}}) == {}
