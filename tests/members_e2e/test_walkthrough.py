"""examples/walkthrough/README.md, run as written: every ```bash block after a ``<!-- step: NAME -->``
marker, in order, in bash, from the repository root, with the state a user's shell would have
(after the ``env`` step: ``source env.sh`` and ``KUBECONFIG``). Between steps the test waits, with
deadlines, for what the text says happens next, and checks the commands' output.

Three substitutions keep it hermetic and quick: the data dir ``/tmp/drods-dev`` becomes a temporary
one, ``drods dev up`` gets a free port and short health/failover timings (the README's defaults are
15 s + 30 s), and ``dev up … &`` / ``kill %1`` are done by the test on the process it holds."""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from tests.free_port import free_port
from tests.members_e2e.conftest import repo_root, wait_for

README = repo_root() / "examples" / "walkthrough" / "README.md"
STEP = re.compile(r"<!-- step: ([\w-]+) -->\s*```bash\n(.*?)```", re.S)
# a 2 s grace (1 s toleration) failed members over whose answers only queued behind a loaded machine's
# other tests: twice in CI the deploy landed on one member; the failover step still waits up to 60 s
FAST = "--probe-interval 0.5 --not-ready-grace 5 --toleration 2"

pytestmark = pytest.mark.skipif(shutil.which("kubectl") is None, reason="kubectl is not installed")


def steps() -> list[tuple[str, str]]:
    return [(name, body.strip()) for name, body in STEP.findall(README.read_text())]


class Shell:
    def __init__(self, tmp: Path) -> None:
        self.tmp = tmp
        self.prelude: list[str] = []
        self.env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}",
                    "HOME": str(tmp / "home")}
        (tmp / "home").mkdir()

    def fix(self, script: str) -> str:
        return script.replace("/tmp/drods-dev", str(self.tmp / "drods-dev"))

    def run(self, script: str, check: bool = True) -> str:
        done = subprocess.run(["bash", "-c", self.fix("\n".join(["set -e", *self.prelude, script]))],
                              cwd=repo_root(), env=self.env, capture_output=True, text=True, timeout=60)
        if check:
            assert done.returncode == 0, f"{script}\n--- stdout\n{done.stdout}\n--- stderr\n{done.stderr}"
        return done.stdout + done.stderr


