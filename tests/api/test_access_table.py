"""The access table (`drods.api.access`) names every route, ``docs/security.md`` shows it as it is,
and every route answers every caller as the table says: each role (cluster-wide and namespaced),
no token, an expired token, one signed by another key and a revoked one. Writes are sent with
``?dryRun=All`` (honoured or refused after authorisation), so the walk changes nothing."""

from __future__ import annotations

import time
from pathlib import Path

import httpx

from drods.api.access import RULES, rule_for
from drods.api.access_doc import CALLERS, OWN_CLUSTER, OWN_NAMESPACES, YES, answer, rendered
from drods.api.auth import Role, TokenAuthority
from drods.api.status import is_kubernetes_path
from drods.security import tokens as token_records
from drods.server import ServerConfig, build_app
from drods.store.sqlite import SqliteStore
from tests.api.conftest import Api
from tests.api.served_routes import served_routes
from tests.api.test_every_write_dry_run import CASES as WRITES
from tests.api.test_every_write_dry_run import DRY, MC
from tests.monitor_e2e.conftest import eventually

DOC = Path(__file__).resolve().parents[2] / "docs" / "security.md"
DEPLOY = "/apis/apps/v1/namespaces/default/deployments"
CM = "/api/v1/namespaces/default/configmaps"

# (GET, route) → a cheap request: a bogus name is fine (an allowed caller may get a 404).
READS: dict[str, str] = {
    "/healthz": "/healthz", "/livez": "/livez", "/readyz": "/readyz", "/openapi.json": "/openapi.json",
    "/docs": "/docs",
    "/docs/oauth2-redirect": "/docs/oauth2-redirect", "/docs/assets": "/docs/assets/swagger-ui.css",
    "/redoc": "/redoc", "/ui": "/ui/", "/metrics": "/metrics",
    "/api/v1/audit": "/api/v1/audit?limit=1",
    "/api/v1/clusters": "/api/v1/clusters", "/api/v1/clusters/{name}": "/api/v1/clusters/nope",
    "/api/v1/propagationpolicies": "/api/v1/propagationpolicies",
    "/api/v1/propagationpolicies/{name}": "/api/v1/propagationpolicies/nope",
    "/api/v1/monitor/realtime": "/api/v1/monitor/realtime", "/api/v1/monitor/forecast": "/api/v1/monitor/forecast",
    "/api/v1/monitor/surge": "/api/v1/monitor/surge", "/api/v1/monitor/operations": "/api/v1/monitor/operations",
    "/api/v1/monitor/subscriptions": "/api/v1/monitor/subscriptions",
    "/api/v1/monitor/subscriptions/{name}": "/api/v1/monitor/subscriptions/nope",
    "/api/v1/history/metrics": "/api/v1/history/metrics", "/api/v1/history/failures": "/api/v1/history/failures",
    "/api/v1/sync/configs": "/api/v1/sync/configs", "/api/v1/bindings": "/api/v1/bindings",
    "/api/v1/bindings/{binding_id}": "/api/v1/bindings/nope",
    "/api/v1/bindings/{binding_id}/status": "/api/v1/bindings/nope/status",
    "/api/v1/history/schedules": "/api/v1/history/schedules", "/api/v1/scheduler": "/api/v1/scheduler",
    "/api/v1/agent/works": "/api/v1/agent/works?cluster=a",
    "/api/v1/agent/autoscalers": "/api/v1/agent/autoscalers?cluster=a",
    "/api/v1/agent/probe-targets": "/api/v1/agent/probe-targets?cluster=a",
    "/api/v1/autoscaling/history": "/api/v1/autoscaling/history", "/api/v1/decisions": "/api/v1/decisions?limit=1",
    "/api/v1/network/intervals": "/api/v1/network/intervals", "/api/v1/network/status": "/api/v1/network/status",
    "/api/v1/steering/services": "/api/v1/steering/services",
    "/api/v1/steering/services/{service_id}/routes": "/api/v1/steering/services/nope/routes",
    "/api/v1/steering/services/{service_id}/resolve": "/api/v1/steering/services/nope/resolve",
    "/api/v1/steering/directory": "/api/v1/steering/directory", "/api/v1/datasets/access": "/api/v1/datasets/access",
    "/api/v1/traffic": "/api/v1/traffic",
    "/openapi/v3": "/openapi/v3", "/openapi/v3/{gv:path}": "/openapi/v3/apis/apps/v1", "/openapi/v2": "/openapi/v2",
    "/version": "/version", "/api": "/api", "/api/v1": "/api/v1", "/apis": "/apis", "/apis/{group}": "/apis/apps",
    "/apis/{group}/{version}": "/apis/apps/v1",
    "/apis/{group}/{version}/{plural}": "/apis/apps/v1/deployments",
    "/apis/{group}/{version}/{plural}/{name}": f"{MC}/clusters/nope",
    "/apis/{group}/{version}/{plural}/{name}/{sub}": DEPLOY,  # six segments: a namespaced collection
    "/apis/{group}/{version}/namespaces/{ns}/{plural}/{name}": f"{DEPLOY}/nope",
    "/apis/{group}/{version}/namespaces/{ns}/{plural}/{name}/{sub}": f"{DEPLOY}/nope/status",
    "/api/v1/namespaces": "/api/v1/namespaces", "/api/v1/namespaces/{name}": "/api/v1/namespaces/nope",
    "/api/v1/namespaces/{name}/{sub}": "/api/v1/namespaces/nope/finalize",
    "/api/v1/namespaces/{ns}/{plural}": CM, "/api/v1/namespaces/{ns}/{plural}/{name}": f"{CM}/nope",
    "/api/v1/namespaces/{ns}/{plural}/{name}/{sub}": f"{CM}/nope/status", "/api/v1/{plural}": "/api/v1/configmaps",
    "/api/v1/{plural}/{name}": "/api/v1/persistentvolumes/nope",
    "/api/v1/{plural}/{name}/{sub}": "/api/v1/persistentvolumes/nope/status",
    "/api/v1/namespaces/{ns}/bindings": "/api/v1/namespaces/default/bindings",
    "/api/v1/namespaces/{ns}/pods/{name}/binding": "/api/v1/namespaces/default/pods/nope/binding",
    "/api/v1/componentstatuses": "/api/v1/componentstatuses", "/api/v1/componentstatuses/{name}":
        "/api/v1/componentstatuses/nope",
    "/apis/search.karmada.io/v1alpha1/search/cache/{path:path}":
        "/apis/search.karmada.io/v1alpha1/search/cache/apis/apps/v1/namespaces/default/deployments",
    "/apis/search.karmada.io/v1alpha1/proxying/karmada/proxy/{path:path}":
        "/apis/search.karmada.io/v1alpha1/proxying/karmada/proxy/api/v1/namespaces/default/configmaps",
}
NAMESPACE = "default"  # of the namespaced tokens; the cluster-agent's cluster is "a"


