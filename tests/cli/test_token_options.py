"""``drods token create`` refuses a lifetime it cannot mint, as an option error, not a traceback."""

from __future__ import annotations

from pathlib import Path

from typer.testing import CliRunner

from drods.cli.main import app


def test_a_negative_ttl_is_an_option_error(tmp_path: Path) -> None:
    r = CliRunner().invoke(app, ["token", "create", "--role", "admin", "--ttl", "-5", "--data-dir", str(tmp_path)])
    assert r.exit_code == 2 and "Invalid value for '--ttl'" in r.output, r.output  # typer's usage error
    assert not (tmp_path / "drods.db").exists()  # nothing minted, nothing recorded


def _claims(token: str) -> dict[str, object]:
    import jwt

    return jwt.decode(token, options={"verify_signature": False})


def _kubeconfig_token(output: str) -> str:
    import yaml

    return str(yaml.safe_load(output)["users"][0]["user"]["token"])


def test_kubeconfig_role_mints_that_role_even_with_a_token_in_the_environment(tmp_path: Path) -> None:
    """``DRODS_TOKEN`` (an admin's, as the README exports it) must not stand in for the ``--role`` asked for:
    the kubeconfig a viewer is handed would otherwise write anything."""
    (tmp_path / "tls").mkdir()
    (tmp_path / "tls" / "ca.crt").write_text("-----BEGIN CERTIFICATE-----\n")
    runner = CliRunner()
    admin = runner.invoke(app, ["token", "create", "--role", "admin", "--data-dir", str(tmp_path)])
    assert admin.exit_code == 0, admin.output
    env = {"DRODS_TOKEN": admin.stdout.strip()}
    r = runner.invoke(app, ["kubeconfig", "--role", "viewer", "--data-dir", str(tmp_path)], env=env)
    assert r.exit_code == 0, r.output
    assert _claims(_kubeconfig_token(r.output))["role"] == "viewer"
    # without --role the environment's token is the kubeconfig's, as before
    r = runner.invoke(app, ["kubeconfig", "--data-dir", str(tmp_path)], env=env)
    assert r.exit_code == 0 and _kubeconfig_token(r.output) == env["DRODS_TOKEN"], r.output
    # a token given on the command line and a role are two answers to one question
    r = runner.invoke(app, ["kubeconfig", "--token", env["DRODS_TOKEN"], "--role", "viewer",
                            "--data-dir", str(tmp_path)])
    assert r.exit_code == 2 and "--role" in r.output, r.output


def test_a_namespace_that_cannot_exist_is_an_option_error(tmp_path: Path) -> None:
    r = CliRunner().invoke(app, ["token", "create", "--role", "operator", "--namespace", "Bad_NS!",
                                 "--data-dir", str(tmp_path)])
    assert r.exit_code == 2 and "Bad_NS!" in r.output, r.output
    listed = CliRunner().invoke(app, ["token", "list", "-o", "json", "--data-dir", str(tmp_path)])
    assert listed.exit_code == 0 and "Bad_NS" not in listed.output, listed.output  # nothing recorded


def test_token_commands_use_the_store_the_data_dirs_server_uses(tmp_path: Path) -> None:
    """A server started with ``--store`` records it in its data dir; a token minted, listed or revoked
    with that data dir alone lands in that store, where the server reads revocations, not in a SQLite
    file beside it that nothing serves from."""
    from drods.api.auth import load_or_create_signing_key
    from drods.store import record_served_store

    served = tmp_path / "served.db"
    load_or_create_signing_key(tmp_path / "jwt.key")  # as the server did at its start
    record_served_store(tmp_path, f"sqlite://{served}")
    runner = CliRunner()
    made = runner.invoke(app, ["token", "create", "--role", "viewer", "--data-dir", str(tmp_path)])
    assert made.exit_code == 0, made.output
    assert served.exists() and not (tmp_path / "drods.db").exists()
    token_id = str(_claims(made.stdout.strip())["jti"])
    listed = runner.invoke(app, ["token", "list", "-o", "json", "--data-dir", str(tmp_path)])
    assert token_id in listed.output, listed.output
    gone = runner.invoke(app, ["token", "revoke", token_id, "--data-dir", str(tmp_path)])
    assert gone.exit_code == 0, gone.output
    listed = runner.invoke(app, ["token", "list", "-o", "json", "--data-dir", str(tmp_path)])
    assert token_id not in listed.output, listed.output


def test_processes_starting_together_each_note_the_store_without_tripping_over_each_other(tmp_path: Path) -> None:
    """`drods apiserver`, `scheduler` and `controllers` of one data dir start at once, each noting its store."""
    from concurrent.futures import ThreadPoolExecutor

    from drods.store import record_served_store, served_store_url

    urls = [f"etcd://u:secret@127.0.0.{i}:2379" for i in range(1, 9)]
    with ThreadPoolExecutor(8) as pool:
        list(pool.map(lambda u: [record_served_store(tmp_path, u) for _ in range(50)], urls))
    assert served_store_url(tmp_path) in {u.replace("u:secret@", "u@") for u in urls}  # the password left out
    assert [p.name for p in tmp_path.iterdir()] == ["store.url"]
    assert (tmp_path / "store.url").stat().st_mode & 0o777 == 0o600


