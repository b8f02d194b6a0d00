"""`drods dev up` records the tokens it hands out: its admin token (subject ``dev``) in the control
plane's store, each member's in that sim's own store; revoking the dev token shuts it out of the
control plane within a second."""

from __future__ import annotations

import json
import os
import shlex
import signal
import ssl
import subprocess
import time
from pathlib import Path

import httpx

from drods.sim.harness import drods_command
from tests.free_port import free_port
from tests.server_process import wait_until

REVOKED_WITHIN = 1.0


def _free(port: int) -> bool:
    import socket

    with socket.socket() as s:
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def _env_file(path: Path) -> dict[str, str]:
    out = {}
    for line in path.read_text().splitlines():
        key, _, value = line.removeprefix("export ").partition("=")
        out[key] = shlex.split(value)[0]
    return out


def test_dev_up_tokens_are_recorded_and_revocable(tmp_path: Path) -> None:
    root = tmp_path / "dev"
    member = free_port()
    while not _free(member + 1):  # the member's fault control takes the next port
        member = free_port()
    dev = subprocess.Popen([*drods_command(), "dev", "up", "--clusters", "1", "--nodes", "1", "--data-dir", str(root),
                            "--port", str(free_port()), "--member-ports", str(member)],
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        wait_until(lambda: (root / "env.sh").exists() or dev.poll() is not None, 120, "drods dev up")
        assert dev.poll() is None, (root / "logs" / "server.log").read_text()[-2000:]
        env = _env_file(root / "env.sh")

        def drods(*args: str) -> subprocess.CompletedProcess[str]:
            return subprocess.run([*drods_command(), *args], capture_output=True, text=True, timeout=30,
                                  check=False, env={**os.environ, **env})

        listed = drods("token", "list", "-o", "json")  # DRODS_DATA_DIR of env.sh: the server's
        assert listed.returncode == 0, listed.stderr
        [record] = [r for r in json.loads(listed.stdout)["items"] if r["subject"] == "dev"]
        assert record["role"] == "admin"
        [sim_db] = list((root / "sims").glob("*/sim.db"))
        # the member on the ports asked for: its API on the first, `drods sim fault` on the next
        [state] = [json.loads(f.read_text()) for f in (root / "sims").glob("*.json")]
        assert state["server"].endswith(f":{member}") and str(member + 1) in json.dumps(state), state
        member = drods("token", "list", "--store", f"sqlite://{sim_db}", "-o", "json")
        assert [r["subject"] for r in json.loads(member.stdout)["items"]] == [f"sim:{sim_db.parent.name}"]

        verify = ssl.create_default_context(cafile=env["DRODS_CA_FILE"])
        with httpx.Client(base_url=env["DRODS_SERVER"], verify=verify, timeout=10,
                          headers={"Authorization": f"Bearer {env['DRODS_TOKEN']}"}) as http:
            assert http.get("/api/v1/clusters").status_code == 200
            assert drods("token", "revoke", record["id"]).returncode == 0
            deadline = time.monotonic() + REVOKED_WITHIN
            while http.get("/api/v1/clusters").status_code != 401:
                assert time.monotonic() < deadline, f"the dev token was still accepted after {REVOKED_WITHIN}s"
                time.sleep(0.02)
    finally:
        if dev.poll() is None:
            dev.send_signal(signal.SIGTERM)  # it stops its server and members
        assert dev.wait(60) == 0
