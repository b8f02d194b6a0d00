"""A token limited to namespaces reads the decisions about its namespaces' workloads (walkthrough Y: a
tenant could place a workload and never ask why it went where it did), and nothing else."""

from __future__ import annotations

import time

from drods.api.auth import Role
from drods.machinery.journal import Journal
from drods.model.keys import SCHEDULES_PREFIX
from tests.api.conftest import Api


def _placed(binding: str, workload: dict[str, str] | None) -> dict[str, object]:
    return {"binding": binding, "scheduleType": "FirstSchedule", "scheduler": "test",
            **({"workload": workload} if workload else {}),
            "result": {"phase": "Scheduled", "placement": [{"cluster": "a", "replicas": 1}], "requested": 1,
                       "placed": 1, "message": "scheduled"}}


async def test_a_tenant_reads_its_namespaces_decisions_only(api: Api) -> None:
    ctx = api.app.state.ctx  # type: ignore[attr-defined]
    journal = Journal(ctx.store, SCHEDULES_PREFIX)
    now = time.time()
    for i, (binding, workload) in enumerate([
            ("deployment-team-a-web", {"kind": "Deployment", "namespace": "team-a", "name": "web"}),
            ("deployment-team-b-api", {"kind": "Deployment", "namespace": "team-b", "name": "api"}),
            ("loose", None)]):  # a Binding made through /api/v1/bindings: cluster-scoped, "default/loose"
        await journal.append(_placed(binding, workload), ts=now - i)
    api.tokens["team-a"] = ctx.tokens.issue(Role.VIEWER, subject="team-a", namespaces=["team-a", "default"])

    r = await api.call("GET", "/api/v1/decisions?namespace=team-a", role="team-a")
    assert r.status_code == 200, r.text
    assert [d["subject"] for d in r.json()["items"]] == [{"kind": "Deployment", "namespace": "team-a", "name": "web"}]
    r = await api.call("GET", "/api/v1/decisions?namespace=default", role="team-a")
    assert r.status_code == 200 and r.json()["items"] == [], r.text  # the Binding's record is not a tenant's
    for query in ("", "?namespace=team-b"):
        r = await api.call("GET", f"/api/v1/decisions{query}", role="team-a")
        assert r.status_code == 403 and set(r.json()) == {"code", "message", "details"}, r.text
    r = await api.call("GET", "/api/v1/decisions?namespace=default")  # a cluster-wide token: as before
    assert [d["subject"]["name"] for d in r.json()["items"]] == ["loose"], r.text
