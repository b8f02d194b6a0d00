"""The resource detector does not take its informer's older copy of a Binding for the stored one."""

from __future__ import annotations

import copy
import json
from types import SimpleNamespace
from typing import Any

from drods.controllers.detector import ResourceDetector
from drods.model.detection import decode_policy
from drods.model.kinds import BINDING, PROPAGATION_POLICY, by_kind

POLICY = {"apiVersion": "multicluster.io/v1alpha1", "kind": "PropagationPolicy", "metadata": {"name": "p"},
          "spec": {"resourceSelectors": [{"apiVersion": "apps/v1", "kind": "Deployment", "namespace": "default"}],
                   "placement": {"replicaScheduling": {"replicaSchedulingType": "Divided"}}}}
DEPLOYMENT = by_kind("apps/v1", "Deployment")
assert DEPLOYMENT is not None
WEB = DEPLOYMENT.key("web", "default")


def deployment(replicas: int) -> dict[str, Any]:
    return {"apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": "web", "namespace": "default", "uid": "u1", "resourceVersion": "1"},
            "spec": {"replicas": replicas, "template": {"spec": {"containers": [{"name": "c", "image": "x"}]}}}}


class Registry:
    """The store as far as the detector writes it: each write a new revision, kept here."""

    store: Any = None  # no Event is written through it here

    def __init__(self) -> None:
        self.rev = 10
        self.stored: dict[str, Any] | None = None
        self.writes = 0

    async def create(self, kind: Any, obj: dict[str, Any]) -> dict[str, Any]:
        return self._write(obj)

    async def update(self, kind: Any, obj: dict[str, Any]) -> dict[str, Any]:
        return self._write(obj)

    def _write(self, obj: dict[str, Any]) -> dict[str, Any]:
        self.rev += 1
        self.writes += 1
        self.stored = copy.deepcopy(obj)
        self.stored["metadata"]["resourceVersion"] = str(self.rev)
        return copy.deepcopy(self.stored)


def placed_by_policy(replicas: int) -> tuple[Registry, Any, Any, ResourceDetector]:
    """A detector over one Deployment of ``replicas`` that POLICY places, with its informers' caches."""
    registry = Registry()
    policy = decode_policy(PROPAGATION_POLICY)(SimpleNamespace(value=json.dumps(POLICY).encode()))
    workloads = SimpleNamespace(cache={WEB: deployment(replicas)})
    bindings = SimpleNamespace(cache={})
    detector = ResourceDetector(registry, workloads=[workloads],  # type: ignore[arg-type, list-item]
                                policies=[SimpleNamespace(cache={"p": policy})],  # type: ignore[list-item]
                                bindings=bindings)  # type: ignore[arg-type]
    return registry, workloads, bindings, detector


async def test_a_scale_back_while_the_informer_lags_its_own_write_is_not_lost() -> None:
    registry, workloads, bindings, detector = placed_by_policy(4)
    assert await detector.reconcile(WEB) is None and registry.writes == 1  # created with 4 replicas
    assert registry.stored is not None
    key = BINDING.key(registry.stored["metadata"]["name"])
    # the informer has not brought the create yet: no second create, a look again shortly
    assert await detector.reconcile(WEB) == 0.05 and registry.writes == 1
    seen_4 = copy.deepcopy(registry.stored)
    bindings.cache[key] = seen_4
    workloads.cache[WEB] = deployment(1)
    assert await detector.reconcile(WEB) is None and registry.writes == 2
    assert registry.stored["spec"]["replicas"] == 1
    # scaled back to 4 before the informer brought the write of 1: its copy (4) equals what is
    # wanted, but the store holds 1 — the detector waits for its informer instead of taking it as done
    workloads.cache[WEB] = deployment(4)
    assert await detector.reconcile(WEB) == 0.05 and registry.writes == 2
    bindings.cache[key] = copy.deepcopy(registry.stored)  # the informer catches up
    assert await detector.reconcile(WEB) is None and registry.writes == 3
    assert registry.stored["spec"]["replicas"] == 4


class Queue:
    def __init__(self) -> None:
        self.added: list[str] = []

    def add(self, key: str, *_: Any) -> None:
        self.added.append(key)


