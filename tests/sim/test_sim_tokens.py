"""A sim's own token (the one in the kubeconfig it writes) is recorded in the sim's store, not the
control plane's: it is signed with the sim's key and accepted by that sim alone. `drods token list
--store sqlite:///DATA/sim.db` shows it and `drods token revoke` makes the sim refuse it (401) within
a second."""

from __future__ import annotations

import json
import ssl
import subprocess
import time
from pathlib import Path

import httpx
import yaml

from drods.sim.harness import SimProcess, drods_command

REVOKED_WITHIN = 1.0


def test_sim_token_is_recorded_in_its_store_and_revocable(tmp_path: Path) -> None:
    sim = SimProcess("sim-tok", tmp_path, ["--nodes", "1"]).start().wait_ready(60)
    try:
        data = Path(sim.state["dataDir"])
        token = yaml.safe_load(sim.kubeconfig.read_text())["users"][0]["user"]["token"]
        store = ["--store", f"sqlite://{(data / 'sim.db').resolve()}", "--data-dir", str(tmp_path / "cli")]

        def drods(*args: str) -> subprocess.CompletedProcess[str]:
            return subprocess.run([*drods_command(), *args], capture_output=True, text=True, timeout=30, check=False)

        listed = drods("token", "list", *store, "-o", "json")
        assert listed.returncode == 0, listed.stderr
        records = json.loads(listed.stdout)["items"]
        assert [(r["subject"], r["role"], r["expiresAt"]) for r in records] == [("sim:sim-tok", "admin", None)]
        assert token not in listed.stdout

        verify = ssl.create_default_context(cafile=str(data / "ca.crt")) if sim.server.startswith("https") else True
        with httpx.Client(base_url=sim.server, verify=verify, timeout=10,
                          headers={"Authorization": f"Bearer {token}"}) as http:
            assert http.get("/api/v1/nodes").status_code == 200
            revoked = drods("token", "revoke", records[0]["id"], *store)
            assert revoked.returncode == 0, revoked.stderr
            deadline = time.monotonic() + REVOKED_WITHIN
            while (r := http.get("/api/v1/nodes")).status_code != 401:
                assert r.status_code == 200, r.text
                assert time.monotonic() < deadline, f"the sim still accepted its revoked token after {REVOKED_WITHIN}s"
                time.sleep(0.02)
    finally:
        assert sim.stop() == 0, sim.log_tail()
