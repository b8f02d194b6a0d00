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
