"""A member copy's watched change whose status write loses the compare-and-swap (the Work changed
since it was cached: an apply had just recorded itself) is written once the newer Work is cached,
not left to the next list a resync period later."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from types import SimpleNamespace
from typing import Any

from drods.controllers.apply_records import ApplyRecords
from drods.controllers.settings import MemberSettings
from drods.controllers.work_record import WorkRecord, work_record
from drods.controllers.workstatus import WorkStatusController
from drods.machinery.fence import Fence, LeadershipLost
from drods.model.interpreter import Interpreter

COPY = {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web", "namespace": "default",
                                                                      "resourceVersion": "7"},
        "spec": {"replicas": 2}, "status": {"replicas": 2, "readyReplicas": 2, "availableReplicas": 2}}


def work(revision: int, manifests: list[dict[str, Any]] | None = None) -> WorkRecord:
    doc = {"metadata": {"name": "web.aws"},
           "spec": {"cluster": "aws", "binding": "web", "hash": "h", "manifests": [
               {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web", "namespace": "default"}}]},
           "status": {"applied": True, "observedHash": "h", "appliedTime": "2026-01-01T00:00:00.000Z",
                      **({"manifests": manifests} if manifests else {})}}
    record = work_record(doc, revision)
    assert record is not None
    return record


@dataclass
class Fleet:
    """The Work view lags one write behind: the first status write finds revision 1 already replaced."""

    cached: WorkRecord = field(default_factory=lambda: work(1))
    stored_revision: int = 2
    written: list[dict[str, Any]] = field(default_factory=list)
    informers: Any = field(default_factory=lambda: SimpleNamespace(interpreter=Interpreter()))
    owned: dict[str, set[Any]] = field(default_factory=dict)
    landed: asyncio.Event = field(default_factory=asyncio.Event)
    applies: ApplyRecords = field(default_factory=ApplyRecords)

    @property
    def works_by_cluster(self) -> dict[str, set[str]]:
        return {"aws": {self.cached.key}}

    def work(self, key: str) -> WorkRecord | None:
        return self.cached if key == self.cached.key else None

    def live_works_delivering(self, cluster: str, main: Any) -> list[WorkRecord]:
        return [self.cached] if cluster == "aws" and main == self.cached.main else []

    async def write_work_status(self, record: WorkRecord, status: dict[str, Any]) -> int:
        if record.revision != self.stored_revision:
            self.cached = work(self.stored_revision)  # the watch brings the newer Work a moment later
            return 0
        self.written.append(status)
        self.landed.set()
        self.stored_revision += 1
        return self.stored_revision


async def test_a_status_write_that_lost_the_race_is_made_again_over_the_newer_work() -> None:
    fleet = Fleet()
    controller = WorkStatusController(fleet, MemberSettings())  # type: ignore[arg-type]
    events: asyncio.Queue[tuple[str, Any]] = asyncio.Queue()
    consumer = asyncio.create_task(controller._consume("aws", events))
    try:
        events.put_nowait(("MODIFIED", controller.seen_copy(COPY)))
        try:
            await asyncio.wait_for(fleet.landed.wait(), 5)
        except TimeoutError:
            raise AssertionError("the status was never written after the lost compare-and-swap") from None
        [manifest] = fleet.written[0]["manifests"]
        assert manifest["name"] == "web" and manifest["status"]["readyReplicas"] == 2
    finally:
        consumer.cancel()
        await asyncio.gather(consumer, return_exceptions=True)


async def test_a_write_refused_for_a_lost_lease_ends_the_consumer_instead_of_being_logged_per_event() -> None:
    class Deposed(Fleet):
        async def write_work_status(self, record: WorkRecord, status: dict[str, Any]) -> int:
            raise LeadershipLost(Fence("/leases/member-controllers", 7))

    fleet = Deposed(cached=work(2))
    controller = WorkStatusController(fleet, MemberSettings())  # type: ignore[arg-type]
    events: asyncio.Queue[tuple[str, Any]] = asyncio.Queue()
    consumer = asyncio.create_task(controller._consume("aws", events))
    events.put_nowait(("MODIFIED", controller.seen_copy(COPY)))
    try:
        await asyncio.wait_for(asyncio.shield(consumer), 5)
    except LeadershipLost:
        pass
    else:
        raise AssertionError("the consumer went on after its term ended")
    finally:
        consumer.cancel()
        await asyncio.gather(consumer, return_exceptions=True)


class CountedApplies(ApplyRecords):
    """The fleet's apply records, counting how often the consumer asked about an apply in flight."""

    def __init__(self) -> None:
        super().__init__()
        self.asked = 0

    def pending(self, work: WorkRecord) -> bool:
        self.asked += 1
        return super().pending(work)


