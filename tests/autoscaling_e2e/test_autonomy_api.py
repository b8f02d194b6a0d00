"""The agent's autonomy endpoints over HTTP (M2): only a cluster's own agent (or an admin) may read
its bounds or report decisions; a bad report is refused whole with a clear error and changes
nothing; a report about a workload placed elsewhere adopts nothing."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from drods.api.auth import Role
from tests.autoscaling_e2e.test_load_ramp import DEPLOYMENTS, FHPAS, RPP, deployment, fhpa
from tests.scheduler_e2e.conftest import Plane, eventually

WEB = {"apiVersion": "apps/v1", "kind": "Deployment", "namespace": "default", "name": "web"}


def _decision(**kw: object) -> dict[str, object]:
    return {"workload": WEB, "autoscaler": "web", "time": datetime.now(UTC).isoformat(), "fromReplicas": 2,
            "toReplicas": 4, "total": 4, "utilisation": {"cpu": 180.0}, **kw}


async def test_autonomy_endpoints_are_the_clusters_own_and_validate(plane: Plane) -> None:
    for name in ("east", "west"):
        await plane.register(name)
        await plane.report(name, 30.0)
    await plane.seen("east", "west")
    assert (await plane.call("POST", DEPLOYMENTS, json=deployment())).status_code == 201
    r = await plane.call("POST", RPP, json={
        "apiVersion": "multicluster.io/v1alpha1", "kind": "ResourcePlacementPolicy", "metadata": {"name": "web"},
        "spec": {"resourceSelector": {**WEB}, "targetClusters": [{"selectorType": "name", "values": ["east"]}]}})
    assert r.status_code == 201, r.text
    assert (await plane.call("POST", FHPAS, json=fhpa())).status_code == 201
    plane.tokens["east"] = plane.ctx.tokens.issue(Role.CLUSTER_AGENT, cluster="east")
    plane.tokens["west"] = plane.ctx.tokens.issue(Role.CLUSTER_AGENT, cluster="west")

    async def cached() -> list[dict[str, object]] | None:
        r = await plane.call("GET", "/api/v1/agent/autoscalers", role="east")
        assert r.status_code == 200, r.text
        return r.json()["items"] or None

    [item] = await eventually(cached, 10.0, "web placed on east with its bounds")
    assert (item["minReplicas"], item["maxReplicas"], item["local"]) == (2, 24, item["total"])
    assert (await plane.call("GET", "/api/v1/agent/autoscalers", role="west")).json()["items"] == []
    r = await plane.call("GET", "/api/v1/agent/autoscalers?cluster=east", role="west")
    assert r.status_code == 403, r.text  # another cluster's
    assert (await plane.call("GET", "/api/v1/agent/autoscalers", role="viewer")).status_code == 403

    before = (await plane.call("GET", f"{FHPAS}/web")).json()["status"]
    future = (datetime.now(UTC) + timedelta(hours=1)).isoformat()
    for bad in ({"decisions": []}, {"decisions": [_decision(time=future)]}, {"decisions": [_decision(total=-1)]},
                {"decisions": [_decision(time="yesterday")]}, {"decisions": [_decision(extra=1)]}):
        r = await plane.call("POST", "/api/v1/agent/autonomy", role="east", json=bad)
        assert r.status_code == 422 and r.json()["code"] == "VALIDATION_FAILED", (bad, r.text)
    r = await plane.call("POST", "/api/v1/agent/autonomy", role="west", json={"decisions": [_decision()]})
    assert r.status_code == 200 and r.json()["results"][0]["outcome"] == "moved", r.text  # not west's
    after = (await plane.call("GET", f"{FHPAS}/web")).json()["status"]
    assert after.get("desiredReplicas") == before.get("desiredReplicas") and "autonomy" not in after

    r = await plane.call("POST", "/api/v1/agent/autonomy", role="east", json={"decisions": [_decision()]})
    assert r.status_code == 200 and r.json()["results"][0]["outcome"] == "adopted", r.text
    st = (await plane.call("GET", f"{FHPAS}/web")).json()["status"]
    assert st["desiredReplicas"] == 4 and st["autonomy"]["cluster"] == "east"
