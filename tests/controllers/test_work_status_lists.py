"""How often the work-status controller polls a push member, and what a poll reads: the usage of its
workloads is read at each poll (no watch brings it), so a member whose workloads' kinds are all
followed by watches is still polled every ``usagePollSeconds`` — not only at the resync, which left an
autoscaler reading a use 15 s old — but what the watches keep is not listed again."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from types import SimpleNamespace
from typing import Any

from drods.controllers.settings import MemberSettings
from drods.controllers.work_record import WorkRecord, work_record
from drods.controllers.workstatus import WorkStatusController
from drods.model.interpreter import Interpreter

DEPLOYMENTS = ("apps/v1", "Deployment")
CONFIGMAPS = ("v1", "ConfigMap")


def controller(**settings: Any) -> WorkStatusController:
    return WorkStatusController(object(), MemberSettings(**settings))  # type: ignore[arg-type]


async def test_a_member_with_workloads_is_listed_every_usage_period_even_when_followed() -> None:
    c = controller(statusPollSeconds=0.5, statusResyncSeconds=15, usagePollSeconds=2)
    watch = asyncio.get_running_loop().create_future()
    c._watches["aws"] = {DEPLOYMENTS: watch, CONFIGMAPS: watch}  # type: ignore[dict-item]
    assert c.list_period("aws") == 0.5  # the watches are not up yet: polled
    c._following["aws"] = {DEPLOYMENTS}
    assert c.list_period("aws") == 0.5  # one kind still unfollowed
    c._following["aws"] = {DEPLOYMENTS, CONFIGMAPS}
    assert c.list_period("aws") == 2  # followed, but the usage is due every 2 s
    c._watches["aws"] = {CONFIGMAPS: watch}  # type: ignore[dict-item]
    assert c.list_period("aws") == 15  # no workload: the resync
    watch.cancel()


async def test_the_resync_stays_when_the_usage_period_is_longer() -> None:
    c = controller(statusResyncSeconds=15, usagePollSeconds=60)
    watch = asyncio.get_running_loop().create_future()
    c._watches["aws"] = {DEPLOYMENTS: watch}  # type: ignore[dict-item]
    c._following["aws"] = {DEPLOYMENTS}
    assert c.list_period("aws") == 15
    watch.cancel()


async def test_members_joined_together_are_polled_at_their_own_places_in_the_period() -> None:
    """Until every kind is followed a member is polled at the short period; the first wait after is a
    point of the period of its own, so a fleet that joined together is not listed (and its usage not
    written on every Work) all at once every period; the waits after that are the period."""
    c = controller(statusPollSeconds=0.5, statusResyncSeconds=15, usagePollSeconds=10)
    watch = asyncio.get_running_loop().create_future()
    names = [f"c{i}" for i in range(40)]
    for n in names:
        c._watches[n] = {DEPLOYMENTS: watch}  # type: ignore[dict-item]
    assert {c.wait_seconds(n, 0.0) for n in names} == {0.5}  # not followed yet
    for n in names:
        c._following[n] = {DEPLOYMENTS}
    first = sorted(c.wait_seconds(n, 0.0) for n in names)
    assert first[0] >= 0.0 and first[-1] <= 10.0 and first[-1] - first[0] > 5.0, first
    assert {c.wait_seconds(n, 0.0) for n in names} == {10.0}
    assert c.wait_seconds("c0", 2.0) == 20.0  # a slow list: never more than ~10 % of the time listing
    watch.cancel()


def deployment(name: str, rv: str) -> dict[str, Any]:
    return {"apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": name, "namespace": "default", "resourceVersion": rv},
            "spec": {"replicas": 1, "selector": {"matchLabels": {"app": name}}},
            "status": {"replicas": 1, "readyReplicas": 1}}


POD = {"metadata": {"name": "web-1", "namespace": "default", "labels": {"app": "web"}},
       "spec": {"containers": [{"name": "c", "resources": {"requests": {"cpu": "500m", "memory": "1Gi"}}}]},
       "status": {"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]}}
POD_METRICS = {"metadata": {"name": "web-1", "namespace": "default"},
               "containers": [{"name": "c", "usage": {"cpu": "250m", "memory": "512Mi"}}]}


@dataclass
class Member:
    """A push member's client: its Deployments, pods and PodMetrics; counts the Deployment lists."""

    deployments: list[dict[str, Any]]
    lists: int = 0
    state: Any = field(default_factory=lambda: SimpleNamespace(condition="Ready"))

    async def list_objects(self, api_version: str, kind: str, namespace: str | None = None,
                           label_selector: str | None = None) -> list[dict[str, Any]]:
        self.lists += 1
        return self.deployments

    async def pods(self, namespace: str | None = None) -> list[dict[str, Any]]:
        return [POD]

    async def pod_metrics(self, namespace: str) -> list[dict[str, Any]]:
        return [POD_METRICS]