async def test_a_workload_no_policy_places_costs_no_store_read_and_a_stray_binding_is_judged_on_arrival() -> None:
    """A workload with no policy (every ConfigMap of a cold start) is settled from the informer alone;
    a detector-made Binding for it that another writer (a previous leader) stored and the informer
    brings later enqueues the workload, whose pass deletes it."""

    class Deleting(Registry):
        def __init__(self) -> None:
            super().__init__()
            self.deleted: list[str] = []

        async def try_get(self, kind: Any, name: str) -> None:
            raise AssertionError("no store read")

        async def delete(self, kind: Any, name: str, **_: Any) -> None:
            self.deleted.append(name)

    registry = Deleting()
    workloads = SimpleNamespace(cache={WEB: deployment(2)})
    bindings = SimpleNamespace(cache={})
    detector = ResourceDetector(registry, workloads=[workloads],  # type: ignore[arg-type, list-item]
                                policies=[SimpleNamespace(cache={})], bindings=bindings)  # type: ignore[list-item, arg-type]
    assert await detector.reconcile(WEB) is None and registry.deleted == [] and registry.writes == 0

    queue = Queue()
    detector.controller.queue = queue  # type: ignore[assignment]
    stray = {"apiVersion": "multicluster.io/v1alpha1", "kind": "Binding",
             "metadata": {"name": "deployment-default-web", "resourceVersion": "7",
                          "labels": {"multicluster.io/managed-by": "resource-detector"}},
             "spec": {"resource": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "web",
                                   "namespace": "default"}}}
    key = BINDING.key("deployment-default-web")
    bindings.cache[key] = stray
    detector._binding_changed(key, None, stray)
    assert queue.added == [WEB]
    assert await detector.reconcile(WEB) is None and registry.deleted == ["deployment-default-web"]


async def test_a_new_leader_deletes_the_binding_of_a_workload_deleted_while_none_led() -> None:
    """The leader was killed; the Deployment was deleted before the next one led: its Binding stayed, placed
    and Ready, for good — the new leader queued only the workloads its informers held."""

    class Deleting(Registry):
        def __init__(self) -> None:
            super().__init__()
            self.deleted: list[str] = []

        async def delete(self, kind: Any, name: str, **_: Any) -> None:
            self.deleted.append(name)

    registry = Deleting()
    orphan = {"apiVersion": "multicluster.io/v1alpha1", "kind": "Binding",
              "metadata": {"name": "deployment-default-gone", "resourceVersion": "7",
                           "labels": {"multicluster.io/managed-by": "resource-detector"}},
              "spec": {"resource": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "gone",
                                    "namespace": "default"}}}
    handmade = {**orphan, "metadata": {"name": "mine", "resourceVersion": "8", "labels": {}}}
    bindings = SimpleNamespace(cache={BINDING.key("deployment-default-gone"): orphan, BINDING.key("mine"): handmade})
    detector = ResourceDetector(registry, workloads=[SimpleNamespace(cache={WEB: deployment(2)})],  # type: ignore[arg-type, list-item]
                                policies=[SimpleNamespace(cache={})], bindings=bindings)  # type: ignore[list-item, arg-type]
    queue = Queue()
    detector.controller.queue = queue  # type: ignore[assignment]
    detector.queue_everything()
    gone = by_kind("apps/v1", "Deployment").key("gone", "default")  # type: ignore[union-attr]
    assert sorted(queue.added) == sorted([WEB, gone]), queue.added  # not the hand-made Binding's workload
    for key in queue.added:
        assert await detector.reconcile(key) is None
    assert registry.deleted == ["deployment-default-gone"]


async def test_a_binding_whose_spec_another_writer_edited_is_written_back_at_once() -> None:
    """A PATCH of a template's Binding (``replicas: 5`` where the Deployment asks for 3) ran 5 replicas until
    some later pass over the template; the edit enqueues the template, whose pass writes its spec back. The
    detector's own write enqueues nothing, nor does a status change."""
    registry, workloads, bindings, detector = placed_by_policy(3)
    queue = Queue()
    detector.controller.queue = queue  # type: ignore[assignment]
    assert await detector.reconcile(WEB) is None and registry.stored is not None
    own = copy.deepcopy(registry.stored)
    key = BINDING.key(own["metadata"]["name"])
    bindings.cache[key] = own
    detector._binding_changed(key, None, own)  # its own create arriving
    placed = {**copy.deepcopy(own), "status": {"phase": "Scheduled"}}
    placed["metadata"]["resourceVersion"] = "20"
    detector._binding_changed(key, own, placed)  # the scheduler's status write
    assert queue.added == []
    edited = copy.deepcopy(placed)
    edited["spec"]["replicas"] = 5
    edited["metadata"]["resourceVersion"] = "21"
    bindings.cache[key] = edited
    detector._binding_changed(key, placed, edited)
    assert queue.added == [WEB]
    assert await detector.reconcile(WEB) is None and registry.stored["spec"]["replicas"] == 3
    written = copy.deepcopy(registry.stored)
    bindings.cache[key] = written
    detector._binding_changed(key, edited, written)  # the write back arriving: nothing more to do
    assert queue.added == [WEB]
    triggered = copy.deepcopy(written)
    triggered["spec"]["rescheduleTriggeredAt"] = "2026-12-08T00:00:00.000Z"  # a failover's: its own field
    triggered["metadata"]["resourceVersion"] = "30"
    detector._binding_changed(key, written, triggered)
    assert queue.added == [WEB]
