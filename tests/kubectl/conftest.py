"""A real DRO-DS server (TLS: kubectl sends tokens only over HTTPS) and the real kubectl.

The kubectl on PATH is used, whatever its version (the Debian ``kubernetes-client`` 1.20 or a
current one); ``DRODS_KUBECTL`` names another binary. Without one the tests are skipped, unless
``DRODS_REQUIRE_KUBECTL=1`` (CI), where that is a failure.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.server_process import ServerProcess


def kubectl_binary() -> str | None:
    for candidate in (os.environ.get("DRODS_KUBECTL"), shutil.which("kubectl")):
        if candidate and os.access(candidate, os.X_OK):
            return candidate
    return None


@dataclass
class Kubectl:
    """Runs kubectl against the test server with a kubeconfig per role and a private cache dir."""

    binary: str
    server: ServerProcess
    workdir: Path

    def client_minor(self) -> int:
        """kubectl's minor version (20 for Debian's kubernetes-client, 30+ for current ones)."""
        done = subprocess.run([self.binary, "version", "--client", "-o", "json"], capture_output=True, text=True,
                              timeout=30, check=True)
        return int("".join(ch for ch in json.loads(done.stdout)["clientVersion"]["minor"] if ch.isdigit()))

    def kubeconfig(self, role: str) -> Path:
        path = self.workdir / f"kubeconfig-{role}"
        if not path.exists():
            self.server.kubeconfig(path, role)
        return path

    def command(self, *args: str, role: str = "admin") -> list[str]:
        return [self.binary, f"--kubeconfig={self.kubeconfig(role)}", f"--cache-dir={self.workdir / 'cache'}",
                *args]

    def run(self, *args: str, role: str = "admin", input: str | None = None,
            check: bool = True, timeout: float = 30.0) -> subprocess.CompletedProcess[str]:
        done = subprocess.run(self.command(*args, role=role), capture_output=True, text=True, input=input,
                              timeout=timeout, check=False, env={**os.environ, "KUBECONFIG": ""})
        if check and done.returncode != 0:
            raise AssertionError(f"kubectl {' '.join(args)} failed ({done.returncode}):\n{done.stdout}\n{done.stderr}")
        return done


@pytest.fixture(scope="session")
def kubectl_path() -> str:
    binary = kubectl_binary()
    if binary is None:
        message = "kubectl not found (apt-get install kubernetes-client, or set DRODS_KUBECTL)"
        if os.environ.get("DRODS_REQUIRE_KUBECTL") == "1":
            pytest.fail(message)
        pytest.skip(message)
    return binary


@pytest.fixture(scope="session")
def tls_server(tmp_path_factory: pytest.TempPathFactory, kubectl_path: str) -> Iterator[ServerProcess]:
    with ServerProcess(tmp_path_factory.mktemp("drods-kubectl")) as server:
        yield server


@pytest.fixture(scope="session")
def kubectl(kubectl_path: str, tls_server: ServerProcess, tmp_path_factory: pytest.TempPathFactory) -> Kubectl:
    return Kubectl(kubectl_path, tls_server, tmp_path_factory.mktemp("kubectl"))
