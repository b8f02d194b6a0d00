"""``POST /api/v1/clusters/{name}/drain``: the one drain the CLI and the dashboard call."""

from __future__ import annotations

import json

from drods.model.kinds import BINDING, MIGRATION_PLAN, by_kind
from tests.api.conftest import Api

HOOK = {"command": {"image": "busybox", "command": ["sh", "-c", "true"]}}


async def _placed(api: Api, name: str, kind: str, cluster: str) -> None:
    registry = api.app.state.ctx.registry  # type: ignore[attr-defined]
    ref = {"apiVersion": "apps/v1", "kind": kind, "name": name, "namespace": "default"}
    await registry.create(BINDING, {"metadata": {"name": name}, "spec": {"resource": ref, "replicas": 2}})
    await registry.update_status(BINDING, name, {"placement": [{"cluster": cluster, "replicas": 2}]})


async def test_drain_cordons_and_moves_everything_placed_there(api: Api) -> None:
    for c in ("a", "b"):
        assert (await api.call("POST", "/api/v1/clusters", json={"name": c})).status_code == 201
    registry = api.app.state.ctx.registry  # type: ignore[attr-defined]
    sts = by_kind("apps/v1", "StatefulSet")
    assert sts is not None
    await registry.create(sts, {"metadata": {"name": "db", "namespace": "default",
                                             "annotations": {"multicluster.io/migration-hook": json.dumps(HOOK)}},
                                "spec": {"replicas": 2, "serviceName": "db", "selector": {"matchLabels": {"app": "db"}},
                                         "template": {"metadata": {"labels": {"app": "db"}},
                                                      "spec": {"containers": [{"name": "db", "image": "pg"}]}}}})
    await _placed(api, "web", "Deployment", "a")
    await _placed(api, "db", "StatefulSet", "a")
    await _placed(api, "other", "Deployment", "b")

    # a viewer may not, an unknown cluster is a 404: nothing changes
    r = await api.call("POST", "/api/v1/clusters/a/drain", role="viewer", json={})
    assert r.status_code == 403 and r.json()["code"] == "FORBIDDEN"
    r = await api.call("POST", "/api/v1/clusters/nowhere/drain", role="operator", json={})
    assert r.status_code == 404 and set(r.json()) == {"code", "message", "details"}
    assert (await api.call("GET", "/api/v1/clusters/a")).json().get("unschedulable") is not True

    r = await api.call("POST", "/api/v1/clusters/a/drain", role="operator", json={"reason": "kernel upgrade"})
    assert r.status_code == 200, r.text
    out = r.json()
    assert out["cordoned"] is True and out["rescheduled"] == ["web"] and out["replicas"] == 4
    assert len(out["migrationPlans"]) == 1 and out["migrationPlans"][0].startswith("default/db-")
    assert (await api.call("GET", "/api/v1/clusters/a")).json()["unschedulable"] is True
    web = await registry.get(BINDING, "web")
    assert web["spec"]["rescheduleTriggeredAt"]
    assert web["metadata"]["annotations"]["multicluster.io/reschedule-reason"] == "drain a: kernel upgrade"
    plan = await registry.get(MIGRATION_PLAN, out["migrationPlans"][0].split("/")[1], "default")
    assert plan["spec"]["sourceCluster"] == "a" and plan["spec"]["trigger"] == "Drain"
    assert not (await registry.get(BINDING, "db"))["spec"].get("rescheduleTriggeredAt")  # the plan moves it
    assert not (await registry.get(BINDING, "other"))["spec"].get("rescheduleTriggeredAt")


def _stateful(name: str, annotation: str | None = None) -> dict[str, object]:
    """A StatefulSet keeping its data in a ``data`` claim per replica, with no hook unless annotated."""
    meta: dict[str, object] = {"name": name, "namespace": "default"}
    if annotation is not None:
        meta["annotations"] = {"multicluster.io/migration-hook": annotation}
    return {"metadata": meta,
            "spec": {"replicas": 2, "serviceName": name, "selector": {"matchLabels": {"app": name}},
                     "template": {"metadata": {"labels": {"app": name}},
                                  "spec": {"containers": [{"name": "db", "image": "pg"}]}},
                     "volumeClaimTemplates": [{"metadata": {"name": "data"},
                                               "spec": {"resources": {"requests": {"storage": "1Gi"}}}}]}}


