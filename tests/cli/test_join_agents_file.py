"""``drods cluster join --from DIR --pull`` run again keeps each member's agent token: it minted a fresh,
never-expiring token per member on every run and left the old ones valid (20 members, 20 more tokens)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from typer.testing import CliRunner

from drods.cli.agents import read_agents_file
from drods.cli.joining import DirectoryMember, _write_agents
from drods.cli.main import app


def _tokens(data_dir: Path) -> int:
    listed = CliRunner().invoke(app, ["token", "list", "-o", "json", "--data-dir", str(data_dir)])
    assert listed.exit_code == 0, listed.output
    return len(json.loads(listed.output)["items"])


def test_a_join_run_again_mints_no_new_agent_tokens(tmp_path: Path) -> None:
    members = [DirectoryMember(n, tmp_path / f"{n}.kubeconfig") for n in ("m1", "m2")]
    _write_agents(tmp_path, members, (tmp_path, None), "https://cp:8080")
    server, first = read_agents_file(tmp_path / "agents.yaml")
    assert server == "https://cp:8080" and _tokens(tmp_path) == 2
    assert oct((tmp_path / "agents.yaml").stat().st_mode & 0o777) == "0o600"
    # again, with a third member: the two keep theirs, the new one gets one
    _write_agents(tmp_path, [*members, DirectoryMember("m3", tmp_path / "m3.kubeconfig")], (tmp_path, None),
                  "https://cp:8080")
    _, again = read_agents_file(tmp_path / "agents.yaml")
    assert [a["token"] for a in again[:2]] == [a["token"] for a in first] and _tokens(tmp_path) == 3
    # another control plane: its own tokens
    _write_agents(tmp_path, members, (tmp_path, None), "https://other:8080")
    _, other = read_agents_file(tmp_path / "agents.yaml")
    assert {a["token"] for a in other}.isdisjoint(a["token"] for a in first) and _tokens(tmp_path) == 5


def test_a_join_trusts_the_ca_of_the_data_dir_it_is_given(tmp_path: Path, monkeypatch: Any) -> None:
    """`drods cluster join --data-dir DIR` failed with CERTIFICATE_UNTRUSTED until DRODS_CA_FILE was set: the
    data dir's own CA is trusted, as `drods kubeconfig` trusts it, unless --ca-file says otherwise."""
    import drods.cli.cluster_ops as ops

    (tmp_path / "tls").mkdir()
    (tmp_path / "tls" / "ca.crt").write_text("-----BEGIN CERTIFICATE-----\n")
    trusted: list[str | None] = []

    def connect(server: str, token: str | None, ca_file: str | None = None, insecure: bool = False) -> Any:
        trusted.append(ca_file)
        raise SystemExit(0)  # the connection is all this test looks at

    monkeypatch.setattr(ops, "connect", connect)
    monkeypatch.setattr(ops, "join_directory", lambda *a, **k: None)
    for extra in ([], ["--ca-file", "/elsewhere/ca.crt"]):
        CliRunner().invoke(app, ["cluster", "join", "--from", str(tmp_path), "--data-dir", str(tmp_path),
                                 "--token", "t", *extra])
    assert trusted == [str(tmp_path / "tls" / "ca.crt"), "/elsewhere/ca.crt"], trusted
