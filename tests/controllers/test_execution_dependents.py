"""A Work holds a workload and its dependents. When only the workload changed, a dependent the member
holds as the execution controller last applied it (the same manifest; its copy, followed by watch, at
the resourceVersion that apply returned) is not applied again; written by anyone since, changed in the
Work, or its kind not followed, it is."""

from __future__ import annotations

import asyncio
from collections import Counter
from dataclasses import dataclass, field
from types import SimpleNamespace
from typing import Any

from drods.controllers.apply_records import ApplyRecords
from drods.controllers.copy_versions import CopyVersions
from drods.controllers.execution import Execution
from drods.controllers.settings import MemberSettings
from drods.controllers.work_record import WorkRecord, work_record
from drods.controllers.workstatus import WorkStatusController
from drods.machinery.tasks import stop_tasks
from drods.members.foreign_names import ForeignNames
from drods.model.annotations import ANN_HASH
from drods.model.work import Ref
from tests.controllers.test_execution_conflicts import Fleet as ConflictsFleet

CONFIG_KIND = ("v1", "ConfigMap")
CONFIG = Ref("v1", "ConfigMap", "default", "web-config")


def manifests(config: str, workload: str) -> list[dict[str, Any]]:
    """The ConfigMap and the Deployment, with the digests propagation gives them."""
    return [{"apiVersion": "v1", "kind": "ConfigMap",
             "metadata": {"name": "web-config", "namespace": "default", "annotations": {ANN_HASH: config}},
             "data": {"v": config}},
            {"apiVersion": "apps/v1", "kind": "Deployment",
             "metadata": {"name": "web", "namespace": "default", "annotations": {ANN_HASH: workload}},
             "spec": {"replicas": 2}}]


def work(config: str, workload: str, generation: int) -> tuple[WorkRecord, dict[str, Any]]:
    doc = {"metadata": {"name": "web.aws", "generation": generation},
           "spec": {"cluster": "aws", "binding": "web", "hash": f"{config}{workload}",
                    "manifests": manifests(config, workload)}}
    record = work_record(doc, generation)
    assert record is not None
    return record, doc


@dataclass
class Member:
    """Takes every apply; each write is a new resourceVersion."""

    applied: list[str] = field(default_factory=list)
    version: int = 0

    async def get(self, api_version: str, kind: str, name: str, namespace: str | None = None) -> None:
        return None

    def foreign_names(self) -> ForeignNames:
        return ForeignNames(self, max_kinds=0)  # type: ignore[arg-type]

    async def apply(self, manifest: dict[str, Any]) -> dict[str, Any]:
        self.applied.append(manifest["kind"])
        self.version += 1
        return {**manifest, "metadata": {**manifest["metadata"], "resourceVersion": str(self.version)}, "status": {}}


@dataclass
class Fleet(ConflictsFleet):
    """The execution controller's fleet, with the members' dependents as the watches see them."""

    copy_versions: CopyVersions = field(default_factory=CopyVersions)


