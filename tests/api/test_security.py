"""SEC1/SEC3: who may do what, and the audit trail of it."""

from __future__ import annotations

import json
import time

import jwt
import pytest

from drods.store import StoreError, Unavailable
from tests.api.conftest import Api


async def test_no_token_is_401_and_health_is_open(api: Api) -> None:
    r = await api.client.get("/api/v1/clusters")
    assert r.status_code == 401 and r.json()["code"] == "UNAUTHENTICATED"
    assert r.headers["www-authenticate"] == "Bearer"
    assert (await api.client.get("/healthz")).status_code == 200
    assert (await api.client.get("/readyz")).status_code == 200


@pytest.mark.parametrize("mangle", ["forged", "expired", "garbage", "wrong-scheme"])
async def test_bad_tokens_are_refused(api: Api, mangle: str) -> None:
    good = api.tokens["admin"]
    if mangle == "forged":
        claims = jwt.decode(good, options={"verify_signature": False})
        token = jwt.encode(claims, "not-the-key", algorithm="HS256")
        header = f"Bearer {token}"
    elif mangle == "expired":
        ctx = api.app.state.ctx  # type: ignore[attr-defined]
        claims = jwt.decode(good, options={"verify_signature": False}) | {"exp": int(time.time()) - 10}
        header = f"Bearer {jwt.encode(claims, ctx.tokens._key, algorithm='HS256')}"
    elif mangle == "garbage":
        header = "Bearer abc.def.ghi"
    else:
        header = f"Basic {good}"
    r = await api.client.get("/api/v1/clusters", headers={"Authorization": header})
    assert r.status_code == 401, r.text


async def test_roles(api: Api) -> None:
    body = {"name": "a"}
    r = await api.call("POST", "/api/v1/clusters", role="viewer", json=body)
    assert r.status_code == 403 and r.json()["code"] == "FORBIDDEN"
    assert (await api.call("POST", "/api/v1/clusters", role="operator", json=body)).status_code == 201
    assert (await api.call("GET", "/api/v1/clusters", role="viewer")).status_code == 200
    assert (await api.call("GET", "/api/v1/clusters", role="agent-a")).status_code == 403
    assert (await api.call("GET", "/api/v1/audit", role="operator")).status_code == 403
    assert (await api.call("DELETE", "/api/v1/clusters/a", role="viewer")).status_code == 403
    assert (await api.call("GET", "/api/v1/clusters/a")).status_code == 200  # the refused delete did nothing


