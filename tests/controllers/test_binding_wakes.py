"""What brings a Binding back to the binding controller. Not the echo of its own write of a push
member's Work spec (that pass rolled the status up already), nor a cluster's heartbeat or resource
summary; anything else about the Work — its status, another writer's spec, a pull member's Work, a
deletion — and what a pass reads of a cluster do."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

from drods.controllers.binding import BindingController
from drods.controllers.settings import MemberSettings
from drods.controllers.work_record import WorkRecord, work_record
from drods.model.kinds import WORK
from drods.model.work import work_labels, work_name


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
    informers = SimpleNamespace(templates={}, catalog=None, interpreter=None)
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
