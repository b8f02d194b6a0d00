"""Regional autonomy (M2) with injected clocks: the control plane's adoption over a real store
(clamping, a report sent twice, a deleted workload, the controller holding the adopted count and
then deciding again), and the agent's side against a fake member and a fake control plane (cut off
after the grace, the central rule within the bounds, decisions kept across a restart, reported
and dropped when answered)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import httpx

from drods.autoscaling import autonomy
from drods.autoscaling.controller import Autoscaler
from drods.machinery.journal import Journal
from drods.members.autonomy import AutonomyAgent, AutonomySettings
from drods.members.client import MemberError
from drods.members.foreign_names import ForeignNames
from drods.members.summary import ClusterSummary
from drods.members.works import WorkAgent, _Work
from drods.model.annotations import MANAGED_BY, MANAGER
from drods.model.keys import AUTOSCALING_PREFIX
from drods.model.kinds import BINDING, FEDERATED_HPA, by_kind
from drods.model.member_status import MemberStatus
from drods.registry.objects import ObjectRegistry
from drods.store.sqlite import SqliteStore
from tests.autoscaling.test_controller import Clock, _autoscaler, _binding, _cluster, _hpa, _status_after
from tests.monitor_e2e.conftest import eventually

T0 = 1_800_000_000.0
DEPLOYMENT = by_kind("apps/v1", "Deployment")
WEB = ("apps/v1", "Deployment", "default", "web")


def _decision(at: float, frm: int, to: int, total: int, uid: str) -> autonomy.Decision:
    return autonomy.Decision(WEB, "web", uid, at, frm, to, total, {"cpu": 180.0})


async def _workload(reg: ObjectRegistry) -> None:
    assert DEPLOYMENT is not None
    await reg.create(DEPLOYMENT, {"apiVersion": "apps/v1", "kind": "Deployment",
                                  "metadata": {"name": "web", "namespace": "default"},
                                  "spec": {"replicas": 2, "template": {"spec": {"containers": []}}}}, "default")


async def test_adoption_clamps_is_idempotent_holds_then_central_resumes(tmp_path: Path) -> None:
    store = SqliteStore(str(tmp_path / "s.db"))
    clock = Clock(T0)
    key = FEDERATED_HPA.key("web", "default")
    try:
        async with _autoscaler(store, clock) as (a, _):
            reg = a.registry
            await _workload(reg)
            await _cluster(store, "edge", 2.0)  # 20 % of capacity: the central rule would scale in
            await _cluster(store, "core", 2.0)
            await _binding(reg, 3, {"edge": 2, "core": 1}, {"edge": 20.0, "core": 20.0})
            hpa = _hpa()
            hpa["spec"].update(minReplicas=1, maxReplicas=6)
            hpa["spec"]["behavior"] = {"scaleDown": {"stabilizationWindowSeconds": 0}}
            uid = (await reg.create(FEDERATED_HPA, hpa, "default"))["metadata"]["uid"]
            items = await autonomy.cluster_autoscalers(reg, "edge")
            assert [(i["autoscaler"]["name"], i["minReplicas"], i["maxReplicas"], i["total"], i["local"])
                    for i in items] == [("web", 1, 6, 3, 2)]
            assert await autonomy.cluster_autoscalers(reg, "elsewhere") == []

            journal = Journal(store, AUTOSCALING_PREFIX, clock=clock)
            # edge went 2 → 4 (total 5), then 4 → 7 (total 8, beyond max 6)
            decisions = [_decision(T0 - 20, 2, 4, 5, uid), _decision(T0 - 10, 4, 7, 8, uid)]
            [r] = await autonomy.adopt(reg, journal, "edge", decisions, T0)
            assert (r.outcome, r.desired) == ("adopted", 6) and "clamped" in r.message
            st = (await reg.get(FEDERATED_HPA, "web", "default"))["status"]
            assert st["desiredReplicas"] == 6
            assert st["autonomy"]["cluster"] == "edge" and st["autonomy"]["decisions"] == 2
            # the Binding shows what edge runs, within the adopted total: min(7, 6 − core's 1) = 5
            placed = (await reg.get(BINDING, "deployment-default-web"))["status"]["placement"]
            assert sorted((p["cluster"], p["replicas"]) for p in placed) == [("core", 1), ("edge", 5)]
            entries = (await journal.query(T0 - 60, T0 + 1, 100)).items
            assert sorted((e["reason"], e["to"]) for e in entries) == [
                (autonomy.REASON_ADOPTED, 6), (autonomy.REASON_LOCAL, 5), (autonomy.REASON_LOCAL, 8)]
            # the same report again (a lost answer): nothing adopted or recorded twice
            [again] = await autonomy.adopt(reg, journal, "edge", decisions, T0 + 1)
            assert (again.outcome, again.desired) == ("duplicate", 6)
            assert len((await journal.query(T0 - 60, T0 + 2, 100)).items) == 3

            # The controller holds the adopted count although its own rule says scale in ...
            await _binding(reg, 6, {"edge": 5, "core": 1}, {"edge": 20.0, "core": 20.0})
            clock.t = T0 + 5
            await eventually(lambda: _seen(a, key, 6), 5.0, "the adoption in the informers")
            st = await _status_after(a, FEDERATED_HPA, "web", key, lambda s: s.get("lastEvaluatedTime"))
            assert st["desiredReplicas"] == 6
            assert [c["reason"] for c in st["conditions"] if c["type"] == "AbleToScale"] == ["AdoptedFromAgent"]
            # ... and decides again once the hold is over: 20 % against 60 % → ceil(6 / 3) = 2
            clock.t = T0 + a.settings.adopt_hold_s + 1
            st = await _status_after(a, FEDERATED_HPA, "web", key, lambda s: s.get("desiredReplicas") != 6)
            assert st["desiredReplicas"] == 2 and st["autonomy"]["adoptedReplicas"] == 6

            # an agent of a cluster the workload is not placed on adopts nothing
            [moved] = await autonomy.adopt(reg, journal, "elsewhere", [_decision(T0 + 90, 2, 3, 4, uid)], T0 + 91)
            assert moved.outcome == "moved" and moved.desired == 2
            # a decision about a deleted workload is dropped, not adopted
            await reg.delete(DEPLOYMENT, "web", "default")
            [gone] = await autonomy.adopt(reg, journal, "edge", [_decision(T0 + 100, 2, 3, 4, uid)], T0 + 101)
            assert gone.outcome == "deleted" and gone.desired is None
            assert (await reg.get(FEDERATED_HPA, "web", "default"))["status"]["desiredReplicas"] == 2
            # ... and so is one about a recreated autoscaler
            await _workload(reg)
            [other] = await autonomy.adopt(reg, journal, "edge", [_decision(T0 + 100, 2, 3, 4, "old-uid")], T0 + 101)
            assert other.outcome == "deleted" and "recreated" in other.message
    finally:
        await store.close()


async def _seen(a: Autoscaler, key: str, desired: int) -> bool:
    st = (a.hpas.cache.get(key) or {}).get("status") or {}
    return st.get("desiredReplicas") == desired and any(
        (b.get("spec") or {}).get("replicas") == 6 for b in a.bindings.cache.values())


# ---------------------------------------------------------------------------------------- the agent


class FakeMember:
    """A member whose workload's CPU use is set by the test (one ready pod; its PodMetrics), and
    which records what is applied."""

    def __init__(self) -> None:
        self.measured = 1.0  # cores in use
        self.allocated = 1.0  # cores requested
        self.applied: list[dict[str, Any]] = []

    async def pods(self, namespace: str | None = None) -> list[dict[str, Any]]:
        return [{"metadata": {"name": "web-1", "namespace": "default", "labels": {"app": "web"}},
                 "spec": {"nodeName": "n1", "containers": [{"name": "c", "resources": {"requests": {
                     "cpu": str(self.allocated), "memory": "128Mi"}}}]},
                 "status": {"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]}}]

    async def pod_metrics(self, namespace: str) -> list[dict[str, Any]]:
        return [{"metadata": {"name": "web-1", "namespace": "default"},
                 "containers": [{"name": "c", "usage": {"cpu": f"{round(self.measured * 1e9)}n",
                                                        "memory": "64Mi"}}]}]

    async def summary(self) -> ClusterSummary:
        status = {"source": "kubernetes", "cpu": {"allocatable": 8.0, "allocated": self.allocated,
                                                  "used": max(self.allocated, self.measured),
                                                  "measured": self.measured}}
        return ClusterSummary(MemberStatus.read(status), 1, 1, 0, None, None, [], None, None)

    async def get(self, api_version: str, kind: str, name: str, namespace: str | None = None) -> dict[str, Any]:
        return {"apiVersion": api_version, "kind": kind,
                "metadata": {"name": name, "namespace": namespace, "labels": {MANAGED_BY: MANAGER}},
                "spec": {"selector": {"matchLabels": {"app": "web"}}}, "status": {}}

    async def apply(self, manifest: dict[str, Any]) -> dict[str, Any]:
        self.applied.append(manifest)
        return manifest

    def foreign_names(self) -> ForeignNames:
        return ForeignNames(self, max_kinds=0)  # type: ignore[arg-type] # follows nothing: first applies read

    async def list_objects(self, api_version: str, kind: str, namespace: str | None = None,
                           label_selector: str | None = None) -> list[dict[str, Any]]:
        raise MemberError("edge", 405, "MethodNotAllowed", "no lists here: the agent reads each object")


class FakePlane:
    def __init__(self) -> None:
        self.up: bool | None = True
        self.reports: list[dict[str, Any]] = []
        self.item = {"workload": {"apiVersion": "apps/v1", "kind": "Deployment", "namespace": "default",
                                  "name": "web"},
                     "autoscaler": {"name": "web", "uid": "u1"}, "minReplicas": 2, "maxReplicas": 5,
                     "metrics": [{"type": "Resource", "resource": {"name": "cpu", "target": {
                         "type": "Utilization", "averageUtilization": 50}}}],
                     "behavior": None, "total": 3, "local": 2}

    def __call__(self, request: httpx.Request) -> httpx.Response:
        if self.up is None:  # there, but failing: not a cut
            return httpx.Response(500, json={"code": "INTERNAL"})
        if not self.up:
            raise httpx.ConnectError("refused", request=request)
        if request.url.path == "/api/v1/agent/autoscalers":
            return httpx.Response(200, json={"items": [self.item]})
        body = json.loads(request.content)
        self.reports.append(body)
        return httpx.Response(200, json={"results": [{"workload": "Deployment/default/web", "outcome": "adopted",
                                                      "desiredReplicas": body["decisions"][-1]["total"]}]})


def _agent(member: FakeMember, plane: FakePlane, state: Path, clock: Clock) -> AutonomyAgent:
    http = httpx.AsyncClient(base_url="http://cp", transport=httpx.MockTransport(plane))
    works = WorkAgent("edge", member, http, state, usage_interval=0.0, clock=clock)  # type: ignore[arg-type]
    works.copies.max_followed = 0  # the fake member serves no watch: its copies are listed each pass
    works.works = {"w1": _Work({"hash": "h1", "manifests": [
        {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web", "namespace": "default"},
         "spec": {"replicas": 2}}]})}
    works.applied = {"w1": "h1"}
    agent = AutonomyAgent("edge", member, http, works, state, AutonomySettings(period_s=5, grace_s=10), clock)  # type: ignore[arg-type]
    agent.load()
    return agent


async def test_agent_scales_alone_within_bounds_and_reports_back(tmp_path: Path) -> None:
    member, plane, clock = FakeMember(), FakePlane(), Clock(T0)
    agent = _agent(member, plane, tmp_path, clock)
    await agent.step()  # connected: caches the bounds, decides nothing
    assert agent.items == [plane.item] and not agent.decisions and not agent.overrides

    member.measured = 2.0  # 200 % of what the pods request, against a 50 % target
    plane.up = None  # a control plane that answers with errors is not a cut: it still decides
    for t in (0, 20, 40):
        clock.t = T0 - 60 + t
        await agent.step()
    assert not agent.decisions and agent.unreachable_since is None
    clock.t = T0
    plane.up = False
    await agent.step()
    clock.t = T0 + 9
    await agent.step()
    assert not agent.decisions  # not cut off yet: the grace has not passed
    clock.t = T0 + 10
    await agent.step()
    assert not agent.decisions  # no usage read yet: no decision on no data
    await agent.works.reconcile_once()  # the Work agent reads the workload's pods and PodMetrics
    await agent.step()
    # the central rule, ceil(2 × 200 / 50) = 8, bounded by max 5 − the other cluster's 1 → 4
    [d] = agent.decisions
    assert (d["fromReplicas"], d["toReplicas"], d["total"], d["autoscaler"], d["uid"]) == (4 - 2, 4, 5, "web", "u1")
    assert d["utilisation"] == {"cpu": 200.0} and agent.overrides == {"Deployment/default/web": 4}
    assert "w1" not in agent.works.applied  # the Work is applied again ...
    await agent.works.reconcile_once()
    assert member.applied[-1]["spec"]["replicas"] == 4  # ... with the local count
    assert member.applied[-1]["metadata"]["name"] == "web"

    member.allocated, member.measured = 2.0, 0.4  # load gone: 20 %
    clock.t = T0 + 15
    await agent.works.reconcile_once()
    await agent.step()
    assert len(agent.decisions) == 1  # the default scale-down window (300 s) holds the count

    # a restarted agent keeps its local count and its decisions
    again = _agent(member, plane, tmp_path, clock)
    assert again.overrides == {"Deployment/default/web": 4} and again.decisions == agent.decisions

    plane.up = True
    clock.t = T0 + 20
    await again.step()
    assert [r["decisions"][-1]["total"] for r in plane.reports] == [5]
    assert not again.decisions and not again.overrides
    assert again.replicas_for({"kind": "Deployment", "metadata": {"namespace": "default", "name": "web"}}) is None
    saved = json.loads((tmp_path / "autonomy.json").read_text())
    assert saved["decisions"] == [] and saved["overrides"] == {}
