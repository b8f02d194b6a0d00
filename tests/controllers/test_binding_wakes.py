"""What brings a Binding back to the binding controller. Not the echo of its own write of a push
member's Work spec (that pass rolled the status up already), nor a cluster's heartbeat or resource
summary; anything else about the Work — its status, another writer's spec, a pull member's Work, a
deletion — and what a pass reads of a cluster do. Nor the echo of its own Binding or template status
write, even when the watch delivers it before the write returns."""

from __future__ import annotations

import asyncio
from collections import deque
from types import SimpleNamespace
from typing import Any

from drods.controllers.binding import BindingController, _binding_change, _WorkBatch
from drods.controllers.settings import MemberSettings
from drods.controllers.work_record import WorkRecord, work_record
from drods.model.kinds import BINDING, WORK, by_kind
from drods.model.work import work_labels, work_name
from drods.store import CasFailed


def record(cluster: str, spec_hash: str, revision: int, **status: Any) -> WorkRecord:
    obj = {"apiVersion": WORK.api_version, "kind": WORK.kind,
           "metadata": {"name": work_name("web", cluster), "labels": work_labels("web", cluster)},
           "spec": {"cluster": cluster, "binding": "web", "hash": spec_hash,
                    "manifests": [{"apiVersion": "v1", "kind": "ConfigMap",
                                   "metadata": {"name": "web", "namespace": "default"}, "data": {"v": spec_hash}}]},
           "status": status}
    rec = work_record(obj, revision)
    assert rec is not None
    return rec


def controller(pull: set[str]) -> BindingController:
    informers = SimpleNamespace(templates={}, catalog=None, interpreter=None, karmada_propagation=())
    fleet = SimpleNamespace(store=None, registry=None, informers=informers, pull=lambda c: c in pull,
                            by_cluster={"east": {"web"}})
    return BindingController(fleet, MemberSettings(), generation=1)  # type: ignore[arg-type]


def woken(ctl: BindingController, old: WorkRecord | None, new: WorkRecord | None) -> bool:
    before = len(ctl.controller.queue)
    ctl._on_work(WORK.key(work_name("web", (new or old).cluster)), old, new)  # type: ignore[union-attr]
    woke = len(ctl.controller.queue) > before
    ctl.controller.queue = type(ctl.controller.queue)()
    return woke


def test_only_the_echo_of_its_own_push_spec_write_is_passed_over() -> None:
    ctl = controller(pull={"edge"})
    key = WORK.key(work_name("web", "east"))
    ctl._own_work_hash[key] = "h2"
    assert not woken(ctl, None, record("east", "h2", 5))  # its own create
    assert key not in ctl._own_work_hash  # only the first event carrying the write is its echo

    ctl._own_work_hash[key] = "h2"
    applied = {"applied": True, "observedHash": "h1"}
    assert not woken(ctl, record("east", "h1", 4, **applied), record("east", "h2", 5, **applied))  # its update
    assert woken(ctl, record("east", "h1", 4, **applied), record("east", "h2", 5, **applied))  # once only

    for old, new in ((record("east", "h2", 5), record("east", "h2", 6, applied=True, observedHash="h2")),  # status
                     (record("east", "h2", 5), record("east", "h3", 6)),  # another writer's spec
                     (None, record("east", "h2", 5, applied=True, observedHash="h2")),  # created with a status
                     (record("east", "h2", 5), None)):  # deleted
        ctl._own_work_hash[key] = "h2"
        assert woken(ctl, old, new)
    assert key not in ctl._own_work_hash  # forgotten with the Work

    ctl._own_work_hash[WORK.key(work_name("web", "edge"))] = "h2"
    assert woken(ctl, None, record("edge", "h2", 5))  # a pull member's: it rolls up to "waiting for the agent"


def cluster(labels: dict[str, str], ready: str = "True", beat: str = "t1", **status: Any) -> dict[str, Any]:
    return {"apiVersion": "multicluster.io/v1alpha1", "kind": "Cluster",
            "metadata": {"name": "east", "labels": labels, "resourceVersion": "7"},
            "spec": {"region": "us-east-1", "syncMode": "Push"},
            "status": {"conditions": [{"type": "Ready", "status": ready, "lastHeartbeatTime": beat}], **status}}


