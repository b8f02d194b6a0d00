"""A member copy's watched change whose status write loses the compare-and-swap (the Work changed
since it was cached: an apply had just recorded itself) is written once the newer Work is cached,
not left to the next list a resync period later."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from types import SimpleNamespace
from typing import Any

from drods.controllers.settings import MemberSettings
from drods.controllers.work_record import WorkRecord, work_record
from drods.controllers.workstatus import WorkStatusController
from drods.machinery.fence import Fence, LeadershipLost
from drods.model.interpreter import Interpreter

COPY = {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web", "namespace": "default",
                                                                      "resourceVersion": "7"},
        "spec": {"replicas": 2}, "status": {"replicas": 2, "readyReplicas": 2, "availableReplicas": 2}}


def work(revision: int) -> WorkRecord:
    doc = {"metadata": {"name": "web.aws"},
           "spec": {"cluster": "aws", "binding": "web", "hash": "h", "manifests": [
               {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web", "namespace": "default"}}]},
           "status": {"applied": True, "observedHash": "h", "appliedTime": "2026-01-01T00:00:00.000Z"}}
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

    @property
    def works_by_cluster(self) -> dict[str, set[str]]:
        return {"aws": {self.cached.key}}

    def work(self, key: str) -> WorkRecord | None:
        return self.cached if key == self.cached.key else None

    def live_works_delivering(self, cluster: str, main: Any) -> list[WorkRecord]:
        return [self.cached] if cluster == "aws" and main == self.cached.main else []

    async def write_work_status(self, record: WorkRecord, status: dict[str, Any]) -> bool:
        if record.revision != self.stored_revision:
            self.cached = work(self.stored_revision)  # the watch brings the newer Work a moment later
            return False
        self.written.append(status)
        self.landed.set()
        return True


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
        async def write_work_status(self, record: WorkRecord, status: dict[str, Any]) -> bool:
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
