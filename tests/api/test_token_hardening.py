"""Tokens issued elsewhere (RS256 from a public key or a JWKS) must expire and name the configured
issuer and audience; the HS256 signing secret has a minimum length; a deleted Cluster's agent tokens
are revoked; domain configuration is not readable by a viewer; the flat routes hold typed bodies to the
Kubernetes paths' depth limit."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import jwt
import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa
from typer.testing import CliRunner

from drods.api.auth import Role, TokenAuthority, issue_recorded, load_or_create_signing_key
from drods.errors import ApiError
from drods.server import ServerConfig, build_app
from drods.store import Store
from tests.api.conftest import Api, served

IDP = "https://idp.example.com"
AUDIENCE = "drods-prod"


@pytest.fixture(scope="module")
def rsa_key() -> tuple[rsa.RSAPrivateKey, str]:
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    pem = key.public_key().public_bytes(serialization.Encoding.PEM,
                                        serialization.PublicFormat.SubjectPublicKeyInfo).decode()
    return key, pem


def rs_token(key: rsa.RSAPrivateKey, **claims: Any) -> str:
    """An RS256 admin token from the identity provider for this deployment; a claim given as None is left out."""
    now = int(time.time())
    base: dict[str, Any] = {"sub": "sso-user", "role": "admin", "iat": now, "exp": now + 300,
                            "iss": IDP, "aud": AUDIENCE}
    return jwt.encode({k: v for k, v in {**base, **claims}.items() if v is not None}, key, algorithm="RS256")


def refused(authority: TokenAuthority, token: str) -> str:
    with pytest.raises(ApiError) as err:
        authority.verify(token)
    assert err.value.status == 401
    return err.value.message


def test_an_external_token_must_expire_and_name_the_configured_issuer_and_audience(
        rsa_key: tuple[rsa.RSAPrivateKey, str]) -> None:
    key, pem = rsa_key
    authority = TokenAuthority(b"x" * 48, rs256_public_key=pem, issuer=IDP, audience=AUDIENCE)
    assert authority.verify(rs_token(key)).role is Role.ADMIN
    assert "issuer" in refused(authority, rs_token(key, iss="https://some-other-idp")).lower()
    assert "audience" in refused(authority, rs_token(key, aud="some-other-app")).lower()
    assert "exp" in refused(authority, rs_token(key, exp=None))  # it could never be revoked
    assert "iss" in refused(authority, rs_token(key, iss=None))
    assert "aud" in refused(authority, rs_token(key, aud=None))
    # DRO-DS's own HS256 tokens are as before: no audience, issuer drods
    own = authority.issue(Role.OPERATOR, subject="ops")
    assert "aud" not in jwt.decode(own, options={"verify_signature": False})
    assert authority.verify(own).subject == "ops"


def test_an_external_key_without_issuer_and_audience_warns_and_still_needs_exp(
        rsa_key: tuple[rsa.RSAPrivateKey, str], caplog: pytest.LogCaptureFixture) -> None:
    key, pem = rsa_key
    with caplog.at_level(logging.WARNING, logger="drods.auth"):
        authority = TokenAuthority(b"x" * 48, rs256_public_key=pem)
    assert "api.jwtIssuer" in caplog.text and "api.jwtAudience" in caplog.text, caplog.text
    assert authority.verify(rs_token(key, iss="https://any", aud="any")).role is Role.ADMIN  # not configured
    assert "exp" in refused(authority, rs_token(key, exp=None))
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="drods.auth"):
        TokenAuthority(b"x" * 48, rs256_public_key=pem, issuer=IDP)
    assert "api.jwtAudience" in caplog.text and "api.jwtIssuer or" not in caplog.text, caplog.text
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="drods.auth"):
        TokenAuthority(b"x" * 48, rs256_public_key=pem, issuer=IDP, audience=AUDIENCE)
        TokenAuthority(b"x" * 48)  # no external tokens accepted: nothing to warn of
    assert caplog.text == ""


def test_the_configuration_file_sets_issuer_and_audience_and_the_flags_win(
        rsa_key: tuple[rsa.RSAPrivateKey, str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import json

    import drods.server
    from drods.cli.main import app
    from drods.store.sqlite import SqliteStore

    key, pem = rsa_key
    (tmp_path / "rs.pub").write_text(pem)
    (tmp_path / "drods.yaml").write_text(json.dumps({
        "apiVersion": "config.drods.io/v1alpha1", "kind": "DRODSConfiguration",
        "api": {"jwtIssuer": IDP, "jwtAudience": "from-the-file"}}))
    started: list[ServerConfig] = []
    monkeypatch.setattr(drods.server, "run", started.append)
    r = CliRunner().invoke(app, ["serve", "--data-dir", str(tmp_path), "--jwt-public-key", str(tmp_path / "rs.pub"),
                                 "--jwt-audience", AUDIENCE])
    assert r.exit_code == 0, r.output
    config = started[0]
    assert (config.settings.api.jwtIssuer, config.settings.api.jwtAudience) == (IDP, AUDIENCE)
    served = build_app(config, store=SqliteStore(str(tmp_path / "drods.db")))
    authority = served.state.ctx.tokens
    assert authority.verify(rs_token(key)).subject == "sso-user"
    refused(authority, rs_token(key, aud="from-the-file"))
    refused(authority, rs_token(key, iss="https://some-other-idp"))


def test_a_short_signing_secret_is_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import drods.server
    from drods.api.auth import WeakSigningKey
    from drods.cli.main import app

    monkeypatch.setenv("DRODS_JWT_SECRET", "a")
    with pytest.raises(WeakSigningKey, match="DRODS_JWT_SECRET.*at least 32"):
        load_or_create_signing_key(tmp_path / "jwt.key")
    monkeypatch.setattr(drods.server, "run", lambda config: pytest.fail("served with a 1-byte secret"))
    r = CliRunner().invoke(app, ["serve", "--data-dir", str(tmp_path)])
    assert r.exit_code == 2 and "DRODS_JWT_SECRET" in r.output and "at least 32" in r.output, r.output
    r = CliRunner().invoke(app, ["token", "create", "--role", "admin", "--data-dir", str(tmp_path)])
    assert r.exit_code == 2 and "DRODS_JWT_SECRET" in r.output and "eyJ" not in r.output, r.output
    monkeypatch.setenv("DRODS_JWT_SECRET", "s" * 32)
    assert load_or_create_signing_key(tmp_path / "jwt.key") == b"s" * 32
    monkeypatch.delenv("DRODS_JWT_SECRET")
    (tmp_path / "jwt.key").write_text("short")
    with pytest.raises(WeakSigningKey, match="jwt.key"):
        load_or_create_signing_key(tmp_path / "jwt.key")


async def test_deleting_a_cluster_revokes_its_agent_tokens(api: Api) -> None:
    """A cluster registered again under the name of a deleted one must not accept the old one's
    agents (its token named only the cluster's name)."""
    ctx = api.app.state.ctx  # type: ignore[attr-defined]
    paths = {"flat": "/api/v1/clusters/c2", "kubernetes": "/apis/multicluster.io/v1alpha1/clusters/c2"}
    for how, path in paths.items():
        assert (await api.call("POST", "/api/v1/clusters", json={"name": "c2"})).status_code == 201
        agent = await issue_recorded(ctx.tokens, ctx.store, Role.CLUSTER_AGENT, cluster="c2", subject=f"agent:{how}")
        other = await issue_recorded(ctx.tokens, ctx.store, Role.CLUSTER_AGENT, cluster="c3", subject="agent:c3")
        api.tokens.update({"c2": agent, "c3": other})
        assert (await api.call("GET", "/api/v1/agent/works", role="c2")).status_code == 200
        # a dry run changes nothing, the agent's token included
        assert (await api.call("DELETE", path, params={"dryRun": "All"})).status_code == 200
        assert (await api.call("GET", "/api/v1/agent/works", role="c2")).status_code == 200
        assert (await api.call("DELETE", path)).status_code == 200
        r = await api.call("GET", "/api/v1/agent/works", role="c2")
        assert r.status_code == 401 and "revoked" in r.json()["message"], (how, r.text)
        assert (await api.call("POST", "/api/v1/clusters", json={"name": "c2"})).status_code == 201
        assert (await api.call("GET", "/api/v1/agent/works", role="c2")).status_code == 401  # re-created: still
        assert (await api.call("GET", "/api/v1/agent/works", role="c3")).status_code == 200  # another cluster's
        # the deletion's audit record names the revocation (the token's ID, never the token)
        items = (await api.call("GET", "/api/v1/audit")).json()["items"]
        deletion = next(e for e in reversed(items) if e["verb"] == "DELETE" and e["path"] == path)
        token_id = jwt.decode(agent, options={"verify_signature": False})["jti"]
        assert {"kind": "Token", "name": token_id, "verb": "revoke"}.items() <= next(
            c for c in deletion["changes"] if c["kind"] == "Token").items()
        assert agent not in str(items)
        assert (await api.call("DELETE", "/api/v1/clusters/c2")).status_code == 200


async def test_a_deleted_clusters_agent_tokens_without_a_record_are_refused_everywhere(
        api: Api, store_factory: Callable[[], Store], tmp_path: Path) -> None:
    """A token signed with the key outside the CLI has no record to revoke: the deletion's cutoff refuses
    it all the same, on this server at once and on another that follows the store, after the cluster
    is registered again too; a token issued since is accepted."""
    key = load_or_create_signing_key(tmp_path / "data" / "jwt.key")
    before = int(time.time()) - 5

    def unrecorded(iat: int) -> str:
        return jwt.encode({"iss": "drods", "sub": "agent:c2", "role": "cluster-agent", "cluster": "c2",
                           "iat": iat, "exp": iat + 3600, "jti": f"by-hand-{iat}"}, key, algorithm="HS256")

    api.tokens.update({"old": unrecorded(before), "c3": await issue_recorded(
        api.app.state.ctx.tokens, api.app.state.ctx.store, Role.CLUSTER_AGENT, cluster="c3")})  # type: ignore[attr-defined]
    assert (await api.call("POST", "/api/v1/clusters", json={"name": "c2"})).status_code == 201
    assert (await api.call("GET", "/api/v1/agent/works", role="old")).status_code == 200
    assert (await api.call("DELETE", "/apis/multicluster.io/v1alpha1/clusters/c2")).status_code == 200
    r = await api.call("GET", "/api/v1/agent/works", role="old")
    assert r.status_code == 401 and "issued before cluster 'c2' was deleted" in r.json()["message"], r.text
    assert (await api.call("POST", "/api/v1/clusters", json={"name": "c2"})).status_code == 201
    api.tokens["new"] = unrecorded(int(time.time()))  # the deletion's second: registered again at once
    # another API server over the same store (or this one restarted) learns the cutoff from the store
    other = build_app(ServerConfig(store_url="unused://", data_dir=tmp_path / "data"), store=store_factory())
    async with served(other, api.tokens) as api2:
        for server in (api, api2):
            assert (await server.call("GET", "/api/v1/agent/works", role="old")).status_code == 401
            assert (await server.call("GET", "/api/v1/agent/works", role="new")).status_code == 200
            assert (await server.call("GET", "/api/v1/agent/works", role="c3")).status_code == 200


async def test_a_viewer_reads_domain_configuration_keys_not_values(api: Api) -> None:
    body = {"cluster": "c1", "configs": {"dbPassword": "SYNCCFG_MARKER", "pool": {"size": 4}}}
    assert (await api.call("PUT", "/api/v1/sync/configs", json=body)).status_code == 200
    r = await api.call("GET", "/api/v1/sync/configs", params={"cluster": "c1"}, role="viewer")
    assert r.status_code == 200, r.text
    assert r.json()["configs"] == {"dbPassword": "***", "pool": "***"} and r.json()["redacted"] is True
    assert "SYNCCFG_MARKER" not in r.text
    for role in ("operator", "admin"):
        r = await api.call("GET", "/api/v1/sync/configs", params={"cluster": "c1"}, role=role)
        assert r.json()["configs"] == body["configs"] and "redacted" not in r.json(), r.text


def _nested(depth: int) -> str:
    """JSON ``{"a": {"a": … 1}}`` nesting ``depth`` levels."""
    return '{"a":' * depth + "1" + "}" * depth


@pytest.mark.parametrize("depth", [150, 1000])
async def test_flat_routes_refuse_a_body_nested_deeper_than_the_kubernetes_paths_accept(api: Api, depth: int) -> None:
    headers = {"content-type": "application/json"}
    bodies = {("PUT", "/api/v1/sync/configs"): '{"configs":' + _nested(depth - 1) + "}",
              ("POST", "/api/v1/clusters"): '{"name": "deep", "labels":' + _nested(depth - 1) + "}",
              ("PUT", "/api/v1/feedback"): '{"workload":' + _nested(depth - 1) + "}"}
    for (method, path), body in bodies.items():
        r = await api.call(method, path, content=body, headers=headers)
        assert r.status_code == 400, (path, r.status_code, r.text[:300])
        assert r.json()["code"] == "BODY_TOO_DEEP" and r.json()["details"] == {"maxDepth": 100}, r.text[:300]
        assert set(r.json()) == {"code", "message", "details"}
    assert (await api.call("GET", "/api/v1/sync/configs")).status_code == 404  # nothing stored
    assert (await api.call("GET", "/api/v1/clusters/deep")).status_code == 404
    # within the limit, as before (and no body that is not JSON changes its answer)
    ok = '{"configs":' + _nested(90) + "}"
    assert (await api.call("PUT", "/api/v1/sync/configs", content=ok, headers=headers)).status_code == 200
    r = await api.call("PUT", "/api/v1/sync/configs", content="{not json", headers=headers)
    assert r.status_code == 400 and r.json()["code"] == "MALFORMED_BODY", r.text
