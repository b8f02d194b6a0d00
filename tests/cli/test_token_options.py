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
    env = {"DRODS_TOKEN": admin.output.strip()}
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
    from drods.store import record_served_store

    served = tmp_path / "served.db"
    record_served_store(tmp_path, f"sqlite://{served}")
    runner = CliRunner()
    made = runner.invoke(app, ["token", "create", "--role", "viewer", "--data-dir", str(tmp_path)])
    assert made.exit_code == 0, made.output
    assert served.exists() and not (tmp_path / "drods.db").exists()
    token_id = str(_claims(made.output.strip())["jti"])
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
        token = runner.invoke(app, ["token", "create", *create, "--data-dir", str(tmp_path)]).output.strip()
        r = runner.invoke(app, ["kubeconfig", "--token", token, "--data-dir", str(tmp_path)])
        assert r.exit_code == 0, r.output
        return str(yaml.safe_load(r.output)["contexts"][0]["context"]["namespace"])

    assert context_namespace("--role", "operator", "--namespace", "team-b", "--namespace", "team-a") == "team-a"
    assert context_namespace("--role", "viewer", "--namespace", "team-a", "--namespace", "default") == "default"
    assert context_namespace("--role", "admin") == "default"
