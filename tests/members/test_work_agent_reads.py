"""What a pull-mode agent asks its member for: the copies' status from a watch per kind (or, for a
kind not followed, one list per kind — not a read per object — every pass), a read before an apply
only on first contact, and a prune only when an object may have left the Works — not at each watch
event (its own status reports come back as events)."""

from __future__ import annotations

import asyncio
import json
import logging
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import pytest

from drods.members.client import ServedResource
from drods.members.foreign_names import ForeignNames
from drods.members.works import WorkAgent, _Work
from drods.model.annotations import ANN_CLUSTER, ANN_HASH, FOREIGN_SELECTOR, MANAGED_BY, MANAGER, is_managed
from tests.members.waiting import wait_until

Obj = dict[str, Any]


def manifests(app: str) -> list[Obj]:
    labels = {MANAGED_BY: MANAGER}
    return [{"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": f"{app}-config", "namespace": "default",
                                                                   "labels": labels}},
            {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": app, "namespace": "default",
                                                                         "labels": labels}}]


def work(name: str, hash_: str, body: list[Obj]) -> Obj:
    return {"metadata": {"name": name}, "spec": {"hash": hash_, "manifests": body}}


class Member:
    """Holds what is applied; counts each kind of call; its watches deliver what ``changed`` gets."""

    name = "edge"

    def __init__(self, foreign_kinds: int = 0) -> None:
        self.objects: dict[tuple[str, str, str], Obj] = {("Namespace", "", "default"): {"metadata": {}}}
        self.calls: Counter[str] = Counter()
        self.changes: dict[str, asyncio.Queue[tuple[str, Obj]]] = {}
        self.revision = 1
        self.foreign = ForeignNames(self, max_kinds=foreign_kinds)  # type: ignore[arg-type]

    def foreign_names(self) -> ForeignNames:
        return self.foreign

    def changed(self, event: str, obj: Obj) -> None:
        """The member changed ``obj`` (its store) and tells the kind's watch."""
        key = (obj["kind"], obj["metadata"].get("namespace") or "", obj["metadata"]["name"])
        if event == "DELETED":
            self.objects.pop(key, None)
        else:
            self.objects[key] = obj
        self.changes.setdefault(obj["kind"], asyncio.Queue()).put_nowait((event, obj))

    async def resource(self, api_version: str, kind: str) -> ServedResource:
        return ServedResource(api_version, kind, kind.lower() + "s", True)

    async def list_versioned(self, res: ServedResource, label_selector: str | None = None) -> tuple[list[Obj], str]:
        if label_selector == FOREIGN_SELECTOR:  # the foreign names' listing
            self.calls[f"list foreign {res.kind}"] += 1
            return [o for (k, _, _), o in self.objects.items() if k == res.kind and not is_managed(o)], "1"
        self.calls[f"list {res.kind}"] += 1
        return [o for (k, _, _), o in self.objects.items() if k == res.kind], "1"

    async def watch_from(self, res: ServedResource, resource_version: str, seconds: float,
                         deliver: Callable[[str, Obj], None], label_selector: str | None = None) -> str:
        if label_selector == FOREIGN_SELECTOR:
            await asyncio.Event().wait()  # nobody else creates anything here
        queue = self.changes.setdefault(res.kind, asyncio.Queue())
        while True:
            deliver(*await queue.get())

    async def get(self, api_version: str, kind: str, name: str, namespace: str | None = None) -> Obj | None:
        self.calls["get"] += 1
        return self.objects.get((kind, namespace or "", name))

    async def apply(self, m: Obj) -> Obj:
        self.calls["apply"] += 1
        self.calls[f"apply {m['kind']}"] += 1
        meta = m["metadata"]
        self.revision += 1
        out = {**m, "metadata": {**meta, "resourceVersion": str(self.revision)}}
        self.objects[(m["kind"], meta.get("namespace") or "", meta["name"])] = {**out, "status": {"ready": True}}
        return out

    async def remove(self, api_version: str, kind: str, name: str, namespace: str | None, obj: Obj) -> None:
        self.calls[f"remove {kind}"] += 1
        self.objects.pop((kind, namespace or "", name), None)

    async def pods(self, namespace: str | None = None) -> list[Obj]:
        return []  # the workloads' usage (read once an interval) is not what is counted here

    async def pod_metrics(self, namespace: str) -> list[Obj]:
        return []

    async def list_objects(self, api_version: str, kind: str, namespace: str | None = None,
                           label_selector: str | None = None) -> list[Obj]:
        self.calls[f"list {kind}"] += 1
        return [o for (k, _, _), o in self.objects.items() if k == kind]


