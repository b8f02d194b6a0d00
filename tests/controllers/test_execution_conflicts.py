"""A member's 409 on an apply (conflicts are forced, so only a concurrent write that won can cause
one) is retried at the short back-off, not held for 30 s and reported as permanent — which would
fail the Binding at once. A refusal the same apply meets again (422) stays permanent. A first apply
reads the member's object only when the member's followed foreign names hold its name."""

from __future__ import annotations

import asyncio
import dataclasses
from dataclasses import dataclass, field
from types import SimpleNamespace
from typing import Any

import pytest

from drods.controllers.apply_records import ApplyRecords
from drods.controllers.execution import Execution
from drods.controllers.settings import MemberSettings
from drods.controllers.work_record import WorkRecord, work_record
from drods.members.client import MemberError
from drods.members.foreign_names import ForeignNames
from drods.model.interpreter import Interpreter

DEPLOYMENT = {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web", "namespace": "default"},
              "spec": {"replicas": 2}}


def work() -> WorkRecord:
    doc = {"metadata": {"name": "web.aws", "generation": 2},
           "spec": {"cluster": "aws", "binding": "web", "hash": "h", "manifests": [DEPLOYMENT]}}
    record = work_record(doc, 1)
    assert record is not None
    return record


@dataclass
class Member:
    """Refuses the first apply with ``status``, then takes them."""

    status: int
    refusals: int = 1
    applied: list[dict[str, Any]] = field(default_factory=list)

    async def get(self, api_version: str, kind: str, name: str, namespace: str | None = None) -> None:
        return None  # no copy yet: the first apply creates it

    def foreign_names(self) -> ForeignNames:
        return ForeignNames(self, max_kinds=0)  # type: ignore[arg-type] # follows nothing: first applies read

    async def apply(self, manifest: dict[str, Any]) -> dict[str, Any]:
        if self.refusals:
            self.refusals -= 1
            raise MemberError("aws", self.status, "Conflict" if self.status == 409 else "Invalid", "refused")
        self.applied.append(manifest)
        return {**manifest, "metadata": {**manifest["metadata"], "labels": {}}, "status": {}}


@dataclass
class Fleet:
    written: list[dict[str, Any]] = field(default_factory=list)
    owned: dict[str, set[Any]] = field(default_factory=lambda: {"aws": set()})
    ns_ok: dict[str, set[str]] = field(default_factory=lambda: {"aws": {"default"}})
    informers: Any = field(default_factory=lambda: SimpleNamespace(interpreter=Interpreter()))
    cleanups: Any = field(default_factory=lambda: SimpleNamespace(cache={}))
    registry: Any = None
    applies: ApplyRecords = field(default_factory=ApplyRecords)

    async def write_work_status(self, record: WorkRecord, status: dict[str, Any], body: Any = None) -> int:
        self.written.append(status)
        return 100 + len(self.written)  # the revision written


@pytest.mark.parametrize(("status", "permanent", "longest_wait"), [(409, False, 1.0), (422, True, 30.0)])
async def test_a_conflict_is_retried_soon_and_an_invalid_manifest_is_not(status: int, permanent: bool,
                                                                         longest_wait: float) -> None:
    fleet, member, now = Fleet(), Member(status), [100.0]
    execution = Execution(fleet, MemberSettings(), clock=lambda: now[0])  # type: ignore[arg-type]
    w = work()
    whole = {"spec": {"manifests": [DEPLOYMENT]}}

    wait = await execution._apply("aws", w.key, w, whole, member, None)  # type: ignore[arg-type]
    assert wait is not None and wait <= longest_wait
    assert not fleet.written[-1].get("applied")
    assert bool(fleet.written[-1].get("permanent")) is permanent
    assert not member.applied

    now[0] += wait
    assert await execution._apply("aws", w.key, w, whole, member, None) is None  # type: ignore[arg-type]
    assert fleet.written[-1]["applied"] is True
    assert fleet.written[-1]["observedGeneration"] == 2  # which write of the spec the member holds
    assert [m["metadata"]["name"] for m in member.applied] == ["web"]


@dataclass
class RacedFleet(Fleet):
    """The work-status controller records the member's copy between the apply and its status write."""

    stored: WorkRecord | None = None
    refused: int = 1

    async def write_work_status(self, record: WorkRecord, status: dict[str, Any], body: Any = None) -> int:
        if self.refused:
            self.refused -= 1
            return 0  # the compare-and-swap lost: the Work moved on
        self.written.append(status)
        return 100 + len(self.written)

    async def stored_work(self, key: str) -> tuple[WorkRecord, dict[str, Any]] | None:
        return (self.stored, {}) if self.stored is not None else None


def recorded(spec_hash: str, generation: int) -> WorkRecord:
    """The Work as the work-status controller left it: the member's copy observed, "applied" not yet said."""
    copy = {"apiVersion": "apps/v1", "kind": "Deployment", "namespace": "default", "name": "web",
            "status": {"readyReplicas": 2}}
    doc = {"metadata": {"name": "web.aws", "generation": generation},
           "spec": {"cluster": "aws", "binding": "web", "hash": spec_hash, "manifests": [DEPLOYMENT]},
           "status": {"manifests": [copy]}}
    record = work_record(doc, 5)
    assert record is not None
    return record