async def test_audit_records_who_what_result(api: Api) -> None:
    # not the agent's cluster "a": a deleted cluster's agent tokens issued before are refused (401), and the
    # agent's report below is to be refused for naming another cluster (403)
    await api.call("POST", "/api/v1/clusters", role="operator", json={"name": "gone"})
    await api.call("POST", "/api/v1/clusters", role="viewer", json={"name": "b"})
    await api.call("DELETE", "/api/v1/clusters/gone", role="admin")
    r = await api.call("GET", "/api/v1/audit")
    entries = [(e["subject"], e["verb"], e["path"], e["result"]) for e in r.json()["items"]]
    assert entries == [
        ("test-operator", "POST", "/api/v1/clusters", 201),
        ("test-viewer", "POST", "/api/v1/clusters", 403),
        ("test-admin", "DELETE", "/api/v1/clusters/gone", 200),
    ]
    # a refusal says why, an acknowledged change says nothing
    said = {e["result"]: e["message"] for e in r.json()["items"]}
    assert said == {201: "", 403: "FORBIDDEN: role 'viewer' may not write", 200: ""}, said
    # a report is no change (not audited) — but one refused is someone trying: recorded, with where from
    await api.call("POST", "/api/v1/clusters", json={"name": "b"})
    other = await api.call("PUT", "/api/v1/metrics", role="agent-a", json={"cluster": "b", "cpuUsage": 10})
    forged = await api.client.put("/api/v1/network/status", headers={"Authorization": "Bearer x.y.z"},
                                  json={"measurements": []})
    assert (other.status_code, forged.status_code) == (403, 401), other.text
    reports = [e for e in (await api.call("GET", "/api/v1/audit")).json()["items"]
               if e["path"] in ("/api/v1/metrics", "/api/v1/network/status")]
    assert [(e["subject"], e["path"], e["result"]) for e in reports] == [
        ("agent-a", "/api/v1/metrics", 403), ("anonymous", "/api/v1/network/status", 401)], reports
    assert all(e["sourceIPs"] and e["userAgent"] for e in reports), reports
    assert "may only act for cluster 'a'" in reports[0]["message"], reports
    assert reports[1]["message"].startswith("UNAUTHENTICATED"), reports
    # a dry run changes nothing (not audited) — but one refused to its caller is someone trying, as above
    assert (await api.call("POST", "/api/v1/clusters?dryRun=All", json={"name": "z"})).status_code == 201
    tried = await api.call("DELETE", "/api/v1/clusters/b?dryRun=All", role="viewer")
    assert tried.status_code == 403, tried.text
    items = (await api.call("GET", "/api/v1/audit")).json()["items"]
    dry = [e for e in items if e["path"] == "/api/v1/clusters/b"
           or e["path"] == "/api/v1/clusters" and e["subject"] == "test-admin"]
    assert [(e["subject"], e["verb"], e["path"], e["result"]) for e in dry] == [
        ("test-admin", "POST", "/api/v1/clusters", 201),  # the cluster b registered above, not the dry run's z
        ("test-viewer", "DELETE", "/api/v1/clusters/b", 403)], dry
    assert [e.get("dryRun", False) for e in dry] == [False, True], dry  # the refusal was of a dry run, not of a delete
    r = await api.call("GET", "/api/v1/audit?startTime=2999-01-01T00:00:00Z")
    assert r.json()["items"] == []


async def test_audit_carries_the_change_and_filters(api: Api) -> None:
    await api.call("POST", "/api/v1/clusters", json={"name": "c1", "region": "eu",
                                                      "credentials": {"token": "cred-value-1"}})
    await api.call("PATCH", "/api/v1/clusters/c1", json={"region": "us"},
                   headers={"content-type": "application/merge-patch+json"})
    secret = {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "s", "namespace": "team-a"},
              "stringData": {"password": "secret-value-2"}}
    assert (await api.call("POST", "/api/v1/namespaces/team-a/secrets", json=secret)).status_code == 201
    # as `kubectl apply` sends it: the applied document, values and all, in an annotation
    applied = {"apiVersion": "v1", "kind": "Secret", "metadata": {
        "name": "applied", "namespace": "team-a", "labels": {"app": "x"},
        "annotations": {"kubectl.kubernetes.io/last-applied-configuration": json.dumps(
            {"kind": "Secret", "stringData": {"token": "secret-value-3"}})}}, "stringData": {"token": "secret-value-3"}}
    assert (await api.call("POST", "/api/v1/namespaces/team-a/secrets", json=applied)).status_code == 201
    seen = (await api.call("GET", "/api/v1/namespaces/team-a/secrets/applied", role="viewer")).json()
    assert "secret-value-3" not in json.dumps(seen) and seen["metadata"]["labels"] == {"app": "x"}
    r = await api.call("POST", "/api/v1/metrics/events", json={"cluster": "c1", "type": "NodeNotReady"})
    assert r.status_code == 201
    everything = (await api.call("GET", "/api/v1/audit")).json()["items"]
    assert "cred-value-1" not in str(everything) and "secret-value-2" not in str(everything)
    assert "secret-value-3" not in str(everything)
    created = next(c for e in everything for c in e.get("changes") or [] if c["name"] == "applied")
    assert {"op": "add", "path": "/metadata/labels", "value": {"app": "x"}} in created["patch"] or any(
        op["path"] == "/metadata" and op["value"]["labels"] == {"app": "x"} for op in created["patch"])
    patched = [e for e in everything if e["verb"] == "PATCH"]
    assert patched and patched[0]["result"] == 200 and patched[0]["role"] == "admin"
    (change,) = patched[0]["changes"]
    assert change["kind"] == "Cluster" and change["name"] == "c1" and change["verb"] == "update"
    assert {"op": "replace", "path": "/spec/region", "value": "us"} in change["patch"]
    assert any(e["path"] == "/api/v1/metrics/events" and e["result"] == 201 for e in everything)  # events too
    secrets = (await api.call("GET", "/api/v1/audit", params={"kind": "Secret", "namespace": "team-a"})).json()["items"]
    assert [e["changes"][0]["name"] for e in secrets] == ["s", "applied"]
    patch = secrets[0]["changes"][0]["patch"]
    assert [op["value"] for op in patch if op["path"] == "/data"] == ["***"]  # stringData stored as data
    assert (await api.call("GET", "/api/v1/audit", params={"subject": "nobody"})).json()["items"] == []


