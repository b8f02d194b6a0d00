"""A real Prometheus on loopback for tests: the remote-write receiver on, nothing scraped.

Like `tests.etcd_server`, a fake would hide what matters (which samples the TSDB refuses, how
ranges are evaluated), so tests run the binary: ``$PROMETHEUS_BINARY``, ``prometheus`` on PATH
or Debian's ``/usr/bin/prometheus``, with a throw-away TSDB and a free port. Readiness is
waited for with a deadline (``/-/ready``).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import time
from pathlib import Path
from types import TracebackType

import httpx
import pytest
import yaml

from tests.free_port import free_port

START_TIMEOUT = 30.0


def prometheus_binary() -> str | None:
    for candidate in (os.environ.get("PROMETHEUS_BINARY"), shutil.which("prometheus"), "/usr/bin/prometheus"):
        if candidate and os.access(candidate, os.X_OK):
            return candidate
    return None


def require_prometheus() -> str:
    """The binary, else skip (fail when ``DRODS_REQUIRE_PROMETHEUS=1``, as in CI)."""
    binary = prometheus_binary()
    if binary is None:
        message = "prometheus binary not found (apt-get install prometheus, or set PROMETHEUS_BINARY)"
        if os.environ.get("DRODS_REQUIRE_PROMETHEUS") == "1":
            pytest.fail(message)
        pytest.skip(message)
    return binary


class PrometheusServer:
    """``--web.enable-remote-write-receiver``, no scrape jobs; ``out_of_order_window`` (e.g. ``"30d"``)
    sets ``storage.tsdb.out_of_order_time_window`` (None: Prometheus's default, in-order only)."""

    def __init__(self, binary: str, directory: Path, *, out_of_order_window: str | None = None) -> None:
        self.binary = binary
        self.directory = directory
        self.out_of_order_window = out_of_order_window
        self.port = free_port()
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def log_path(self) -> Path:
        return self.directory / "prometheus.log"

    def start(self) -> PrometheusServer:
        self.directory.mkdir(parents=True, exist_ok=True)
        config: dict[str, object] = {"global": {"scrape_interval": "1m"}}
        if self.out_of_order_window:
            config["storage"] = {"tsdb": {"out_of_order_time_window": self.out_of_order_window}}
        cfg = self.directory / "prometheus.yml"
        cfg.write_text(yaml.safe_dump(config))
        log = open(self.log_path, "ab")  # noqa: SIM115 - owned by the child
        try:
            self.proc = subprocess.Popen(
                [self.binary, f"--config.file={cfg}", f"--storage.tsdb.path={self.directory / 'tsdb'}",
                 f"--web.listen-address=127.0.0.1:{self.port}", "--web.enable-remote-write-receiver",
                 "--log.level=warn"],
                stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
        finally:
            log.close()
        deadline = time.monotonic() + START_TIMEOUT
        while not self._ready():
            if time.monotonic() > deadline:
                self.stop()
                raise TimeoutError(f"prometheus not ready after {START_TIMEOUT:.0f}s:\n{self.log_tail()}")
            time.sleep(0.05)
        return self

    def _ready(self) -> bool:
        assert self.proc is not None
        if self.proc.poll() is not None:
            raise RuntimeError(f"prometheus exited with {self.proc.returncode}:\n{self.log_tail()}")
        try:
            return httpx.get(f"{self.url}/-/ready", timeout=1.0).status_code == 200
        except httpx.HTTPError:
            return False

    def log_tail(self, chars: int = 2000) -> str:
        try:
            return self.log_path.read_text(errors="replace")[-chars:]
        except OSError:
            return ""

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.proc = None

    def __enter__(self) -> PrometheusServer:
        return self.start()

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.stop()
