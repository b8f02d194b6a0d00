"""What a pull-mode agent asks its member for: the copies' status in one list per kind (not a read
per object, every pass), a read before an apply only on first contact, and a prune only when an
object may have left the Works — not at each watch event (its own status reports come back as
events)."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Any

import httpx

from drods.members.works import WorkAgent, _Work
from drods.model.annotations import MANAGED_BY, MANAGER

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
    """Holds what is applied; counts each kind of call."""

    def __init__(self) -> None:
        self.objects: dict[tuple[str, str, str], Obj] = {("Namespace", "", "default"): {"metadata": {}}}
        self.calls: Counter[str] = Counter()

    async def get(self, api_version: str, kind: str, name: str, namespace: str | None = None) -> Obj | None:
        self.calls["get"] += 1
        return self.objects.get((kind, namespace or "", name))

    async def apply(self, m: Obj) -> Obj:
        self.calls["apply"] += 1
        meta = m["metadata"]
        self.objects[(m["kind"], meta.get("namespace") or "", meta["name"])] = {**m, "status": {"ready": True}}
        return m

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