async def _until(what: Any, deadline: float = 5.0) -> None:
    loop = asyncio.get_running_loop()
    end = loop.time() + deadline
    while not what():
        if loop.time() > end:
            raise AssertionError("not reached in time")
        await asyncio.sleep(0.01)


async def test_a_copys_change_seen_during_an_apply_is_left_to_the_applys_record_then_written_only_if_newer() -> None:
    """The execution controller's record of an apply and the watch's event of the same change both wrote
    the Work, and one lost its compare-and-swap nearly every time: while the apply is in flight, and
    until the view holds its record, the event is held; then what the record already says is not
    written again, and what is newer is written once, over the record."""
    applies = CountedApplies()
    fleet = Fleet(cached=work(1), stored_revision=1, applies=applies)
    controller = WorkStatusController(fleet, MemberSettings())  # type: ignore[arg-type]
    events: asyncio.Queue[tuple[str, Any]] = asyncio.Queue()
    consumer = asyncio.create_task(controller._consume("aws", events))
    try:
        # the copy as the apply left it: the record says the same, nothing is written by the watch
        applies.started(fleet.cached.key)
        listed = controller.seen_copy(COPY)
        events.put_nowait(("MODIFIED", listed))
        await _until(lambda: applies.asked >= 3)  # looked at again and again while the apply runs
        assert fleet.written == []
        fleet.cached, fleet.stored_revision = work(2, [listed.seen(None)]), 2  # the apply recorded it
        applies.recorded(fleet.cached.key, 2)
        await _until(lambda: len(applies) == 0)
        assert fleet.written == []

        # the copy moved on while the next apply ran: written once, over the apply's record
        applies.started(fleet.cached.key)
        newer = {**COPY, "metadata": {**COPY["metadata"], "resourceVersion": "9"},
                 "status": {**COPY["status"], "readyReplicas": 1}}
        events.put_nowait(("MODIFIED", controller.seen_copy(newer)))
        asked = applies.asked
        await _until(lambda: applies.asked >= asked + 2)
        assert fleet.written == []
        fleet.cached, fleet.stored_revision = work(3, [listed.seen(None)]), 3
        applies.recorded(fleet.cached.key, 3)
        await asyncio.wait_for(fleet.landed.wait(), 5)
        [manifest] = fleet.written[0]["manifests"]
        assert manifest["status"]["readyReplicas"] == 1 and len(fleet.written) == 1
    finally:
        consumer.cancel()
        await asyncio.gather(consumer, return_exceptions=True)


def test_an_apply_that_recorded_nothing_leaves_nothing_to_wait_for() -> None:
    applies, w = ApplyRecords(), work(4)
    applies.started(w.key)
    assert applies.pending(w)
    applies.ended(w.key)  # failed, or its write lost: the watch records what the member holds
    assert not applies.pending(w) and len(applies) == 0
    applies.started(w.key)
    applies.recorded(w.key, 6)
    applies.ended(w.key)  # recorded: held until the view has revision 6
    assert applies.pending(w) and applies.pending(work(5))
    assert not applies.pending(work(6)) and len(applies) == 0