def test_walkthrough_as_written(tmp_path: Path) -> None:
    shell = Shell(tmp_path)
    found = steps()
    names = [n for n, _ in found]
    assert names == ["up", "env", "deploy", "landed", "override", "overridden", "scale", "scaled", "down",
                     "failed-over", "up-again", "recovered", "delete", "deleted", "stop"], names
    script = dict(found)
    dev: subprocess.Popen[bytes] | None = None
    try:
        # 1. up: the background job, held by the test
        up = shell.fix(script["up"])
        assert up.startswith("drods dev up --clusters 3 --data-dir ") and up.endswith("&")
        command = up.rstrip("&").strip().replace("drods dev up", f"drods dev up --port {free_port()} {FAST}", 1)
        dev = subprocess.Popen(["bash", "-c", f"exec {command}"], cwd=repo_root(), env=shell.env,
                               start_new_session=True)
        log = tmp_path / "drods-dev.log"
        wait_for(lambda: log.exists() and "DRO-DS is up" in log.read_text(), 90, "the playground",
                 what_else=lambda: log.read_text() if log.exists() else "")

        # 2. env: then every later step runs with the same shell state
        out = shell.run(script["env"])
        assert "aws-dfw" in out and "azure-lhr" in out and "gcp-sin" in out
        shell.prelude = [line for line in script["env"].splitlines() if line.startswith(("source", "export"))]
        wait_for(lambda: shell.run("kubectl get clusters").count(" True ") == 3, 20, "three Ready clusters")
        # the playground's network is measured (C2): DFW → azure-lhr ≈ 84 ms as its sim emulates
        def lhr_measured() -> float | None:
            doc = json.loads(shell.run('curl -s --cacert "$DRODS_CA_FILE" -H "Authorization: Bearer $DRODS_TOKEN" '
                                       '"$DRODS_SERVER/api/v1/network/status?from=DFW"'))
            pair = {m["to"]: m for m in doc["measurements"]}.get("azure-lhr") or {}
            rtt = pair.get("rttMs") if pair.get("source") == "measured" else None
            # the first rounds run while the playground is still starting (a busy loop adds to the answer)
            return rtt if rtt is not None and abs(rtt - 84.0) <= 0.2 * 84.0 else None

        wait_for(lhr_measured, 60, "DFW → azure-lhr measured within 20 % of 84 ms")

        # 3. deploy, divided by water level
        shell.run(script["deploy"])
        wait_for(lambda: "6/6" in shell.run("kubectl get deploy web"), 40, "web 6/6",
                 what_else=lambda: shell.run("drods get bindings -o yaml", check=False))
        out = shell.run(script["landed"])
        shares = {}
        for line in out.splitlines():
            parts = line.split()
            if len(parts) == 3 and parts[0] in ("aws-dfw", "azure-lhr", "gcp-sin") and "/" in parts[2]:
                shares[parts[0]] = (parts[1], int(parts[2].split("/")[1]))
        assert sum(n for _, n in shares.values()) == 6, out
        assert {c: city for c, (city, _) in shares.items()} == {c: {"aws-dfw": "DFW", "azure-lhr": "LHR",
                                                                    "gcp-sin": "SIN"}[c] for c in shares}
        assert shares.get("azure-lhr", ("", 0))[1] < max(n for _, n in shares.values()), shares
        assert "Running" in out

        # 4. overrides reach only their cluster
        shell.run(script["override"])
        wait_for(lambda: "nvidia.com/gpu" in shell.run(script["overridden"]), 20, "overrides applied")
        lines = [line for line in shell.run(script["overridden"]).splitlines() if line.strip()]
        assert '"nvidia.com/gpu":"1"' in lines[0].replace(" ", "")
        assert lines[1] == "mirror.lhr.example/nginx:1.25" and lines[2] == "nginx:1.25", lines

        # 5. scale
        shell.run(script["scale"])
        wait_for(lambda: "9/9" in shell.run(script["scaled"]), 40, "web 9/9")

        # 6. a cluster fails: NotReady, tainted, its replicas moved, still 9/9
        shell.run(script["down"])

        def failed_over() -> str | None:
            out = shell.run(script["failed-over"])
            row = next((line.split() for line in out.splitlines() if line.startswith("aws-dfw")), [])
            web = next((line for line in out.splitlines() if line.startswith("web ")), "")
            return out if len(row) > 5 and row[5] == "False" and "9/9" in web and "aws-dfw" not in web else None

        wait_for(failed_over, 60, "replicas moved off aws-dfw",
                 what_else=lambda: shell.run("drods get bindings -o yaml", check=False))

        # 7. it comes back: the stale copy is deleted, nothing duplicated
        shell.run(script["up-again"])

        def recovered() -> str | None:
            out = shell.run(script["recovered"])
            row = next((line.split() for line in out.splitlines() if line.startswith("aws-dfw")), [])
            return out if len(row) > 5 and row[5] == "True" and "No resources found" in out else None

        out = wait_for(recovered, 60, "aws-dfw back and cleaned")
        assert "9/9" in out

        # 8. delete everything; every copy goes
        out = shell.run(script["delete"])
        assert "deployment.apps \"web\" deleted" in out
        wait_for(lambda: shell.run(script["deleted"]).count("No resources found") == 2, 30, "copies deleted")
        wait_for(lambda: "No resources found" in shell.run(
            "kubectl --kubeconfig /tmp/drods-dev/members/aws-dfw.kubeconfig get deploy"), 15, "none in aws-dfw")

        # 9. stop: what `kill %1` does to the job
        assert script["stop"] == "kill %1"
        os.killpg(dev.pid, signal.SIGTERM)
        assert dev.wait(40) == 0
        assert not list((tmp_path / "drods-dev" / "sims").glob("*.json")), "a member was left running"
    finally:
        if dev is not None and dev.poll() is None:
            os.killpg(dev.pid, signal.SIGKILL)
            dev.wait(10)
