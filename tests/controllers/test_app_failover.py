"""The application failover controller on an injectable clock: a copy unhealthy past the policy's
toleration gets a graceful eviction task (with the preserved state) and a re-placement from
scratch in one write; a copy that recovers in time stays; and the binding controller's purge of
the old copy follows the task's mode."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, cast

import pytest

from drods.controllers import app_failover
from drods.controllers.app_failover import ApplicationFailover
from drods.controllers.binding import BindingController, _Retiring
from drods.controllers.fleet import MemberFleet
from drods.controllers.rescheduler import Rescheduler
from drods.controllers.work_record import WorkRecord, work_record
from drods.model.app_failover import GracefulEvictionTask, label_state
from drods.model.kinds import BINDING
from drods.registry.objects import ObjectRegistry

Obj = dict[str, Any]


@dataclass
class _Informer:
    cache: dict[str, Obj] = field(default_factory=dict)


@dataclass
class _Fleet:
    bindings: _Informer = field(default_factory=_Informer)
    works: dict[str, dict[str, WorkRecord]] = field(default_factory=dict)

    def works_of(self, binding: str) -> dict[str, WorkRecord]:
        return self.works.get(binding, {})


@dataclass
class _Registry:
    patches: list[tuple[str, Obj]] = field(default_factory=list)

    async def patch(self, kind: Any, name: str, patch: Obj, content_type: str) -> Obj:
        self.patches.append((name, patch))
        return {}


FAILOVER = {"application": {"decisionConditions": {"tolerationSeconds": 60}, "purgeMode": "Immediately",
                            "statePreservation": {"rules": [{"aliasLabelName": "app.io/revision",
                                                             "jsonPath": "{.updateRevision}"}]}}}


def binding(available_a: int) -> Obj:
    return {"metadata": {"name": "deployment-shop-web"},
            "spec": {"resource": {"apiVersion": "apps/v1", "kind": "Deployment", "namespace": "shop", "name": "web"},
                     "replicas": 4, "failover": FAILOVER},
            "status": {"placement": [{"cluster": "a", "replicas": 2}, {"cluster": "b", "replicas": 2}],
                       "clusters": [{"cluster": "a", "replicas": 2, "applied": True, "availableReplicas": available_a},
                                    {"cluster": "b", "replicas": 2, "applied": True, "availableReplicas": 2}]}}


def work_with_status(status: Obj) -> WorkRecord:
    rec = work_record({"metadata": {"name": "w"}, "spec": {},
                       "status": {"manifests": [{"apiVersion": "apps/v1", "kind": "Deployment", "namespace": "shop",
                                                 "name": "web", "status": status}]}}, 1)
    assert rec is not None
    return rec


def controller(now: list[float]) -> tuple[ApplicationFailover, _Fleet, _Registry]:
    fleet, registry = _Fleet(), _Registry()
    resched = Rescheduler(cast(ObjectRegistry, registry), clock=lambda: now[0])
    ctl = ApplicationFailover(cast(MemberFleet, fleet), resched, clock=lambda: now[0])
    return ctl, fleet, registry


def put(ctl: ApplicationFailover, fleet: _Fleet, obj: Obj) -> None:
    key = BINDING.key(obj["metadata"]["name"])
    fleet.bindings.cache[key] = obj
    ctl._on_binding(key, None, obj)


async def test_a_copy_unhealthy_past_its_toleration_is_moved_with_its_state() -> None:
    now = [1000.0]
    ctl, fleet, registry = controller(now)
    put(ctl, fleet, binding(available_a=0))
    fleet.works["deployment-shop-web"] = {"a": work_with_status({"updateRevision": "web-7f9", "replicas": 2})}
    assert await ctl.tick() == []  # the clock starts
    now[0] = 1059.0
    assert await ctl.tick() == [] and registry.patches == []
    now[0] = 1060.0
    assert await ctl.tick() == [("deployment-shop-web", "a")]
    (name, patch), = registry.patches
    assert name == "deployment-shop-web"
    task, = patch["spec"]["gracefulEvictionTasks"]
    assert task["fromCluster"] == "a" and task["purgeMode"] == "Immediately" and task["replicas"] == 2
    assert task["reason"] == "ApplicationFailure" and task["producer"] == "application-failover"
    assert task["preservedLabelState"] == {"app.io/revision": "web-7f9"}
    assert task["clustersBeforeFailover"] == ["a", "b"] and task["creationTimestamp"] == "1970-01-01T00:17:40Z"
    assert "rescheduleTriggeredAt" in patch["spec"]
    assert patch["metadata"]["annotations"]["multicluster.io/reschedule-reason"].startswith(
        "application failover: the copy in a unhealthy since 1970-01-01T00:16:40Z (toleration 60s)")
    # once the task is stored the cluster is not evicted again
    b = binding(available_a=0)
    b["spec"]["gracefulEvictionTasks"] = patch["spec"]["gracefulEvictionTasks"]
    put(ctl, fleet, b)
    now[0] = 5000.0
    assert await ctl.tick() == [] and len(registry.patches) == 1


async def test_a_copy_that_recovers_in_time_stays_and_its_clock_restarts() -> None:
    now = [0.0]
    ctl, fleet, registry = controller(now)
    put(ctl, fleet, binding(available_a=1))
    await ctl.tick()
    now[0] = 50.0
    put(ctl, fleet, binding(available_a=2))  # healthy again before 60 s
    await ctl.tick()
    now[0] = 70.0
    put(ctl, fleet, binding(available_a=1))  # unhealthy again: counted from 70
    assert await ctl.tick() == []
    now[0] = 129.0
    assert await ctl.tick() == []
    now[0] = 130.0
    assert await ctl.tick() == [("deployment-shop-web", "a")]
    assert len(registry.patches) == 1


async def test_bindings_without_application_failover_are_not_watched() -> None:
    now = [0.0]
    ctl, fleet, registry = controller(now)
    b = binding(available_a=0)
    b["spec"].pop("failover")
    put(ctl, fleet, b)
    assert ctl.watched == set()
    now[0] = 1e6
    assert await ctl.tick() == [] and registry.patches == []


def retire(mode: str, now: float, covered: bool, grace: int | None = None) -> _Retiring:
    out = _Retiring()
    t = GracefulEvictionTask.model_validate({"fromCluster": "a", "purgeMode": mode, "gracePeriodSeconds": grace,
                                             "creationTimestamp": "1970-01-01T00:00:00Z"})
    BindingController._retire_evicted(out, "a", work_with_status({}), t, now, covered)
    return out


def test_the_old_copy_goes_as_the_purge_mode_says() -> None:
    assert list(retire("Immediately", 0.0, covered=False).to_delete) == ["a"]
    gracious = retire("Graciously", 10.0, covered=False, grace=30)
    assert list(gracious.to_mark) == ["a"] and gracious.requeue == 20.0  # looked at again when the grace ends
    assert list(retire("Graciously", 10.0, covered=True, grace=30).to_delete) == ["a"]  # new copies ready
    assert list(retire("Graciously", 30.0, covered=False, grace=30).to_delete) == ["a"]
    never = retire("Never", 1e9, covered=True)
    assert list(never.to_mark) == ["a"] and not never.to_delete and never.requeue is None


def moved(mode: str, *, healthy_b: bool, created: str = "1970-01-01T00:16:40Z") -> Obj:
    """The binding after a move off ``a`` (task stored, re-placed on ``b``), with a label kept earlier."""
    b = binding(available_a=0)
    b["spec"]["gracefulEvictionTasks"] = [
        {"fromCluster": "a", "purgeMode": mode, "producer": "application-failover", "reason": "ApplicationFailure",
         "creationTimestamp": created, "preservedLabelState": {"app.io/revision": "web-7f9"}},
        {"fromCluster": "c", "producer": "TaintManager", "reason": "TaintUntolerated", "purgeMode": "Directly",
         "creationTimestamp": created}]
    b["spec"]["preservedLabelState"] = {"app.io/shard": "2"}
    b["status"] = {"placement": [{"cluster": "b", "replicas": 4}],
                   "clusters": [{"cluster": "b", "replicas": 4, "applied": True,
                                 "availableReplicas": 4 if healthy_b else 1}]}
    return b


async def test_a_finished_move_takes_its_task_off_and_keeps_its_labels() -> None:
    now = [1010.0]
    ctl, fleet, registry = controller(now)
    put(ctl, fleet, moved("Immediately", healthy_b=False))
    fleet.works["deployment-shop-web"] = {"a": work_with_status({}), "b": work_with_status({})}
    await ctl.tick()
    assert registry.patches == []  # the old copy is still there
    del fleet.works["deployment-shop-web"]["a"]
    await ctl.tick()
    assert registry.patches == []  # gone, but the new copies are not healthy yet
    put(ctl, fleet, moved("Immediately", healthy_b=True))
    await ctl.tick()
    (name, patch), = registry.patches
    # the cluster failover's task is another controller's; the labels stay on the new copies
    assert patch == {"spec": {"gracefulEvictionTasks": [moved("Immediately", healthy_b=True)["spec"][
        "gracefulEvictionTasks"][1]], "preservedLabelState": {"app.io/revision": "web-7f9"}}}
    after = moved("Immediately", healthy_b=True)
    after["spec"]["gracefulEvictionTasks"] = patch["spec"]["gracefulEvictionTasks"]
    after["spec"]["preservedLabelState"].update(patch["spec"]["preservedLabelState"])
    assert label_state(after["spec"]) == {"app.io/shard": "2", "app.io/revision": "web-7f9"}


async def test_an_unhealthy_move_ends_with_its_grace_period_and_a_never_task_stays() -> None:
    now = [1000.0 + 599]
    ctl, fleet, registry = controller(now)
    put(ctl, fleet, moved("Gracefully", healthy_b=False))
    await ctl.tick()
    assert registry.patches == []
    now[0] = 1000.0 + 600  # the default grace period (600 s) from the task's creation
    await ctl.tick()
    assert len(registry.patches) == 1
    ctl, fleet, registry = controller([1e9])
    put(ctl, fleet, moved("Never", healthy_b=True))
    await ctl.tick()
    assert registry.patches == []


async def test_one_binding_that_fails_does_not_stop_the_others(monkeypatch: pytest.MonkeyPatch) -> None:
    now = [0.0]
    ctl, fleet, registry = controller(now)
    for name in ("a-broken", "b-fine"):
        b = binding(available_a=0)
        b["metadata"]["name"] = name
        put(ctl, fleet, b)
    real = app_failover.preserved_state

    def state(fleet: Any, name: str, *args: Any) -> dict[str, str]:
        if name == "a-broken":
            raise RuntimeError("a status no rule can read")
        return real(fleet, name, *args)

    monkeypatch.setattr(app_failover, "preserved_state", state)
    await ctl.tick()
    now[0] = 60.0
    assert await ctl.tick() == [("b-fine", "a")]
