"""The binding controller does not pass over a Binding again for the echo of its own write of a
push member's Work spec (that pass rolled the status up already); anything else about the Work —
its status, another writer's spec, a pull member's Work, a deletion — brings the Binding back."""

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
    fleet = SimpleNamespace(store=None, registry=None, informers=informers, pull=lambda c: c in pull)
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
    applied = {"applied": True, "observedHash": "h1"}
    assert not woken(ctl, record("east", "h1", 4, **applied), record("east", "h2", 5, **applied))  # its update

    assert woken(ctl, record("east", "h2", 5), record("east", "h2", 6, applied=True, observedHash="h2"))  # status
    assert woken(ctl, record("east", "h2", 5), record("east", "h3", 6))  # another writer's spec
    assert woken(ctl, None, record("east", "h2", 5, applied=True, observedHash="h2"))  # created with a status
    assert woken(ctl, record("east", "h2", 5), None)  # deleted
    assert key not in ctl._own_work_hash  # and forgotten with it

    ctl._own_work_hash[WORK.key(work_name("web", "edge"))] = "h2"
    assert woken(ctl, None, record("edge", "h2", 5))  # a pull member's: it rolls up to "waiting for the agent"