def plane(events: list[Obj]) -> httpx.MockTransport:
    def handle(request: httpx.Request) -> httpx.Response:
        if request.method == "PUT":
            return httpx.Response(200, json={})
        if request.url.params.get("watch") == "true":
            lines = [json.dumps(e) for e in [*events, {"type": "ERROR", "object": {"message": "done"}}]]
            return httpx.Response(200, content="\n".join(lines).encode())
        return httpx.Response(200, json={"metadata": {"resourceVersion": "1"}, "items": []})
    return httpx.MockTransport(handle)


def agent(member: Member, events: list[Obj], tmp: Path) -> WorkAgent:
    http = httpx.AsyncClient(base_url="http://cp", transport=plane(events))
    return WorkAgent("edge", member, http, tmp, usage_interval=3600.0)  # type: ignore[arg-type]


async def test_the_copies_are_read_in_one_list_per_kind(tmp_path: Path) -> None:
    member = Member()
    a = agent(member, [], tmp_path)
    a.copies.max_followed = 0  # no kind followed: each pass lists them
    await a._list()
    a.works = {f"w{i}": _Work(work(f"w{i}", f"h{i}", manifests(f"app{i}"))["spec"]) for i in range(3)}
    await a.reconcile_once()
    assert member.calls["apply"] == 6
    reads = {k: n for k, n in member.calls.items() if k != "apply"}
    # the first pass: a read of the namespace and of each object before its first apply, then one
    # list per kind for the status (and the prune the relist asked for); no read per object for the status
    assert reads["get"] == 7 and reads["list ConfigMap"] == reads["list Deployment"] == 2
    member.calls.clear()
    await a.reconcile_once()  # nothing changed: the status only, no prune
    assert member.calls == Counter({"list ConfigMap": 1, "list Deployment": 1})
    assert all(a.works[f"w{i}"].status["applied"] for i in range(3))  # reported from the lists
    member.calls.clear()
    a.works["w1"] = _Work(work("w1", "h1b", manifests("app1"))["spec"])  # an update
    await a.reconcile_once()
    assert member.calls["apply"] == 2 and member.calls["get"] == 0  # its objects are known to be ours
    del member.objects[("Deployment", "default", "app2")]  # deleted behind the agent's back
    await a.reconcile_once()  # seen gone in the list: applied again, after a first-contact read
    await a.reconcile_once()
    assert ("Deployment", "default", "app2") in member.objects and member.calls["get"] == 1


async def test_first_applies_read_only_what_the_members_foreign_names_hold(tmp_path: Path) -> None:
    member = Member(foreign_kinds=2)
    theirs = {"kind": "ConfigMap", "metadata": {"name": "app1-config", "namespace": "default"}}
    member.objects[("ConfigMap", "default", "app1-config")] = theirs
    a = agent(member, [], tmp_path)
    a.copies.max_followed = 0
    kinds = [("v1", "ConfigMap"), ("apps/v1", "Deployment")]
    for api_version, kind in kinds:
        member.foreign.absent(api_version, kind, "-", "default")  # asked once: followed from now on
    await wait_until(lambda: all(member.foreign.following(*k) for k in kinds))
    a.works = {f"w{i}": _Work(work(f"w{i}", f"h{i}", manifests(f"app{i}"))["spec"]) for i in range(3)}
    await a.reconcile_once()
    # no read before the first applies, but of the namespace and of the one name someone else holds
    assert member.calls["get"] == 2 and member.calls["apply"] == 4, member.calls
    assert "not managed by DRO-DS" in a.errors["w1"].message
    # reported as a push member's is: a conflict the same apply meets again fails the binding at once
    assert a.errors["w1"].permanent and a.errors["w1"].times == 1
    status = await a.status_of("w1", a.works["w1"].spec)
    assert status is not None and status["permanent"] and status["failures"] == 1 and not status["applied"]
    assert member.objects[("ConfigMap", "default", "app1-config")] is theirs  # left alone


async def test_a_prune_waits_for_an_object_to_leave_the_works(tmp_path: Path) -> None:
    w0, w1 = work("w0", "h0", manifests("app0")), work("w1", "h1", manifests("app1"))
    events = [{"type": "ADDED", "object": w0}, {"type": "ADDED", "object": w1},
              {"type": "MODIFIED", "object": {**w0, "status": {"applied": True}}}]  # a status: nothing to do
    a = agent(Member(), events, tmp_path)
    await a._watch("1")
    assert set(a.works) == {"w0", "w1"} and not a.prune_due and a.wake.is_set()
    a.wake.clear()
    await agent_watch(a, [{"type": "MODIFIED", "object": {**w0, "status": {"applied": False}}}], tmp_path)
    assert not a.prune_due and not a.wake.is_set()  # only the status moved: no pass at all
    await agent_watch(a, [{"type": "MODIFIED", "object": work("w0", "h0b", manifests("app0")[1:])}], tmp_path)
    assert a.prune_due and a.wake.is_set()  # its ConfigMap left the Work
    a.prune_due = False
    await agent_watch(a, [{"type": "DELETED", "object": w1}], tmp_path)
    assert a.prune_due and set(a.works) == {"w0"}


