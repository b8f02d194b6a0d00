"""Run `drods sim` as a child process and wait for it properly: for tests, benchmarks and demos."""

from __future__ import annotations

import json
import os
import shutil
import signal
import ssl
import subprocess
import sys
import time
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any


def drods_command() -> list[str]:
    """The ``drods`` entry point of this interpreter's environment (or ``python -c`` into it)."""
    script = Path(sys.executable).parent / "drods"
    if script.exists():
        return [str(script)]
    found = shutil.which("drods")
    if found:
        return [found]
    return [sys.executable, "-c", "from drods.cli.main import app; app()"]


@dataclass
class SimProcess:
    name: str
    state_dir: Path
    args: list[str] = field(default_factory=list)
    log_path: Path | None = None
    proc: subprocess.Popen[bytes] | None = None
    state: dict[str, Any] = field(default_factory=dict)
    _log: IO[bytes] | None = None

    @property
    def kubeconfig(self) -> Path:
        return Path(self.state["kubeconfig"])

    @property
    def server(self) -> str:
        return str(self.state["server"])

    @property
    def pid(self) -> int:
        assert self.proc is not None
        return self.proc.pid

    def start(self) -> SimProcess:
        self.state_dir.mkdir(parents=True, exist_ok=True)
        state_file = self.state_dir / f"{self.name}.json"
        state_file.unlink(missing_ok=True)
        log_path = self.log_path or self.state_dir / f"{self.name}.log"
        self._log = open(log_path, "wb")  # noqa: SIM115 - lives as long as the child process
        env = {**os.environ, "DRODS_SIM_DIR": str(self.state_dir)}
        self.proc = subprocess.Popen([*drods_command(), "sim", "--name", self.name, "--fresh", *self.args],
                                     stdout=self._log, stderr=subprocess.STDOUT, env=env)
        return self

    def wait_ready(self, timeout: float = 30.0) -> SimProcess:
        """Until the state file exists (written last at start-up) and ``/healthz`` answers."""
        assert self.proc is not None
        deadline = time.monotonic() + timeout
        state_file = self.state_dir / f"{self.name}.json"
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"sim {self.name} exited with {self.proc.returncode}: {self.log_tail()}")
            if state_file.exists():
                try:
                    self.state = json.loads(state_file.read_text())
                except ValueError:
                    self.state = {}
                if self.state and self._healthy():
                    return self
            time.sleep(0.05)
        raise TimeoutError(f"sim {self.name} not ready within {timeout}s: {self.log_tail()}")

    def _healthy(self) -> bool:
        ctx = ssl.create_default_context(cafile=str(Path(self.state["dataDir"]) / "ca.crt")) \
            if self.server.startswith("https") else None
        try:
            with urllib.request.urlopen(f"{self.server}/healthz", timeout=1, context=ctx) as resp:
                return bool(resp.status == 200)
        except OSError:
            return False

    def fault(self, mode: str, ms: int = 0) -> dict[str, Any]:
        from drods.sim.control import send_command

        reply: dict[str, Any] = send_command(self.state_dir, self.name, {"action": "fault", "mode": mode, "ms": ms})
        return reply

    def load(self, workload: str, cpu: float | None) -> dict[str, Any]:
        """Set ``KIND/NAMESPACE/NAME``'s CPU demand on this sim (cores; None clears it)."""
        from drods.sim.control import send_command

        kind, namespace, name = workload.split("/")
        reply: dict[str, Any] = send_command(self.state_dir, self.name, {
            "action": "load", "kind": kind, "namespace": namespace, "name": name, "cpu": cpu})
        return reply

    def traffic(self, workload: str, mbps: float | None) -> dict[str, Any]:
        """Set ``KIND/NAMESPACE/NAME``'s network traffic on this sim (Mbps in + out; None clears it)."""
        from drods.sim.control import send_command

        kind, namespace, name = workload.split("/")
        reply: dict[str, Any] = send_command(self.state_dir, self.name, {
            "action": "traffic", "kind": kind, "namespace": namespace, "name": name, "mbps": mbps})
        return reply

    def latency(self, spec: str) -> dict[str, Any]:
        """Change an emulated link at run time, as ``--latency-to`` sets it at start: ``DFW=70±3,loss=0.01``."""
        from drods.sim.control import send_command

        reply: dict[str, Any] = send_command(self.state_dir, self.name, {"action": "latency", "spec": spec})
        return reply

    def stop(self, timeout: float = 15.0) -> int:
        """SIGTERM and wait; returns the exit code (0 = clean)."""
        if self.proc is None:
            return 0
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        if self._log is not None:
            self._log.close()
            self._log = None
        return int(self.proc.returncode)

    def kill(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()

    def log_tail(self, n: int = 2000) -> str:
        path = self.log_path or self.state_dir / f"{self.name}.log"
        try:
            return path.read_bytes()[-n:].decode(errors="replace")
        except OSError:
            return ""