def test_token_list_says_which_namespaces_each_token_may_act_in(tmp_path: Path) -> None:
    runner = CliRunner()
    for args in (["--role", "admin"], ["--role", "viewer", "--namespace", "team-a", "--namespace", "team-b"],
                 ["--role", "cluster-agent", "--cluster", "edge-1"]):
        assert runner.invoke(app, ["token", "create", *args, "--data-dir", str(tmp_path)]).exit_code == 0
    out = runner.invoke(app, ["token", "list", "--data-dir", str(tmp_path)]).output
    rows = {line.split()[2]: line.split()[3] for line in out.splitlines()[1:] if line.strip()}
    assert rows == {"admin": "*", "viewer": "team-a,team-b", "cluster-agent": "-"}, out


def test_a_namespaced_tokens_kubeconfig_starts_in_its_namespace(tmp_path: Path) -> None:
    """kubectl's first command with a team's kubeconfig lands in the team's namespace, not in ``default``,
    which the token may not touch."""
    import yaml

    (tmp_path / "tls").mkdir()
    (tmp_path / "tls" / "ca.crt").write_text("-----BEGIN CERTIFICATE-----\n")
    runner = CliRunner()

    def context_namespace(*create: str) -> str:
        token = runner.invoke(app, ["token", "create", *create, "--data-dir", str(tmp_path)]).stdout.strip()
        r = runner.invoke(app, ["kubeconfig", "--token", token, "--data-dir", str(tmp_path)])
        assert r.exit_code == 0, r.output
        return str(yaml.safe_load(r.output)["contexts"][0]["context"]["namespace"])

    assert context_namespace("--role", "operator", "--namespace", "team-b", "--namespace", "team-a") == "team-a"
    assert context_namespace("--role", "viewer", "--namespace", "team-a", "--namespace", "default") == "default"
    assert context_namespace("--role", "admin") == "default"


def test_a_token_that_never_expires_is_warned_of_on_stderr(tmp_path: Path) -> None:
    r = CliRunner().invoke(app, ["token", "create", "--role", "admin", "--ttl", "0", "--data-dir", str(tmp_path)])
    assert r.exit_code == 0, r.output
    assert not (tmp_path / "keyring.json").exists()  # no keyring of its own, that no server would know
    assert "exp" not in _claims(r.stdout.strip())  # stdout is the token alone, as before
    assert "never expires" in r.stderr and "drods token revoke" in r.stderr, r.stderr
    r = CliRunner().invoke(app, ["token", "create", "--role", "admin", "--data-dir", str(tmp_path)])
    assert r.exit_code == 0 and r.stderr == "" and "exp" in _claims(r.stdout.strip()), r.output


async def test_issuing_and_revoking_tokens_is_in_the_audit_log(tmp_path: Path) -> None:
    """``GET /api/v1/audit`` shows who issued and revoked which token (its ID, subject, role,
    namespaces), never the token, sealed at rest as the rest of the log."""
    import asyncio
    import getpass

    from drods.api.auth import Role
    from drods.model.keys import AUDIT_PREFIX
    from drods.security.envelope import Envelope, Keyring
    from drods.server import ServerConfig, build_app
    from drods.store import default_store_url
    from drods.store.sqlite import SqliteStore
    from tests.api.conftest import served

    Keyring.load(tmp_path)  # the data dir's servers have started: their keyring seals the audit log
    runner = CliRunner()
    made = await asyncio.to_thread(runner.invoke, app, ["token", "create", "--role", "operator", "--namespace",
                                                        "team-a", "--subject", "alice", "--data-dir", str(tmp_path)])
    assert made.exit_code == 0, made.output
    token = made.stdout.strip()
    token_id = str(_claims(token)["jti"])
    gone = await asyncio.to_thread(runner.invoke, app, ["token", "revoke", token_id, "--data-dir", str(tmp_path)])
    assert gone.exit_code == 0, gone.output

    raw = SqliteStore(str(tmp_path / "drods.db"))
    audit_kvs, _ = await raw.range(AUDIT_PREFIX)
    assert audit_kvs and all(Envelope(Keyring.load(tmp_path)).kek_of(kv.value) for kv in audit_kvs)  # sealed
    await raw.close()
    server = build_app(ServerConfig(store_url=default_store_url(tmp_path), data_dir=tmp_path))
    admin = server.state.ctx.tokens.issue(Role.ADMIN)
    async with served(server, {"admin": admin}) as api:
        items = (await api.call("GET", "/api/v1/audit", params={"kind": "Token"})).json()["items"]
    assert [e["verb"] for e in items] == ["CREATE", "REVOKE"], items
    actor = f"cli:{getpass.getuser()}"
    for e in items:
        assert e["subject"] == actor and e["role"] == "cli" and e["object"] == f"Token/{token_id}", e
        assert e["changes"][0]["name"] == token_id and "alice" in e["message"] and "operator" in e["message"], e
    created = items[0]["changes"][0]["patch"][0]["value"]
    assert created["subject"] == "alice" and created["role"] == "operator" and created["namespaces"] == ["team-a"]
    assert token not in str(items) and token.split(".")[2] not in str(items)  # never the token itself