async def agent_watch(a: WorkAgent, events: list[Obj], tmp: Path) -> None:
    a.http = httpx.AsyncClient(base_url="http://cp", transport=plane(events))
    await a._watch("2")


async def test_followed_copies_are_not_listed_again_and_their_changes_are_reported(tmp_path: Path) -> None:
    """Each kind listed once, then followed: a pass lists nothing; a copy's change in the member wakes
    a pass that reports it; a copy deleted in the member is applied again."""
    member = Member()
    a = agent(member, [], tmp_path)
    a.status_coalesce = 0.05
    stop = asyncio.Event()
    await a._list()
    a.works = {f"w{i}": _Work(work(f"w{i}", f"h{i}", manifests(f"app{i}"))["spec"]) for i in range(3)}
    loop = asyncio.create_task(a._reconcile_loop(stop))
    try:
        await wait_until(lambda: a.copies.lists == 2 and all(w.status.get("applied") for w in a.works.values()))
        member.calls.clear()  # the first pass listed (the watches had not listed yet), and the prune
        for _ in range(3):
            await a.reconcile_once()
        assert not any(k.startswith("list") for k in member.calls), member.calls  # read from the watches
        # the member rolls a Deployment out: the agent reports its new status without a pass asked for
        dep = {**member.objects[("Deployment", "default", "app1")], "status": {"readyReplicas": 3}}
        member.changed("MODIFIED", dep)
        await wait_until(lambda: a.works["w1"].status["manifests"][1]["status"] == {"readyReplicas": 3})
        # deleted behind the agent's back: seen in the watch, applied again
        member.changed("DELETED", member.objects[("Deployment", "default", "app2")])
        await wait_until(lambda: ("Deployment", "default", "app2") in member.objects)
        assert not any(k.startswith("list") for k in member.calls), member.calls
    finally:
        stop.set()
        a.wake.set()
        await loop
        await a.copies.close()


def digested(app: str, config: str, workload: str) -> list[Obj]:
    """``manifests(app)`` with the digests propagation gives them (ANN_HASH): the ConfigMap's, the Deployment's."""
    return [{**m, "metadata": {**m["metadata"], "annotations": {ANN_HASH: d}}}
            for m, d in zip(manifests(app), (config, workload), strict=True)]


async def test_a_changed_workload_is_sent_alone_unless_its_dependent_was_written_in_the_member(tmp_path: Path) -> None:
    """Karmada's Work holds one object; here a Work holds the workload and its dependents. When only the
    workload changed, the ConfigMap the member holds as this agent sent it is not applied again; once
    someone else wrote it in the member (its resourceVersion moved), the next change of the Work sends it."""
    member = Member()
    a = agent(member, [], tmp_path)
    stop = asyncio.Event()
    await a._list()
    a.works = {"w0": _Work(work("w0", "h1", digested("app0", "c1", "d1"))["spec"])}
    loop = asyncio.create_task(a._reconcile_loop(stop))
    try:
        await wait_until(lambda: a.copies.lists == 2 and bool(a.works["w0"].status.get("applied")))
        member.calls.clear()
        a.works["w0"] = _Work(work("w0", "h2", digested("app0", "c1", "d2"))["spec"])  # the workload changed
        await a.reconcile_once()
        assert member.calls["apply"] == member.calls["apply Deployment"] == 1, member.calls
        assert member.objects[("Deployment", "default", "app0")]["metadata"]["annotations"][ANN_HASH] == "d2"
        edited = member.objects[("ConfigMap", "default", "app0-config")]
        member.changed("MODIFIED", {**edited, "data": {"edited": "in the member"},
                                    "metadata": {**edited["metadata"], "resourceVersion": "99"}})
        await wait_until(lambda: (a.copies.listed(("v1", "ConfigMap")) or {}).get(("default", "app0-config"),
                                                                                  {}).get("data") is not None)
        member.calls.clear()
        a.works["w0"] = _Work(work("w0", "h3", digested("app0", "c1", "d3"))["spec"])
        await a.reconcile_once()
        assert member.calls["apply ConfigMap"] == member.calls["apply Deployment"] == 1, member.calls
        assert "data" not in member.objects[("ConfigMap", "default", "app0-config")]  # as the Work says
        member.calls.clear()
        a.copies.max_followed = 0  # a kind not followed: nothing says what the member holds, all is sent
        a.copies.follow([])
        a.works["w0"] = _Work(work("w0", "h4", digested("app0", "c1", "d4"))["spec"])
        await a.reconcile_once()
        assert member.calls["apply ConfigMap"] == member.calls["apply Deployment"] == 1, member.calls
    finally:
        stop.set()
        a.wake.set()
        await loop
        await a.copies.close()