async def test_a_changed_workload_is_sent_alone_while_the_member_holds_its_dependent_as_last_applied() -> None:
    fleet, member = Fleet(), Member()
    execution = Execution(fleet, MemberSettings())  # type: ignore[arg-type]

    async def apply(config: str, workload: str, generation: int) -> list[str]:
        member.applied.clear()
        w, whole = work(config, workload, generation)
        assert await execution._apply("aws", w.key, w, whole, member, None) is None  # type: ignore[arg-type]
        assert fleet.written[-1]["applied"] is True
        return list(member.applied)

    assert await apply("c1", "d1", 1) == ["ConfigMap", "Deployment"]
    # not followed yet: nothing says what the member holds
    assert await apply("c1", "d2", 2) == ["ConfigMap", "Deployment"]
    fleet.copy_versions.listed("aws", CONFIG_KIND, [(CONFIG, str(member.version - 1))])
    # followed, at the version the last apply returned: the workload goes alone
    assert await apply("c1", "d3", 3) == ["Deployment"]
    assert fleet.written[-1]["manifests"][0]["kind"] == "Deployment"  # the status is the workload's
    # someone wrote the copy in the member: sent again, and then held again at its new version
    fleet.copy_versions.changed("aws", CONFIG_KIND, CONFIG, "77")
    assert await apply("c1", "d4", 4) == ["ConfigMap", "Deployment"]
    fleet.copy_versions.changed("aws", CONFIG_KIND, CONFIG, str(member.version - 1))  # the apply's own event
    assert await apply("c1", "d5", 5) == ["Deployment"]
    # the dependent itself changed in the Work
    assert await apply("c2", "d5", 6) == ["ConfigMap", "Deployment"]
    fleet.copy_versions.changed("aws", CONFIG_KIND, CONFIG, str(member.version - 1))
    # deleted in the member
    fleet.copy_versions.changed("aws", CONFIG_KIND, CONFIG, None)
    assert await apply("c2", "d6", 7) == ["ConfigMap", "Deployment"]
    fleet.copy_versions.changed("aws", CONFIG_KIND, CONFIG, str(member.version - 1))
    assert await apply("c2", "d7", 8) == ["Deployment"]
    # the kind's watch broke: unknown again
    fleet.copy_versions.unsynced("aws", CONFIG_KIND)
    assert await apply("c2", "d8", 9) == ["ConfigMap", "Deployment"]


async def test_the_workload_itself_is_applied_even_when_unchanged() -> None:
    """The Work's status records the main object's apply: it is sent whatever the member holds."""
    fleet, member = Fleet(), Member()
    execution = Execution(fleet, MemberSettings())  # type: ignore[arg-type]
    w, whole = work("c1", "d1", 1)
    await execution._apply("aws", w.key, w, whole, member, None)  # type: ignore[arg-type]
    fleet.copy_versions.listed("aws", CONFIG_KIND, [(CONFIG, str(member.version - 1))])
    fleet.copy_versions.listed("aws", ("apps/v1", "Deployment"),
                               [(Ref("apps/v1", "Deployment", "default", "web"), str(member.version))])
    member.applied.clear()
    w, whole = work("c1", "d1", 2)
    await execution._apply("aws", w.key, w, whole, member, None)  # type: ignore[arg-type]
    assert member.applied == ["Deployment"]


def test_a_manifest_without_a_namespace_is_the_members_copy_in_default() -> None:
    versions = CopyVersions()
    assert versions.holds("aws", CONFIG) is None  # not followed: unknown
    versions.listed("aws", CONFIG_KIND, [(CONFIG, "5")])
    bare = Ref("v1", "ConfigMap", "", "web-config")
    assert versions.version("aws", bare) == versions.version("aws", CONFIG) == "5"
    versions.changed("aws", CONFIG_KIND, CONFIG, None)
    assert versions.holds("aws", bare) is False


async def test_dependents_are_followed_in_the_watch_threads_the_main_kinds_leave() -> None:
    """The commonest dependent kind first; none when the main kinds take every thread, or the member
    could not be listed."""
    deployments, statefulsets = ("apps/v1", "Deployment"), ("apps/v1", "StatefulSet")
    fleet = SimpleNamespace(dependent_kinds=lambda c: Counter({CONFIG_KIND: 5, ("v1", "Secret"): 2}),
                            copy_versions=CopyVersions(), clients=SimpleNamespace(cached=lambda c: None))
    controller = WorkStatusController(fleet, MemberSettings())  # type: ignore[arg-type]
    gone = asyncio.Event()
    try:
        controller._follow_dependents("aws", [deployments], gone)
        assert set(controller._dependent_watches["aws"]) == {CONFIG_KIND}
        controller._follow_dependents("aws", [deployments, statefulsets], gone)
        assert controller._dependent_watches["aws"] == {}
        controller._follow_dependents("aws", [], gone)
        assert controller._dependent_watches["aws"] == {}
    finally:
        await stop_tasks(list(controller._dependent_watches["aws"].values()))