async def test_drain_never_moves_claims_without_their_data(api: Api) -> None:
    """F3: a workload with claims and no data step moves by a VolumeCopy plan with a write freeze; one
    declaring ``None`` by a plan that says it moves without its data; with no mover configured it stays,
    the answer and a decision record say why — never a plain re-placement that would come up empty."""
    from drods.controllers.rescheduler import Rescheduler
    from drods.model.migration import COPY_IMAGE

    for c in ("a", "b", "c"):
        assert (await api.call("POST", "/api/v1/clusters", json={"name": c})).status_code == 201
    ctx = api.app.state.ctx  # type: ignore[attr-defined]
    sts = by_kind("apps/v1", "StatefulSet")
    assert sts is not None
    await ctx.registry.create(sts, _stateful("orders"))
    await ctx.registry.create(sts, _stateful("sessions", "None"))
    await _placed(api, "orders", "StatefulSet", "a")
    await _placed(api, "sessions", "StatefulSet", "a")

    r = await api.call("POST", "/api/v1/clusters/a/drain?dryRun=All", role="operator", json={})
    assert r.status_code == 200, r.text
    assert sorted(r.json()["migrationPlans"]) == ["default/orders", "default/sessions"] and not r.json()["refused"]
    assert not r.json()["rescheduled"] and (await ctx.registry.list(MIGRATION_PLAN, "default"))[0] == []

    r = await api.call("POST", "/api/v1/clusters/a/drain", role="operator", json={})
    assert r.status_code == 200, r.text
    plans = {p["spec"]["workloadRef"]["name"]: p["spec"] for p in (await ctx.registry.list(MIGRATION_PLAN,
                                                                                            "default"))[0]}
    assert plans["orders"]["data"] == {"mover": "VolumeCopy", "image": COPY_IMAGE}
    assert plans["orders"]["switch"]["freezeSeconds"] == 60 and plans["orders"]["trigger"] == "Drain"
    assert plans["sessions"]["data"] == "None"
    for name in ("orders", "sessions"):  # the plans move them, not a plain re-placement
        assert not (await ctx.registry.get(BINDING, name))["spec"].get("rescheduleTriggeredAt")

    # no VolumeCopy image configured: a workload with claims and no data step stays where it is
    ctx.rescheduler = Rescheduler(ctx.registry, volume_copy_image=None)
    await ctx.registry.create(sts, _stateful("ledger"))
    await _placed(api, "ledger", "StatefulSet", "b")
    r = await api.call("POST", "/api/v1/clusters/b/drain", role="operator", json={"reason": "disk swap"})
    assert r.status_code == 200, r.text
    out = r.json()
    assert out["rescheduled"] == [] and out["migrationPlans"] == [] and out["replicas"] == 0
    assert len(out["refused"]) == 1 and out["refused"][0].startswith("ledger: StatefulSet default/ledger keeps")
    assert "migration.volumeCopyImage" in out["refused"][0] and "left in place" in out["message"]
    assert not (await ctx.registry.get(BINDING, "ledger"))["spec"].get("rescheduleTriggeredAt")
    r = await api.call("GET", "/api/v1/decisions?kind=StatefulSet&namespace=default&name=ledger")
    assert r.status_code == 200, r.text
    rec = next(d for d in r.json()["items"] if d["outcome"].get("phase") == "Refused")
    assert rec["type"] == "Eviction" and rec["subject"] == {"kind": "StatefulSet", "namespace": "default",
                                                            "name": "ledger"}
    assert [o["name"] for o in rec["options"] if o["chosen"]] == ["stay on b"]
    assert "drain b: disk swap" in rec["trigger"]["reason"]
