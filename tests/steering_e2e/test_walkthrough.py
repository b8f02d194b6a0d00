"""examples/steering/README.md, run as written (the shape of tests/members_e2e/test_walkthrough.py):
every ```bash block after a ``<!-- step: NAME -->`` marker, in order, from the repository root,
with the shell state a user would have after ``env``. ``/tmp/drods-steer`` becomes a temporary dir,
``drods dev up`` gets a free port, and ``dev up … &`` / ``kill %1`` are done on the process the test
holds. Between steps the test waits, with deadlines, for what the text says happens."""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.free_port import free_port
from tests.members_e2e.conftest import repo_root, wait_for

README = repo_root() / "examples" / "steering" / "README.md"
STEP = re.compile(r"<!-- step: ([\w-]+) -->\s*```bash\n(.*?)```", re.S)

pytestmark = pytest.mark.skipif(shutil.which("kubectl") is None or shutil.which("curl") is None,
                                reason="kubectl and curl are needed")


class Shell:
    def __init__(self, tmp: Path) -> None:
        self.tmp = tmp
        self.prelude: list[str] = []
        self.env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}",
                    "HOME": str(tmp / "home")}
        (tmp / "home").mkdir()

    def fix(self, script: str) -> str:
        return script.replace("/tmp/drods-steer", str(self.tmp / "drods-steer"))

    def run(self, script: str, check: bool = True) -> str:
        done = subprocess.run(["bash", "-c", self.fix("\n".join(["set -e", *self.prelude, script]))],
                              cwd=repo_root(), env=self.env, capture_output=True, text=True, timeout=60)
        if check:
            assert done.returncode == 0, f"{script}\n--- stdout\n{done.stdout}\n--- stderr\n{done.stderr}"
        return done.stdout + done.stderr


def table(out: str) -> dict[str, tuple[str, str]]:
    """``SITE CLUSTER METRIC`` lines → {site: (cluster, metric)}."""
    rows = {}
    for line in out.splitlines():
        parts = line.split()
        if len(parts) == 3 and parts[0] in ("DFW", "LHR", "SIN"):
            rows[parts[0]] = (parts[1], parts[2])
    return rows


def test_steering_walkthrough_as_written(tmp_path: Path) -> None:
    shell = Shell(tmp_path)
    found = [(n, b.strip()) for n, b in STEP.findall(README.read_text())]
    assert [n for n, _ in found] == ["up", "env", "network", "deploy", "routes", "congest", "moved", "recover",
                                     "returned", "singapore", "offered", "stop"]
    script = dict(found)
    dev: subprocess.Popen[bytes] | None = None
    try:
        up = shell.fix(script["up"])
        assert up.startswith("drods dev up --clusters 3 --data-dir ") and up.endswith("&")
        command = up.rstrip("&").strip().replace("drods dev up", f"drods dev up --port {free_port()}", 1)
        dev = subprocess.Popen(["bash", "-c", f"exec {command}"], cwd=repo_root(), env=shell.env,
                               start_new_session=True)
        log = tmp_path / "drods-steer.log"
        wait_for(lambda: log.exists() and "DRO-DS is up" in log.read_text(), 90, "the playground",
                 what_else=lambda: log.read_text() if log.exists() else "")
        out = shell.run(script["env"])
        assert "aws-dfw" in out and "gcp-sin" in out
        shell.prelude = [line for line in script["env"].splitlines() if line.startswith(("source", "export"))]

        assert "reported 9 measurement(s)" in shell.run(script["network"])
        shell.run(script["deploy"])

        def served() -> dict[str, tuple[str, str]] | None:
            rows = table(shell.run(script["routes"], check=False))
            return rows if rows.get("DFW", ("",))[0] == "aws-dfw" and rows.get("LHR", ("",))[0] == "azure-lhr" \
                else None

        rows = wait_for(served, 60, "DFW and LHR served from their own cities",
                        what_else=lambda: shell.run("kubectl get bindings -o yaml", check=False))
        assert float(rows["DFW"][1]) < 20 and float(rows["LHR"][1]) < 20
        out = shell.run(script["routes"])
        assert '"serviceId":"video.example"' in out.replace(" ", "") and "DFW→aws-dfw,LHR→azure-lhr" in out

        changes = "kubectl get serviceroute video.example -o jsonpath='{.spec.changes}'"
        before = int(shell.run(changes))
        shell.run(script["congest"])
        t_moved = wait_for(lambda: time.monotonic() if table(shell.run(script["moved"])).get("LHR", ("",))[0]
                           == "aws-dfw" else None, 90, "LHR moved to aws-dfw")
        shell.run(script["recover"])
        wait_for(lambda: table(shell.run(script["returned"])).get("LHR", ("",))[0] == "azure-lhr", 90,
                 "LHR back on azure-lhr")
        assert time.monotonic() - t_moved >= 9.0  # the minimum interval (10 s), not the first good report
        assert int(shell.run(changes)) == before + 2  # "two changes in all": away and back

        shell.run(script["singapore"])

        def offered() -> str | None:
            out = shell.run(script["offered"], check=False)
            return out if out.startswith("gcp-sin") and table(out).get("SIN", ("",))[0] == "gcp-sin" else None

        out = wait_for(offered, 90, "video placed on gcp-sin and SIN served there",
                       what_else=lambda: shell.run(script["offered"], check=False))
        assert "video" in out and table(out)["SIN"][1] != "MAX"

        assert script["stop"] == "kill %1"
        os.killpg(dev.pid, signal.SIGTERM)
        assert dev.wait(40) == 0
    finally:
        if dev is not None and dev.poll() is None:
            os.killpg(dev.pid, signal.SIGKILL)
            dev.wait(10)