def work(name: str, revision: int, status: dict[str, Any], obj: str | None = None) -> WorkRecord:
    """Binding ``name``'s Work on aws, delivering the Deployment ``obj`` (by default its namesake)."""
    doc = {"metadata": {"name": f"{name}.aws"},
           "spec": {"cluster": "aws", "binding": name, "hash": "h", "manifests": [
               {"apiVersion": "apps/v1", "kind": "Deployment",
                "metadata": {"name": obj or name, "namespace": "default"}}]},
           "status": status}
    record = work_record(doc, revision)
    assert record is not None
    return record


@dataclass
class Fleet:
    """Two applied Works on ``aws``: web and api."""

    member: Member
    works: dict[str, WorkRecord] = field(default_factory=dict)
    informers: Any = field(default_factory=lambda: SimpleNamespace(interpreter=Interpreter()))
    owned: dict[str, set[Any]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        for name in ("web", "api"):
            record = work(name, 1, {"applied": True, "observedHash": "h", "appliedTime": "2026-01-01T00:00:00.000Z"})
            self.works[record.key] = record

    @property
    def works_by_cluster(self) -> dict[str, set[str]]:
        return {"aws": set(self.works)}

    @property
    def clients(self) -> Any:
        return SimpleNamespace(cached=lambda cluster: self.member)

    def work(self, key: str) -> WorkRecord | None:
        return self.works.get(key)

    def live_works_by_main(self, cluster: str) -> dict[Any, list[WorkRecord]]:
        out: dict[Any, list[WorkRecord]] = {}
        for w in self.works.values():
            if w.cluster == cluster and w.main is not None and not w.deleting:
                out.setdefault(w.main, []).append(w)
        return out

    def of(self, binding: str) -> WorkRecord:
        [record] = [w for w in self.works.values() if w.binding == binding]
        return record

    async def write_work_status(self, record: WorkRecord, status: dict[str, Any]) -> bool:
        self.works[record.key] = work(record.binding, record.revision + 1, status,
                                            record.refs[-1].name)
        return True


def manifest(fleet: Fleet, name: str) -> dict[str, Any]:
    [m] = fleet.of(name).status["manifests"]
    return dict(m)


async def test_a_followed_member_is_checked_from_what_its_watch_kept_without_a_list() -> None:
    """While the watch follows the Deployments, a poll lists nothing: the kept copies are recorded with
    their usage, and an applied Work whose copy the watch no longer holds is applied again."""
    member = Member([deployment("web", "7"), deployment("api", "8")])
    fleet = Fleet(member)
    c = WorkStatusController(fleet, MemberSettings(), clock=lambda: 1_800_000_000.0)  # type: ignore[arg-type]
    c._following["aws"] = {DEPLOYMENTS}
    c._copies["aws"] = {DEPLOYMENTS: {(it := c.seen_copy(deployment("web", "7"))).ref: it}}

    assert await c.poll_once("aws") == [DEPLOYMENTS]
    assert member.lists == 0
    web = manifest(fleet, "web")
    assert web["status"]["readyReplicas"] == 1
    assert web["usage"]["pods"] == 1 and web["usage"]["cpu"]["used"] == "250m"
    assert fleet.of("api").status["applied"] is False  # the watch holds no api: applied again

    written = fleet.of("web").revision
    assert await c.poll_once("aws") == [DEPLOYMENTS]
    assert fleet.of("web").revision == written  # in agreement: nothing written again

    c._following["aws"] = set()  # the watch failed: the member is listed until it follows again
    assert await c.poll_once("aws") == [DEPLOYMENTS]
    assert member.lists == 1


async def test_two_bindings_delivering_one_object_both_find_it_listed_or_followed() -> None:
    """A second binding whose Work delivers the same object (as a Service a MultiClusterService
    delivers may also follow its workload) is not taken for missing, and both Works record it."""
    member = Member([deployment("web", "7"), deployment("api", "8")])
    fleet = Fleet(member)
    again = work("web-too", 1, {"applied": True, "observedHash": "h", "appliedTime": "2026-01-01T00:00:00.000Z"},
                 "web")
    fleet.works[again.key] = again
    c = WorkStatusController(fleet, MemberSettings(), clock=lambda: 1_800_000_000.0)  # type: ignore[arg-type]

    assert await c.poll_once("aws") == [DEPLOYMENTS]  # listed
    assert member.lists == 1
    assert fleet.of("web-too").status["applied"] is True
    assert [manifest(fleet, b)["status"]["readyReplicas"] for b in ("web", "web-too")] == [1, 1]

    c._following["aws"] = {DEPLOYMENTS}  # followed: the same from what the watch keeps
    c._copies["aws"] = {DEPLOYMENTS: {(it := c.seen_copy(deployment("web", "9"))).ref: it,
                                      (it := c.seen_copy(deployment("api", "8"))).ref: it}}
    assert await c.poll_once("aws") == [DEPLOYMENTS]
    assert member.lists == 1
    assert fleet.of("web-too").status["applied"] is True and fleet.of("web").status["applied"] is True


REFLECT_REPLICAS = """
function ReflectStatus(observedObj)
  return {counted = observedObj.status.replicas}
end"""


async def test_a_changed_customization_reads_a_followed_member_again_and_writes_the_new_status() -> None:
    """What the watch keeps was read with the interpretation of its time: once a customization of the
    kind changes, the next poll lists the kind, writes the status as now interpreted, and keeps that."""
    member = Member([deployment("web", "7"), deployment("api", "8")])
    fleet = Fleet(member)
    c = WorkStatusController(fleet, MemberSettings(), clock=lambda: 1_800_000_000.0)  # type: ignore[arg-type]
    c._following["aws"] = {DEPLOYMENTS}
    c._copies["aws"] = {DEPLOYMENTS: {(it := c.seen_copy(deployment("web", "7"))).ref: it,
                                      (it := c.seen_copy(deployment("api", "8"))).ref: it}}
    assert await c.poll_once("aws") == [DEPLOYMENTS]
    assert member.lists == 0 and manifest(fleet, "web")["status"]["readyReplicas"] == 1

    fleet.informers.interpreter.learn("/registry/config.karmada.io/resourceinterpretercustomizations/d", None, {
        "apiVersion": "config.karmada.io/v1alpha1", "kind": "ResourceInterpreterCustomization",
        "metadata": {"name": "d"},
        "spec": {"target": {"apiVersion": "apps/v1", "kind": "Deployment"},
                 "customizations": {"statusReflection": {"luaScript": REFLECT_REPLICAS}}}})
    assert await c.poll_once("aws") == [DEPLOYMENTS]
    assert member.lists == 1  # read again, though nothing changed in the member
    assert manifest(fleet, "web")["status"] == {"counted": 1}
    assert manifest(fleet, "api")["status"] == {"counted": 1}

    written = fleet.of("web").revision
    assert await c.poll_once("aws") == [DEPLOYMENTS]
    assert member.lists == 1  # what the watch keeps was read again too: followed as before
    assert fleet.of("web").revision == written