def test_a_cluster_wakes_its_bindings_only_for_what_their_pass_reads() -> None:
    ctl = controller(pull=set())

    def wakes(old: dict[str, Any], new: dict[str, Any]) -> bool:
        before = len(ctl.controller.queue)
        ctl._on_cluster("/clusters/east", old, new)
        woke = len(ctl.controller.queue) > before
        ctl.controller.queue = type(ctl.controller.queue)()
        return woke

    base = cluster({"tier": "a"}, resourceSummary={"allocated": {"cpu": "1"}})
    assert not wakes(base, cluster({"tier": "a"}, beat="t2", resourceSummary={"allocated": {"cpu": "2"}}))
    assert wakes(base, cluster({"tier": "b"}, resourceSummary={"allocated": {"cpu": "1"}}))  # overrides select by it
    assert wakes(base, cluster({"tier": "a"}, ready="False", resourceSummary={"allocated": {"cpu": "1"}}))
    assert wakes(base, {**base, "spec": {"region": "eu-west-1", "syncMode": "Push"}})  # topology
    assert wakes(base, {**base, "spec": {"region": "us-east-1", "syncMode": "Pull"}})


def binding_doc(revision: int, phase: str) -> dict[str, Any]:
    return {"apiVersion": "multicluster.io/v1alpha1", "kind": "Binding",
            "metadata": {"name": "web", "resourceVersion": str(revision)}, "spec": {}, "status": {"phase": phase}}


def test_the_echo_of_its_own_binding_write_is_passed_over_even_when_the_watch_delivers_it_first() -> None:
    """The store fans a write's event out before the writer resumes: the echo must still be known."""
    ctl = controller(pull=set())
    key = BINDING.key("web")
    before, after = binding_doc(7, "Scheduled"), binding_doc(8, "Propagated")

    class Store:
        other_writer_first = False

        async def put(self, k: str, value: bytes, expect_revision: int) -> int:
            if self.other_writer_first:  # another writer's change from 7 lands first: this write fails
                ctl._on_binding(k, before, binding_doc(8, "Failed"))
                raise CasFailed(k, None)
            ctl._on_binding(k, before, after)  # the echo, before put returns
            return 8

    store = Store()
    ctl.store = store  # type: ignore[assignment]

    def store_binding() -> bool:
        b = {**before, "metadata": dict(before["metadata"])}
        assert _binding_change(b, before["status"], after["status"], deleting=False, gone=False, holds=False) == "put"
        return asyncio.run(ctl._store_binding("web", b, 7, _WorkBatch())) is not None

    assert store_binding()
    assert len(ctl.controller.queue) == 0  # no pass for its own write
    ctl._on_binding(key, after, binding_doc(9, "Running"))  # the next change is someone else's: news
    assert len(ctl.controller.queue) == 1
    ctl.controller.queue = type(ctl.controller.queue)()

    store.other_writer_first = True
    assert not store_binding()  # the write failed: the pass runs again over what the store holds
    ctl._on_binding(key, binding_doc(8, "Failed"), binding_doc(9, "Failed"))  # and later changes wake it
    assert len(ctl.controller.queue) == 1


def test_the_echo_of_its_own_template_status_write_is_passed_over_even_when_the_watch_delivers_it_first() -> None:
    ctl = controller(pull=set())
    kind = by_kind("apps/v1", "Deployment")
    assert kind is not None
    key = kind.key("web", "default")
    ctl.by_template[key] = {"web"}

    def deployment(revision: int, ready: int) -> dict[str, Any]:
        return {"apiVersion": "apps/v1", "kind": "Deployment",
                "metadata": {"name": "web", "namespace": "default", "resourceVersion": str(revision)},
                "spec": {"replicas": 2}, "status": {"readyReplicas": ready}}

    class Registry:
        async def update_status(self, k: Any, name: str, status: dict[str, Any], ns: str | None, *,
                                resource_version: int, current: dict[str, Any]) -> dict[str, Any]:
            out = {**current, "metadata": {**current["metadata"], "resourceVersion": "12"}, "status": status}
            ctl._on_template(key, current, out)  # the echo, before update_status returns
            return out

    ctl.registry = Registry()  # type: ignore[assignment]
    template = deployment(11, 1)
    assert not asyncio.run(ctl._put_template_status(kind, template, template["status"], {"readyReplicas": 2}))
    assert len(ctl.controller.queue) == 0
    ctl._on_template(key, deployment(12, 2), {**deployment(13, 2), "spec": {"replicas": 3}})  # a user's change
    assert len(ctl.controller.queue) == 1


def test_a_status_change_alone_brings_the_pass_back_after_the_coalescing_window() -> None:
    """Applied, observed and ready reported in quick succession are rolled up in one pass."""
    ctl = controller(pull=set())
    key = WORK.key(work_name("web", "east"))
    first = record("east", "h2", 5, applied=True, observedHash="h2")
    for i, ready in enumerate((0, 1, 2)):  # three status reports within the window
        ctl._on_work(key, first, record("east", "h2", 6 + i, applied=True, observedHash="h2", readyReplicas=ready))
    assert len(ctl.controller.queue) == 1
    assert ctl.controller.queue._queue == deque()  # not yet: it waits for the window
    ctl._on_work(key, first, record("east", "h3", 9))  # another writer's spec: at once
    assert list(ctl.controller.queue._queue) == ["web"]