async def test_a_just_applied_work_is_reported_once_with_its_rollout_not_in_the_applying_pass(tmp_path: Path) -> None:
    """An apply starts a rollout whose first steps follow at once: the Work's "applied" waits for the
    pass ``status_coalesce`` on and goes with them, one report instead of one per step."""
    member = Member()
    puts: list[str] = []

    def handle(request: httpx.Request) -> httpx.Response:
        if request.method == "PUT":
            puts.append(request.url.path)
            return httpx.Response(200, json={})
        return httpx.Response(200, json={"metadata": {"resourceVersion": "1"}, "items": []})

    http = httpx.AsyncClient(base_url="http://cp", transport=httpx.MockTransport(handle))
    a = WorkAgent("edge", member, http, tmp_path, usage_interval=3600.0)  # type: ignore[arg-type]
    a.status_coalesce = 0.2
    await a._list()
    a.wake.clear()
    a.works = {"w0": _Work(work("w0", "h1", manifests("app0"))["spec"])}
    try:
        await a.reconcile_once()
        assert member.calls["apply"] == 2 and puts == [] and not a.wake.is_set()  # applied, not reported yet
        await wait_until(lambda: a.copies.lists == 2)
        dep = member.objects[("Deployment", "default", "app0")]
        member.changed("MODIFIED", {**dep, "status": {"replicas": 1}})  # the rollout's first step
        await wait_until(a.wake.is_set)  # status_coalesce after the apply
        await a.reconcile_once()
        assert puts == ["/api/v1/agent/works/w0/status"]
        assert a.works["w0"].status["applied"] and a.works["w0"].status["manifests"][1]["status"] == {"replicas": 1}
        puts.clear()
        a.works["w0"] = _Work(work("w0", "h2", manifests("app0"))["spec"])
        await a.reconcile_once()
        assert puts == []  # left to the next pass
        a.works["w0"] = _Work(work("w0", "h3", manifests("app0"))["spec"])  # changed again before it
        await a.reconcile_once()
        assert puts == ["/api/v1/agent/works/w0/status"]  # a Work applied pass after pass is still reported
        assert a.works["w0"].status["observedHash"] == "h3"
    finally:
        await a.copies.close()


async def test_a_relist_during_a_pass_over_the_cached_works_prunes_what_the_works_no_longer_hold(
        tmp_path: Path) -> None:
    """An agent restarted over its cached Works applies them while it relists; the control plane deleted
    the Work meanwhile (its cluster failed over): the pass after the relist prunes the copies — the pass
    that was under way held the cached Works and must not spend the relist's prune."""
    member = Member()
    cached = [{**m, "metadata": {**m["metadata"], "annotations": {ANN_CLUSTER: "edge"}}} for m in manifests("web")]
    a = agent(member, [], tmp_path)  # the control plane's list holds no Work
    a.works = {"w0": _Work(work("w0", "h0", cached)["spec"])}  # as loaded from the state file
    applying, go_on = asyncio.Event(), asyncio.Event()
    apply = member.apply

    async def slow_apply(m: Obj) -> Obj:
        applying.set()
        await go_on.wait()
        return await apply(m)

    member.apply = slow_apply  # type: ignore[method-assign]
    under_way = asyncio.create_task(a.reconcile_once())
    await applying.wait()
    await a._list()
    go_on.set()
    await under_way
    await a.reconcile_once()  # the pass the relist woke
    assert not [k for k in member.objects if k[0] in ("ConfigMap", "Deployment")], member.objects


async def test_a_prune_that_keeps_failing_is_said_once_until_it_works_again(tmp_path: Path,
                                                                             caplog: pytest.LogCaptureFixture) -> None:
    """A member down: the agent retries its prune every few seconds; a warning each time filled its log."""
    from drods.members.client import MemberUnavailable

    class Away(Member):
        down = True

        async def list_objects(self, api_version: str, kind: str, namespace: str | None = None,
                               label_selector: str | None = None) -> list[Obj]:
            if self.down:
                raise MemberUnavailable("edge", "connection refused")
            return await super().list_objects(api_version, kind, namespace, label_selector)

    member = Away()
    a = agent(member, [], tmp_path)
    caplog.set_level(logging.DEBUG, logger="drods.members.works")
    assert [await a.prune({}) for _ in range(3)] == [False, False, False]
    member.down = False
    assert await a.prune({})
    said = [(r.levelname, r.getMessage()) for r in caplog.records if "pruning in edge" in r.getMessage()]
    assert [level for level, _ in said] == ["WARNING", "DEBUG", "DEBUG", "INFO"], said
    assert said[-1][1] == "pruning in edge works again"
