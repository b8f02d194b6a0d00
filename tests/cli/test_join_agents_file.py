"""``drods cluster join --from DIR --pull`` run again keeps each member's agent token: it minted a fresh,
never-expiring token per member on every run and left the old ones valid (20 members, 20 more tokens).
A member it registers anew gets a new one: removing its Cluster revoked the file's."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace
from typing import Any, cast

from typer.testing import CliRunner

from drods.cli import joining
from drods.cli.agents import read_agents_file
from drods.cli.joining import DirectoryMember, _write_agents, join_directory
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


class _ControlPlane:
    """The clusters API as `join_directory` uses it: what is registered, and POSTs registering more."""

    def __init__(self) -> None:
        self.registered: set[str] = set()

    def get_json(self, path: str) -> dict[str, Any]:
        return {"items": [{"name": n} for n in sorted(self.registered)]}

    def request(self, method: str, path: str, **kwargs: Any) -> None:
        assert (method, path) == ("POST", "/api/v1/clusters")
        self.registered.add(kwargs["json"]["name"])


def test_a_member_removed_and_joined_again_gets_a_new_agent_token(tmp_path: Path, monkeypatch: Any) -> None:
    """`join --from --pull`, `cluster remove m1`, the same join: "1 joined" but agents.yaml kept m1's old
    token, revoked with its Cluster, so its agent was refused for good. A member still registered keeps its."""
    for name in ("m1", "m2"):
        (tmp_path / name).mkdir()
        (tmp_path / name / "kubeconfig").write_text("read by the stand-in below\n")

    async def inspect_all(members: list[DirectoryMember]) -> list[tuple[dict[str, Any], Any]]:
        doc = {"current-context": "c", "contexts": [{"name": "c", "context": {"cluster": "k"}}],
               "clusters": [{"name": "k", "cluster": {"server": "https://member:6443"}}]}
        summary = SimpleNamespace(gpu_allocatable=0, region=None, zones=[], provider=None, city=None,
                                  gpu_models=[], cluster_id=None)
        return [(doc, summary) for _ in members]

    monkeypatch.setattr(joining, "_inspect_all", inspect_all)
    plane = _ControlPlane()

    def join() -> dict[str, str]:
        join_directory(tmp_path, cast(Any, plane), pull=True, labels=None, capabilities=None,
                       minter=(tmp_path, None), server="https://cp:8080", output="json")
        return {a["cluster"]: a["token"] for a in read_agents_file(tmp_path / "agents.yaml")[1]}

    first = join()
    assert sorted(first) == ["m1", "m2"] and _tokens(tmp_path) == 2
    plane.registered.discard("m1")  # `drods cluster remove m1`: its cluster-agent tokens revoked
    again = join()
    assert plane.registered == {"m1", "m2"}
    assert again["m1"] != first["m1"] and again["m2"] == first["m2"] and _tokens(tmp_path) == 3
    assert join() == again and _tokens(tmp_path) == 3  # both registered: both kept