async def test_a_change_that_cannot_be_audited_is_refused_and_not_made(api: Api,
                                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    audit = api.app.state.ctx.audit  # type: ignore[attr-defined]

    async def broken(entry: object) -> None:
        raise StoreError("audit store unavailable")

    monkeypatch.setattr(audit, "append", broken)
    r = await api.call("POST", "/api/v1/clusters", json={"name": "unaudited"})
    assert r.status_code == 503 and r.json()["code"] == "AUDIT_UNAVAILABLE", r.text
    r = await api.call("POST", "/apis/multicluster.io/v1alpha1/clusters",
                       json={"apiVersion": "multicluster.io/v1alpha1", "kind": "Cluster",
                             "metadata": {"name": "unaudited"}, "spec": {}})
    assert r.status_code == 503 and r.json()["kind"] == "Status"

    async def store_away(entry: object) -> None:
        raise Unavailable("etcd unreachable at 127.0.0.1:2379")

    monkeypatch.setattr(audit, "append", store_away)  # the store itself gone: said so, not blamed on the audit
    r = await api.call("POST", "/api/v1/clusters", json={"name": "unaudited"})
    assert r.status_code == 503 and r.json()["code"] == "STORE_UNAVAILABLE", r.text
    assert "etcd unreachable" in r.json()["message"] and "nothing was changed" in r.json()["message"]
    # kubectl retries a 503 only with Retry-After: a write refused for its audit record says when, as a read does
    assert r.headers.get("retry-after") == "5", dict(r.headers)
    r = await api.call("POST", "/api/v1/namespaces/default/configmaps",
                       json={"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "unaudited"}})
    assert r.status_code == 503 and r.headers.get("retry-after") == "5", (r.text, dict(r.headers))
    monkeypatch.undo()
    assert (await api.call("GET", "/api/v1/clusters/unaudited")).status_code == 404
    assert (await api.call("GET", "/api/v1/clusters")).status_code == 200  # reads need no audit


async def test_errors_have_one_shape(api: Api) -> None:
    cases = [
        ("GET", "/api/v1/nope", None, 404, "NOT_FOUND"),
        ("PUT", "/api/v1/clusters", b"{}", 405, "METHOD_NOT_ALLOWED"),
        ("POST", "/api/v1/clusters", b"{not json", 400, "MALFORMED_BODY"),
        ("POST", "/api/v1/clusters", b'{"name": 5}', 422, "VALIDATION_FAILED"),
        ("POST", "/api/v1/clusters", b'{"name": "ok", "unknownField": 1}', 422, "VALIDATION_FAILED"),
        ("PATCH", "/api/v1/clusters/zzz", b"{}", 404, "CLUSTER_NOT_FOUND"),
    ]
    for method, path, body, status, code in cases:
        r = await api.call(method, path, content=body, headers={"content-type": "application/json"})
        assert r.status_code == status, (method, path, r.text)
        assert set(r.json()) == {"code", "message", "details"} and r.json()["code"] == code
    r = await api.call("GET", "/apis/multicluster.io/v1alpha1/widgets")
    assert r.status_code == 404 and r.json()["kind"] == "Status" and r.json()["code"] == 404


async def test_prometheus_metrics(api: Api) -> None:
    await api.call("GET", "/api/v1/clusters")
    r = await api.call("GET", "/metrics", role="viewer")
    assert r.status_code == 200
    assert 'drods_apiserver_requests_total{code="200",method="GET",route="/api/v1/clusters"}' in r.text
    assert "drods_store_operation_duration_seconds_bucket" in r.text
    assert "drods_event_loop_lag_seconds_bucket" in r.text  # the process's manager measures its loop


async def test_rs256_tokens_from_a_configured_public_key(tmp_path) -> None:  # type: ignore[no-untyped-def]
    """Tokens issued elsewhere (RS256) are accepted when their public key is configured; others are not."""
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric import rsa

    from drods.api.auth import Role, TokenAuthority

    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    public_pem = key.public_key().public_bytes(serialization.Encoding.PEM,
                                               serialization.PublicFormat.SubjectPublicKeyInfo).decode()
    authority = TokenAuthority(b"x" * 48, rs256_public_key=public_pem)
    token = jwt.encode({"sub": "sso-user", "role": "viewer", "iat": int(time.time()), "exp": int(time.time()) + 60},
                       key, algorithm="RS256")
    principal = authority.verify(token)
    assert principal.subject == "sso-user" and principal.role is Role.VIEWER
    other = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    forged = jwt.encode({"sub": "x", "role": "admin", "iat": int(time.time()), "exp": int(time.time()) + 60},
                        other, algorithm="RS256")
    with pytest.raises(Exception) as err:
        authority.verify(forged)
    assert getattr(err.value, "status", None) == 401
    # Without a configured key RS256 is not accepted at all.
    with pytest.raises(Exception) as err:
        TokenAuthority(b"x" * 48).verify(token)
    assert getattr(err.value, "status", None) == 401


async def test_a_cluster_agent_gives_feedback_for_its_own_cluster_only(api: Api) -> None:
    for name in ("a", "b"):
        assert (await api.call("POST", "/api/v1/clusters", json={"name": name})).status_code == 201
    dep = {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web", "namespace": "default"},
           "spec": {"replicas": 1, "selector": {"matchLabels": {"app": "web"}}, "template": {
               "metadata": {"labels": {"app": "web"}}, "spec": {"containers": [{"name": "c", "image": "x"}]}}}}
    assert (await api.call("POST", "/apis/apps/v1/namespaces/default/deployments", json=dep)).status_code == 201
    body = {"workload": {"apiVersion": "apps/v1", "kind": "Deployment", "namespace": "default", "name": "web"},
            "metrics": {"latencyP99Ms": 5000.0}}
    r = await api.call("PUT", "/api/v1/feedback", role="agent-a", json={**body, "cluster": "b"})
    assert r.status_code == 403 and r.json()["details"]["tokenCluster"] == "a", r.text
    r = await api.call("PUT", "/api/v1/feedback", role="agent-a", json=body)  # the whole workload's: not an agent's
    assert r.status_code == 403, r.text
    r = await api.call("PUT", "/api/v1/feedback", role="agent-a", json={**body, "cluster": "a"})
    assert r.status_code == 200 and r.json()["accepted"], r.text
    assert (await api.call("PUT", "/api/v1/feedback", json=body)).status_code == 200  # an operator's or admin's


async def test_audit_filters_find_a_refusal_by_the_object_its_path_names(api: Api) -> None:
    """A refusal changes nothing, so it has no changes to match: the namespace and kind filters found none
    of them (``drods audit --namespace team-b`` said "No audit entries" beside a refused delete there)."""
    r = await api.call("DELETE", "/apis/apps/v1/namespaces/team-b/deployments/web", role="viewer")
    assert r.status_code == 403
    for query in ("namespace=team-b", "kind=Deployment", "namespace=team-b&kind=deployments"):
        items = (await api.call("GET", f"/api/v1/audit?{query}")).json()["items"]
        assert [(e["verb"], e["result"]) for e in items] == [("DELETE", 403)], (query, items)
    assert (await api.call("GET", "/api/v1/audit?namespace=team-a")).json()["items"] == []
    assert (await api.call("GET", "/api/v1/audit?kind=ConfigMap")).json()["items"] == []
