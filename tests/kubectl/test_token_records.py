"""Every token recorded (SEC1): the admin token `drods kubeconfig` mints is in `drods token list`
and, once `drods token revoke ID` returns, the API server refuses it (401) within a second — kubectl
included — on SQLite and on etcd, with real `drods` processes."""

from __future__ import annotations

import json
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
import yaml

from tests.etcd_server import wipe
from tests.server_process import ServerProcess

REVOKED_WITHIN = 1.0


@pytest.fixture(params=["sqlite", "etcd"])
def store_args(request: pytest.FixtureRequest) -> Iterator[list[str]]:
    """The ``--store`` arguments of the server and of every CLI command (none: the data dir's SQLite)."""
    if request.param == "sqlite":
        yield []
    else:
        endpoint = request.getfixturevalue("etcd_endpoint")
        wipe(endpoint)  # other tests' objects in the session's etcd are sealed with their own keys
        yield ["--store", f"etcd://{endpoint}"]


def test_kubeconfig_token_is_listed_and_revocable(tmp_path: Path, kubectl_path: str, store_args: list[str]) -> None:
    with ServerProcess(tmp_path / "data", args=store_args) as server:
        data = ["--data-dir", str(server.data_dir), *store_args]
        made = server.run_cli("kubeconfig", "--server", server.url, *data)
        assert made.returncode == 0, made.stderr
        config = tmp_path / "kubeconfig"
        config.write_text(made.stdout)
        token = yaml.safe_load(made.stdout)["users"][0]["user"]["token"]

        def kubectl(*args: str) -> subprocess.CompletedProcess[str]:
            return subprocess.run([kubectl_path, "--kubeconfig", str(config), *args], capture_output=True,
                                  text=True, timeout=30, check=False)

        ok = kubectl("get", "clusters")
        assert ok.returncode == 0, ok.stderr

        listed = server.run_cli("token", "list", *data, "-o", "json")
        assert listed.returncode == 0, listed.stderr
        mine = [r for r in json.loads(listed.stdout)["items"] if r["subject"] == "kubectl"]
        assert len(mine) == 1, listed.stdout
        record = mine[0]
        assert record["role"] == "admin" and record["namespaces"] is None
        assert 29.9 * 86_400 < record["expiresAt"] - time.time() <= 30 * 86_400
        assert token not in listed.stdout  # the record never holds the token
        table = server.run_cli("token", "list", *data)
        assert record["id"] in table.stdout and "kubectl" in table.stdout

        with httpx.Client(base_url=server.url, verify=server.verify, timeout=10,
                          headers={"Authorization": f"Bearer {token}"}) as http:
            assert http.get("/api/v1/clusters").status_code == 200
            revoked = server.run_cli("token", "revoke", record["id"], *data)
            assert revoked.returncode == 0, revoked.stderr
            deadline = time.monotonic() + REVOKED_WITHIN
            while (r := http.get("/api/v1/clusters")).status_code != 401:
                assert r.status_code == 200, r.text
                assert time.monotonic() < deadline, f"the revoked token was still accepted after {REVOKED_WITHIN}s"
                time.sleep(0.02)
            assert "revoked" in r.json()["message"]

        refused = kubectl("get", "clusters")
        assert refused.returncode != 0 and "token revoked" in refused.stderr, refused.stderr
        after = server.run_cli("token", "list", *data, "-o", "json")
        assert record["id"] not in {r["id"] for r in json.loads(after.stdout)["items"]}


def test_kubeconfig_without_ca_mints_nothing(tmp_path: Path) -> None:
    """A kubeconfig that cannot be written leaves no token behind in the record."""
    data_dir = tmp_path / "empty"
    server = ServerProcess(data_dir)
    failed = server.run_cli("kubeconfig", "--server", "https://127.0.0.1:1", "--data-dir", str(data_dir),
                            env={"COLUMNS": "400"})
    assert failed.returncode != 0 and "ca.crt not found" in failed.stderr, failed.stderr
    listed = server.run_cli("token", "list", "--data-dir", str(data_dir), "-o", "json")
    assert listed.returncode == 0, listed.stderr
    assert json.loads(listed.stdout)["items"] == []
