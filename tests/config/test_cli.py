"""``drods config`` and ``--config`` as a user runs them: real commands and server processes."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
import yaml

from drods.config import DRODSConfiguration, parse
from tests.server_process import ServerProcess, drods_command, wait_until

HEAD = "apiVersion: config.drods.io/v1alpha1\nkind: DRODSConfiguration\n"


def drods(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    import os

    return subprocess.run([*drods_command(), *args], capture_output=True, text=True, timeout=60, check=False,
                          env={**os.environ, **(env or {})})


def test_config_default_prints_a_file_that_loads_back_to_the_defaults(tmp_path: Path) -> None:
    done = drods("config", "default")
    assert done.returncode == 0, done.stderr
    assert parse(yaml.safe_load(done.stdout), "stdout") == DRODSConfiguration.default()
    # Written out, it is a configuration file every process accepts as is.
    path = tmp_path / "drods.yaml"
    path.write_text(done.stdout)
    view = drods("config", "view", "--config", str(path), "--data-dir", str(tmp_path / "data"))
    assert view.returncode == 0, view.stderr
    assert parse(yaml.safe_load(view.stdout), "view") == DRODSConfiguration.default()


@pytest.mark.parametrize("command", ["serve", "apiserver", "scheduler", "controllers"])
def test_every_process_refuses_an_unknown_key_naming_it(tmp_path: Path, command: str) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text(HEAD + "monitoring: {fooBar: 1}\n")
    # A wide terminal, so the error box does not wrap the (long) temporary path.
    done = drods(command, "--config", str(bad), "--data-dir", str(tmp_path / "data"), "--port", "0",
                 env={"COLUMNS": "500"})
    assert done.returncode == 2, done.stdout + done.stderr
    assert "monitoring.fooBar: unknown key" in done.stderr and str(bad) in done.stderr


def test_serve_honours_the_file_given_with_config(tmp_path: Path) -> None:
    config = tmp_path / "elsewhere" / "mine.yaml"
    config.parent.mkdir()
    config.write_text(HEAD + """
api: {maxBodyBytes: 2048}
monitoring: {schedulerMaxAgeSeconds: 7}
autoops: {enabled: false}
scheduler: {profile: {name: from-config}}
""")
    data = tmp_path / "data"
    data.mkdir()
    # A deprecated input beside it: still read, with a warning naming it; the file wins where both speak.
    (data / "scheduler-profile.yaml").write_text("name: from-old-file\n")
    with ServerProcess(data, args=["--config", str(config)]) as server, server.client() as http:
        big = {"apiVersion": "multicluster.io/v1alpha1", "kind": "Cluster",
               "metadata": {"name": "big", "annotations": {"padding": "x" * 4096}}, "spec": {}}
        r = http.post("/apis/multicluster.io/v1alpha1/clusters", json=big)
        assert r.status_code == 413 and r.json()["message"].endswith("exceeds 2048"), r.text  # a Kubernetes Status
        r = http.post("/api/v1/clusters", json={"name": "big", "labels": {"a": "x" * 4096}})  # a typed body too
        assert r.status_code == 413 and r.json()["code"] == "PAYLOAD_TOO_LARGE", r.text
        r = http.post("/api/v1/clusters", json={"name": "big", "labels": {"a": "x" * 1500}})
        assert r.status_code == 422 and len(r.text) < 1500, r.text  # the value is not sent back whole
        del big["metadata"]["annotations"]
        assert http.post("/apis/multicluster.io/v1alpha1/clusters", json=big).status_code != 413
        r = http.get("/api/v1/monitor/subscriptions")
        assert r.status_code == 200, r.text
        assert [(s["name"], s["maxAgeSeconds"]) for s in r.json()["items"]] == [("scheduler", 7.0)]
        r = http.get("/api/v1/scheduler")
        assert r.status_code == 200 and r.json()["local"]["profile"] == "from-config", r.text
    log = server.log_path.read_text()
    assert f"deprecated configuration input {data / 'scheduler-profile.yaml'}" in log
    assert "scheduler.profile.name" in log and "wins" in log


def test_scheduler_process_reads_drods_yaml_in_its_data_dir(tmp_path: Path) -> None:
    data = tmp_path / "s"
    data.mkdir()
    (data / "drods.yaml").write_text(HEAD + "scheduler: {profile: {name: data-dir-profile}}\n")
    proc = ServerProcess(data, command="scheduler",
                         args=["--store", f"sqlite://{tmp_path / 's.db'}", "--log-level", "warning"])
    with proc, proc.client() as http:
        def local_profile() -> bool:
            body = http.get("/api/v1/scheduler").json()
            return bool(body.get("local", {}).get("profile") == "data-dir-profile")

        wait_until(local_profile, 15, "the scheduler to report its profile")