async def test_an_apply_whose_status_write_lost_to_the_members_report_is_recorded_not_repeated() -> None:
    member, w = Member(200, refusals=0), work()
    fleet = RacedFleet(stored=recorded("h", 2))
    execution = Execution(fleet, MemberSettings(), clock=lambda: 100.0)  # type: ignore[arg-type]
    assert await execution._apply("aws", w.key, w, {"spec": {"manifests": [DEPLOYMENT]}}, member, None) is None  # type: ignore[arg-type]
    assert len(member.applied) == 1 and len(fleet.written) == 1
    st = fleet.written[0]
    assert st["applied"] is True and st["observedHash"] == "h" and st["observedGeneration"] == 2
    assert st["manifests"][0]["status"] == {"readyReplicas": 2}  # the report's observation, the newer
    # the watch's view of the Work waits for that record (`apply_records`) before it writes again
    assert fleet.applies.pending(w) and not fleet.applies.pending(dataclasses.replace(w, revision=101))

    # the spec moved on meanwhile: nothing is written over it (the watch brings the new spec to apply)
    fleet = RacedFleet(stored=recorded("h2", 3))
    execution = Execution(fleet, MemberSettings(), clock=lambda: 100.0)  # type: ignore[arg-type]
    assert await execution._apply("aws", w.key, w, {"spec": {"manifests": [DEPLOYMENT]}}, member, None) is None  # type: ignore[arg-type]
    assert fleet.written == []


async def test_an_apply_keeps_the_use_last_measured_of_the_workload() -> None:
    """A new spec applied keeps the workload's last usage reading on the Work (dropped, the next reading
    wrote it back, and the Binding's and the template's usage went and came back with it)."""
    usage = {"pods": 2, "readyPods": 2, "cpu": {"used": "150m", "requested": "200m"}}
    fleet, member = Fleet(), Member(200, refusals=0)
    execution = Execution(fleet, MemberSettings(), clock=lambda: 100.0)  # type: ignore[arg-type]
    doc = {"metadata": {"name": "web.aws", "generation": 3},
           "spec": {"cluster": "aws", "binding": "web", "hash": "h3", "manifests": [DEPLOYMENT]},
           "status": {"applied": True, "observedHash": "h2", "manifests": [
               {"apiVersion": "v1", "kind": "ConfigMap", "namespace": "default", "name": "web",
                "usage": {"pods": 9}},
               {"apiVersion": "apps/v1", "kind": "Deployment", "namespace": "default", "name": "web",
                "status": {"readyReplicas": 2}, "usage": usage}]}}
    w = work_record(doc, 7)
    assert w is not None
    assert await execution._apply("aws", w.key, w, {"spec": doc["spec"]}, member, None) is None  # type: ignore[arg-type]
    (st,) = fleet.written
    assert st["applied"] is True and st["observedHash"] == "h3"
    assert st["manifests"][0]["usage"] == usage  # the Deployment's own, not another manifest's

    fresh = work()  # never measured: nothing made up
    assert await execution._apply("aws", fresh.key, fresh, {"spec": {"manifests": [DEPLOYMENT]}}, member,  # type: ignore[arg-type]
                                  None) is None
    assert "usage" not in fleet.written[-1]["manifests"][0]


@dataclass
class FollowedMember(Member):
    """A member whose objects without DRO-DS's label (``theirs``: names) are followed by watch; counts reads."""

    name: str = "aws"
    theirs: list[str] = field(default_factory=list)
    reads: list[str] = field(default_factory=list)
    followed: ForeignNames | None = None

    async def get(self, api_version: str, kind: str, name: str, namespace: str | None = None) -> Any:
        self.reads.append(name)
        return {"metadata": {"name": name, "labels": {}}} if name in self.theirs else None

    def foreign_names(self) -> ForeignNames:
        if self.followed is None:
            self.followed = ForeignNames(self)  # type: ignore[arg-type]
        return self.followed

    async def resource(self, api_version: str, kind: str) -> str:
        return kind

    async def list_versioned(self, kind: str, selector: str | None = None) -> tuple[list[Any], str]:
        return [{"metadata": {"name": n, "namespace": "default"}} for n in self.theirs], "1"

    async def watch_from(self, *args: Any) -> str:
        await asyncio.Event().wait()
        return "1"


async def test_a_first_apply_reads_the_member_only_for_a_name_someone_else_holds() -> None:
    for theirs, reads, applied in (([], [], ["web"]), (["web"], ["web"], [])):
        fleet, member = Fleet(), FollowedMember(200, refusals=0, theirs=theirs)
        execution = Execution(fleet, MemberSettings(), clock=lambda: 100.0)  # type: ignore[arg-type]
        names = member.foreign_names()
        names.absent("apps/v1", "Deployment", "-", "default")
        async with asyncio.timeout(5):
            while not names.following("apps/v1", "Deployment"):  # noqa: ASYNC110 - polled with a deadline
                await asyncio.sleep(0.01)
        w = work()
        await execution._apply("aws", w.key, w, {"spec": {"manifests": [DEPLOYMENT]}}, member, None)  # type: ignore[arg-type]
        assert member.reads == reads and [m["metadata"]["name"] for m in member.applied] == applied
        if theirs:
            assert "not managed by DRO-DS" in fleet.written[-1]["message"] and fleet.written[-1]["permanent"]
        await names.stop()