def applied_work() -> tuple[WorkRecord, list[dict[str, Any]], Any]:
    """A Work applied a while ago, and a status writer keeping what is written."""
    doc = {"metadata": {"name": "web.aws", "generation": 1},
           "spec": {"cluster": "aws", "binding": "web", "hash": "h", "manifests": manifests("c1", "d1")},
           "status": {"applied": True, "observedHash": "h", "observedGeneration": 1,
                      "appliedTime": "2026-01-01T00:00:00.000Z"}}
    record = work_record(doc, 3)
    assert record is not None
    written: list[dict[str, Any]] = []

    async def write_work_status(w: WorkRecord, status: dict[str, Any], body: Any = None) -> int:
        written.append(status)
        return 4

    return record, written, write_work_status


async def test_a_dependent_gone_from_the_member_marks_its_work_for_another_apply_unless_it_was_never_ours() -> None:
    """A ConfigMap DRO-DS applied and the member no longer holds: its Work is applied again. One the
    execution controller left as the member had it (a CRD of the member's own operator) carries no
    DRO-DS label and is never seen by the watch: it is not taken for deleted."""
    record, written, write_work_status = applied_work()
    fleet = SimpleNamespace(copy_versions=CopyVersions(), owned={"aws": set()}, applies=ApplyRecords(),
                            live_dependents=lambda c: [(record, (CONFIG,))], write_work_status=write_work_status)
    controller = WorkStatusController(fleet, MemberSettings())  # type: ignore[arg-type]
    controller._dependent_watches["aws"] = {CONFIG_KIND: asyncio.get_running_loop().create_future()}  # type: ignore[dict-item]
    fleet.copy_versions.listed("aws", CONFIG_KIND, [])  # followed: the member holds none
    await controller._missing_dependents("aws")
    assert written == []  # never applied by DRO-DS there
    fleet.owned["aws"].add(CONFIG)
    await controller._missing_dependents("aws")
    assert [(s["applied"], s["observedHash"]) for s in written] == [(False, "")]
    assert CONFIG not in fleet.owned["aws"]  # its next apply makes first contact again


async def test_a_dependent_of_a_kind_no_watch_follows_is_found_missing_by_a_listing() -> None:
    """With the main kinds in every watch thread (Deployments and StatefulSets, say) no dependent kind was
    followed, and a ConfigMap deleted in the member stayed gone for good: each poll now lists such kinds,
    and forgets the listing right after (it is true only at its moment)."""
    record, written, write_work_status = applied_work()
    held: list[dict[str, Any]] = [{"apiVersion": "v1", "kind": "ConfigMap",
                                   "metadata": {"name": "web-config", "namespace": "default", "resourceVersion": "7"}}]

    class Client:
        async def resource(self, api_version: str, kind: str) -> str:
            return f"{api_version}/{kind}"

        async def list_versioned(self, res: str, selector: str) -> tuple[list[dict[str, Any]], str]:
            assert res == "v1/ConfigMap" and selector
            return list(held), "9"

    fleet = SimpleNamespace(copy_versions=CopyVersions(), owned={"aws": {CONFIG}}, applies=ApplyRecords(),
                            live_dependents=lambda c: [(record, (CONFIG,))], write_work_status=write_work_status,
                            dependent_kinds=lambda c: Counter({CONFIG_KIND: 1}),
                            clients=SimpleNamespace(cached=lambda c: Client()))
    controller = WorkStatusController(fleet, MemberSettings())  # type: ignore[arg-type]
    await controller._missing_unfollowed("aws")
    assert written == []  # the member holds it
    assert fleet.copy_versions.holds("aws", CONFIG) is None  # the listing is not kept as if followed
    held.clear()  # deleted in the member
    await controller._missing_unfollowed("aws")
    assert [(s["applied"], s["observedHash"]) for s in written] == [(False, "")]
    assert fleet.copy_versions.holds("aws", CONFIG) is None
