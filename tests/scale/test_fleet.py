"""`drods sim fleet`: many members from one process, each a whole member (own endpoint, kubeconfig,
nodes, fault port), read with kubectl; `drods cluster join --from` refuses what it cannot join."""

from __future__ import annotations

import json
import socket
import subprocess
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urlsplit

import pytest
import yaml
from typer.testing import CliRunner, Result

from drods.sim.harness import drods_command
from tests.free_port import free_port
from tests.server_process import wait_until

pytestmark = pytest.mark.timeout(180)


def drods(*args: str) -> Result:
    """The ``drods`` CLI in this process (a fresh interpreter per command costs seconds on a busy machine)."""
    from drods.cli.main import app

    return CliRunner().invoke(app, list(args))


@pytest.fixture(scope="module")
def fleet_dir(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    out = tmp_path_factory.mktemp("fleet")
    proc = subprocess.Popen([*drods_command(), "sim", "fleet", "--clusters", "3", "--nodes-per-cluster", "4",
                             "--prefix", "t", "--out", str(out), "--fresh"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        wait_until(lambda: (out / "fleet.yaml").exists() or proc.poll() is not None, 90, "the fleet to serve")
        assert proc.poll() is None, proc.stderr.read() if proc.stderr else ""
        yield out
    finally:
        proc.terminate()
        assert proc.wait(30) == 0
    assert not (out / "fleet.yaml").exists()  # a clean stop takes the "ready" manifest away


def members(out: Path) -> list[dict[str, str]]:
    return list(yaml.safe_load((out / "fleet.yaml").read_text())["members"])


def kubectl(kubeconfig: str, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["kubectl", "--kubeconfig", kubeconfig, *args], capture_output=True, text=True,
                          timeout=30)


def test_each_member_is_a_cluster_of_its_own(fleet_dir: Path) -> None:
    found = members(fleet_dir)
    assert [m["name"] for m in found] == ["t-aws-dfw", "t-azure-lhr", "t-gcp-sin"]
    assert len({m["server"] for m in found}) == 3
    for m in found:
        nodes = json.loads(kubectl(m["kubeconfig"], "get", "nodes", "-o", "json").stdout)["items"]
        assert len(nodes) == 4
        assert {n["metadata"]["labels"]["topology.kubernetes.io/region"] for n in nodes} == {m["region"]}
    # what one member holds, the others do not
    first, second = found[0]["kubeconfig"], found[1]["kubeconfig"]
    made = kubectl(first, "create", "configmap", "only-here", "--from-literal=a=b")
    assert made.returncode == 0, made.stderr
    assert kubectl(first, "get", "configmap", "only-here").returncode == 0
    assert "NotFound" in kubectl(second, "get", "configmap", "only-here").stderr


def test_a_fault_takes_down_one_member_only(fleet_dir: Path) -> None:
    found = members(fleet_dir)
    listed = drods("sim", "list", "--state-dir", str(fleet_dir)).output.split("\n")
    assert sorted(line.split("\t")[0] for line in listed if line) == [m["name"] for m in found]
    down = drods("sim", "fault", found[2]["name"], "down", "--state-dir", str(fleet_dir))
    assert down.exit_code == 0, down.output
    try:
        assert kubectl(found[2]["kubeconfig"], "get", "nodes").returncode != 0
        assert kubectl(found[0]["kubeconfig"], "get", "nodes").returncode == 0
    finally:
        assert drods("sim", "fault", found[2]["name"], "up", "--state-dir", str(fleet_dir)).exit_code == 0
    assert kubectl(found[2]["kubeconfig"], "get", "nodes").returncode == 0


def test_join_from_a_directory_without_members_is_refused(tmp_path: Path) -> None:
    done = drods("cluster", "join", "--from", str(tmp_path), "--server", "https://127.0.0.1:1", "--token", "x")
    assert done.exit_code == 1
    assert "BAD_FLEET" in done.output and "holds no members" in done.output


def test_join_from_takes_no_single_member_flags(tmp_path: Path) -> None:
    done = drods("cluster", "join", "edge", "--from", str(tmp_path), "--token", "x")
    assert done.exit_code == 2
    assert "--from joins a whole directory" in done.output


def test_fleet_needs_a_member(tmp_path: Path) -> None:
    done = drods("sim", "fleet", "--clusters", "0", "--out", str(tmp_path))
    assert done.exit_code == 2 and "--clusters" in done.output


def _serve(out: Path, *extra: str) -> subprocess.Popen[str]:
    proc = subprocess.Popen([*drods_command(), "sim", "fleet", "--clusters", "2", "--nodes-per-cluster", "1",
                             "--out", str(out), *extra], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    wait_until(lambda: (out / "fleet.yaml").exists() or proc.poll() is not None, 90, "the fleet to serve")
    assert proc.poll() is None, proc.stderr.read() if proc.stderr else ""
    return proc


def _stop(proc: subprocess.Popen[str]) -> None:
    proc.terminate()
    assert proc.wait(30) == 0


def _two_free_ports() -> int:
    for _ in range(50):
        base = free_port()
        with socket.socket() as s:
            try:
                s.bind(("127.0.0.1", base + 1))
            except OSError:
                continue
        return base
    raise AssertionError("no two free ports in a row")


def test_members_keep_their_endpoints_over_a_restart(tmp_path: Path) -> None:
    """A fleet restarted over its directory serves each member where the control plane registered it
    (the last start's port), and the credentials it was joined with still work; ``--base-port`` pins them."""
    out, base = tmp_path / "fleet", _two_free_ports()
    proc = _serve(out, "--base-port", str(base))
    try:
        first = members(out)
        assert [urlsplit(m["server"]).port for m in first] == [base, base + 1]
        joined_with = (tmp_path / "joined.kubeconfig")
        joined_with.write_text(Path(first[1]["kubeconfig"]).read_text())
    finally:
        _stop(proc)
    proc = _serve(out)  # no --base-port: each member takes its last port again
    try:
        assert [m["server"] for m in members(out)] == [m["server"] for m in first]
        assert kubectl(str(joined_with), "get", "nodes").returncode == 0
    finally:
        _stop(proc)


def test_a_base_port_that_leaves_no_room_is_refused(tmp_path: Path) -> None:
    done = drods("sim", "fleet", "--clusters", "3", "--base-port", "65534", "--out", str(tmp_path))
    assert done.exit_code == 2 and "--base-port" in done.output