def test_every_served_route_has_a_rule_and_every_rule_a_route(tmp_path: Path) -> None:
    app = build_app(ServerConfig(store_url="unused://", data_dir=tmp_path / "data"),
                    store=SqliteStore(str(tmp_path / "drods.db")))
    served = set(served_routes(app))
    assert served - set(RULES) == set(), "routes without an access rule (refused to everyone)"
    assert set(RULES) - served == set(), "rules for routes nobody serves"


def test_the_security_document_shows_the_table_as_enforced() -> None:
    text = DOC.read_text()
    assert rendered(text) == text, "docs/security.md is stale: run scripts/security-table"


def _callers(api: Api) -> dict[str, str]:
    ctx = api.app.state.ctx  # type: ignore[attr-defined]
    issue = ctx.tokens.issue
    return {
        "admin": api.tokens["admin"], "operator": api.tokens["operator"], "viewer": api.tokens["viewer"],
        "cluster-agent": api.tokens["agent-a"],
        "namespaced operator": issue(Role.OPERATOR, subject="ns-op", namespaces=[NAMESPACE]),
        "namespaced viewer": issue(Role.VIEWER, subject="ns-viewer", namespaces=[NAMESPACE]),
    }


async def _revoked_token(api: Api) -> str:
    """An admin token recorded and revoked in the store, as ``drods token revoke`` does; returned once
    the server refuses it."""
    ctx = api.app.state.ctx  # type: ignore[attr-defined]
    token = ctx.tokens.issue(Role.ADMIN, subject="gone", token_id="revoked-1")
    await token_records.record(ctx.store, token_records.TokenRecord("revoked-1", "gone", "admin", time.time()))
    await token_records.revoke(ctx.store, "revoked-1")

    async def refused() -> bool:
        return (await api.client.get("/api/v1/clusters", headers=_bearer(token))).status_code == 401

    await eventually(refused, what="the revocation to reach the server")
    return token


def _bearer(token: str | None) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"} if token is not None else {}


def _request(method: str, route: str) -> tuple[str, dict[str, object]]:
    if method == "GET":
        return READS[route], {}
    path, body, headers = WRITES[(method, route)]
    if body == "live":
        body = {"metadata": {"name": path.rstrip("/").split("/")[-1]}}  # the verdict comes before the body
    return path, {"params": DRY, "json": body, "headers": headers}


def _expected(answer_: str, path: str) -> bool:
    """Whether the table lets this caller through for this concrete request: its own namespace is
    ``default``, its own cluster ``a`` (every request here names that one)."""
    if answer_ == OWN_NAMESPACES:
        return f"/namespaces/{NAMESPACE}/" in path
    return answer_ in (YES, OWN_CLUSTER)


def _denied_shape(path: str, r: httpx.Response) -> bool:
    body = r.json()
    if is_kubernetes_path(path.split("?")[0]):
        return body.get("kind") == "Status" and body.get("code") == r.status_code
    return set(body) == {"code", "message", "details"}


async def test_every_route_answers_every_caller_as_the_table_says(api: Api) -> None:
    assert (await api.call("POST", "/api/v1/clusters", json={"name": "a"})).status_code == 201
    callers: dict[str, str | None] = {**_callers(api), "no token": None}
    bad = {
        "expired": api.app.state.ctx.tokens.issue(Role.ADMIN, ttl_seconds=-60),  # type: ignore[attr-defined]
        "another key": TokenAuthority(b"k" * 48).issue(Role.ADMIN, subject="forged"),
        "revoked": await _revoked_token(api),
    }
    assert {c[0] for c in CALLERS} == set(callers)
    wrong: list[str] = []
    for method, route in sorted(RULES):
        rule = rule_for(method, route)
        assert rule is not None
        path, kw = _request(method, route)
        for caller, token in [*callers.items(), *bad.items()]:
            if caller in bad:
                allowed, refusal = rule.public, 401
            else:
                role, namespaced = next((c[1], c[2]) for c in CALLERS if c[0] == caller)
                allowed = _expected(answer(rule, role, namespaced), path)
                refusal = 401 if token is None else 403
            headers = {**dict(kw.get("headers") or {}), **_bearer(token)}  # type: ignore[call-overload]
            r = await api.client.request(method, path, params=kw.get("params"),  # type: ignore[arg-type]
                                         json=kw.get("json"), headers=headers)
            ok = r.status_code not in (401, 403) if allowed else (r.status_code == refusal and _denied_shape(path, r))
            if not ok:
                wrong.append(f"{method} {route} as {caller}: {r.status_code} {r.text[:120]}")
    assert not wrong, "\n".join(wrong)
