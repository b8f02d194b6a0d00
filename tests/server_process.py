"""A real ``drods`` server process for end-to-end tests (kubectl, the CLI, agents, benchmarks).

Tests that talk to DRO-DS the way users do need the real entry point: argument parsing, uvicorn,
TLS, signal handling and a clean shutdown are part of what they check. ``ServerProcess`` starts
``drods serve`` (or any other server subcommand) on a free loopback port with its own data dir,
waits for ``/readyz`` with a deadline, mints tokens with ``drods token create`` and stops the
process with SIGTERM, asserting that it exits cleanly.

``drods serve`` and ``drods apiserver`` serve HTTPS by default with the CA they make in the data
dir, as a user gets them: ``url`` is ``https://…`` and ``verify`` / ``environ()`` (``DRODS_CA_FILE``)
trust that CA. ``tls=False`` adds ``--insecure-http``; ``byo_cert=True`` serves a certificate made
here with ``--tls-cert/--tls-key``. Other commands (``scheduler``, ``controllers``) serve plain HTTP.

Usage::

    with ServerProcess(tmp_path) as server:
        token = server.token("admin")
        httpx.get(f"{server.url}/api/v1/clusters", headers={"Authorization": f"Bearer {token}"},
                  verify=server.verify)
"""

from __future__ import annotations

import datetime
import ipaddress
import os
import shutil
import signal
import ssl
import subprocess
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from types import TracebackType
from typing import Any

import httpx

from drods.transport import transport
from tests.free_port import free_port

START_TIMEOUT = 30.0
TLS_COMMANDS = frozenset({"serve", "apiserver"})  # HTTPS unless --insecure-http
STOP_TIMEOUT = 15.0
PORT_ATTEMPTS = 3


class PortTaken(RuntimeError):
    """The server could not bind the port chosen for it: something else took it first."""


def drods_command() -> list[str]:
    """The ``drods`` console script of the running interpreter's environment (else ``python -m``)."""
    script = Path(sys.executable).with_name("drods")
    if script.exists():
        return [str(script)]
    found = shutil.which("drods")
    if found:
        return [found]
    return [sys.executable, "-c", "from drods.cli.main import app; app()"]


def wait_until(condition: Callable[[], bool], timeout: float, what: str, interval: float = 0.05) -> None:
    """Poll ``condition`` until it holds; fail with ``what`` once ``timeout`` seconds have passed."""
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise TimeoutError(f"timed out after {timeout:.0f}s waiting for {what}")
        time.sleep(interval)


def make_self_signed_cert(directory: Path, host: str = "127.0.0.1") -> tuple[Path, Path]:
    """A throw-away certificate for ``host`` (also its own CA): returns (cert, key) paths.

    kubectl sends bearer tokens only over TLS, so end-to-end tests with kubectl need HTTPS."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, host)])
    now = datetime.datetime.now(datetime.UTC)
    try:
        san: x509.GeneralName = x509.IPAddress(ipaddress.ip_address(host))
    except ValueError:
        san = x509.DNSName(host)
    cert = (
        x509.CertificateBuilder()
        .subject_name(name).issuer_name(name).public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=2))
        .add_extension(x509.SubjectAlternativeName([san, x509.DNSName("localhost")]), critical=False)
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(key, hashes.SHA256())
    )
    directory.mkdir(parents=True, exist_ok=True)
    cert_path, key_path = directory / "tls.crt", directory / "tls.key"
    cert_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_path.write_bytes(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                           serialization.NoEncryption()))
    key_path.chmod(0o600)
    return cert_path, key_path


class ServerProcess:
    """One ``drods <command>`` server process on loopback.

    ``args`` are extra CLI arguments (e.g. ``["--store", "etcd://…"]``), ``env`` extra environment
    variables; ``data_dir`` is shared with ``token()`` so minted tokens verify."""

    def __init__(self, data_dir: Path, *, command: str = "serve", args: Sequence[str] = (),
                 env: Mapping[str, str] | None = None, tls: bool | None = None, byo_cert: bool = False,
                 port: int | None = None, start_timeout: float = START_TIMEOUT) -> None:
        self.data_dir = Path(data_dir)
        self.command = command
        self.args = list(args)
        self.env = dict(env or {})
        self.serves_tls_by_default = command in TLS_COMMANDS
        self.tls = (self.serves_tls_by_default or byo_cert) if tls is None else tls
        self.byo_cert = byo_cert
        self.port = port or free_port()
        self._port_chosen_here = port is None
        self.start_timeout = start_timeout
        self.proc: subprocess.Popen[bytes] | None = None
        # The CA to trust: the server's own (made on its first start), or the certificate brought.
        self.cert: Path | None = self.data_dir / "tls" / "ca.crt" if self.tls and not byo_cert else None
        self.key: Path | None = None
        self._tokens: dict[tuple[str, str | None], str] = {}
        self.log_path = self.data_dir / f"{command}.log"

    @property
    def url(self) -> str:
        return f"{'https' if self.tls else 'http'}://127.0.0.1:{self.port}"

    @property
    def verify(self) -> ssl.SSLContext | bool:
        """What to pass as httpx's ``verify``: trust the TLS server's CA."""
        return ssl.create_default_context(cafile=str(self.cert)) if self.cert and self.cert.exists() else True

    def environ(self) -> dict[str, str]:
        """The environment for this server and the clients of it (``DRODS_CA_FILE`` names its CA)."""
        ca = {"DRODS_CA_FILE": str(self.cert)} if self.cert else {}
        return {**os.environ, **ca, **self.env}

    def start(self) -> ServerProcess:
        """Start and wait for ``/readyz``; a port taken since ``free_port()`` chose it means another port.

        A port free when chosen can be taken before the server binds it — by another test server or
        by an outgoing connection's ephemeral port (the kernel hands out both from one range)."""
        for _ in range(PORT_ATTEMPTS - 1):
            try:
                return self._start_once()
            except PortTaken:
                if not self._port_chosen_here:
                    raise
                self.port = free_port()
        return self._start_once()

    def _start_once(self) -> ServerProcess:
        self.data_dir.mkdir(parents=True, exist_ok=True)
        cmd = [*drods_command(), self.command, "--data-dir", str(self.data_dir),
               "--host", "127.0.0.1", "--port", str(self.port), *self.args]
        if self.byo_cert:
            self.cert, self.key = make_self_signed_cert(self.data_dir / "byo-tls")
            cmd += ["--tls-cert", str(self.cert), "--tls-key", str(self.key)]
        elif not self.tls and self.serves_tls_by_default:
            cmd += ["--insecure-http"]
        log = open(self.log_path, "ab")  # noqa: SIM115 - owned by the child process
        try:
            self.proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, env=self.environ(),
                                         stdin=subprocess.DEVNULL)
        finally:
            log.close()
        try:
            wait_until(self._ready, self.start_timeout, f"{self.url}/readyz")
        except BaseException:
            self.kill()
            raise
        return self

    def _ready(self) -> bool:
        assert self.proc is not None
        if self.proc.poll() is not None:
            tail = self.log_tail()
            if f", {self.port}): address already in use" in tail:
                raise PortTaken(f"drods {self.command} could not bind port {self.port}, taken since it was "
                                f"chosen:\n{tail}")
            raise RuntimeError(f"drods {self.command} exited with {self.proc.returncode}:\n{tail}")
        try:
            return httpx.get(f"{self.url}/readyz", verify=self.verify, timeout=1.0).status_code == 200
        except httpx.HTTPError:
            return False

    def log_tail(self, lines: int = 40) -> str:
        try:
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return ""

    def run_cli(self, *args: str, input: str | None = None, env: Mapping[str, str] | None = None,
                timeout: float = 30.0) -> subprocess.CompletedProcess[str]:
        """Run ``drods ARGS`` with this server's environment (not the server's address: pass it)."""
        return subprocess.run([*drods_command(), *args], capture_output=True, text=True, input=input,
                              env={**self.environ(), **(env or {})}, timeout=timeout, check=False)

    def token(self, role: str = "admin", *, cluster: str | None = None, subject: str | None = None) -> str:
        """A token minted by ``drods token create`` against this server's key (cached per role; a cluster's
        agent token is minted afresh: deleting the Cluster revokes it, and a test may delete one)."""
        cache_key = (role, cluster)
        if subject is None and cluster is None and cache_key in self._tokens:
            return self._tokens[cache_key]
        args = ["token", "create", "--role", role, "--data-dir", str(self.data_dir)]
        if cluster:
            args += ["--cluster", cluster]
        if subject:
            args += ["--subject", subject]
        done = self.run_cli(*args)
        if done.returncode != 0:
            raise RuntimeError(f"drods token create failed: {done.stderr}")
        token = done.stdout.strip()
        if subject is None and cluster is None:
            self._tokens[cache_key] = token
        return token

    def kubeconfig(self, path: Path, role: str = "admin") -> Path:
        """Write the kubeconfig ``drods kubeconfig`` prints for a ``role`` token; returns ``path``."""
        args = ["kubeconfig", "--server", self.url, "--token", self.token(role), "--data-dir", str(self.data_dir)]
        if self.byo_cert:
            assert self.cert is not None
            args += ["--ca-file", str(self.cert)]
        done = self.run_cli(*args)
        if done.returncode != 0:
            raise RuntimeError(f"drods kubeconfig failed: {done.stderr}")
        path.write_text(done.stdout)
        return path

    def client(self, role: str = "admin", **kwargs: Any) -> httpx.Client:
        """An httpx client for this server with a ``role`` token."""
        return httpx.Client(base_url=self.url, transport=transport(self.verify),
                            headers={"Authorization": f"Bearer {self.token(role)}"}, **kwargs)

    def stop(self, *, check: bool = True) -> int | None:
        """SIGTERM, wait for the exit, and (``check``) insist it was clean (exit status 0)."""
        if self.proc is None or self.proc.poll() is not None:
            code = None if self.proc is None else self.proc.returncode
            self.proc = None
            return code
        self.proc.send_signal(signal.SIGTERM)
        try:
            code = self.proc.wait(timeout=STOP_TIMEOUT)
        except subprocess.TimeoutExpired:
            self.kill()
            message = f"drods {self.command} ignored SIGTERM for {STOP_TIMEOUT}s:\n{self.log_tail()}"
            raise AssertionError(message) from None
        self.proc = None
        if check:
            assert code == 0, f"drods {self.command} exited with {code} after SIGTERM:\n{self.log_tail()}"
        return code

    def kill(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(timeout=STOP_TIMEOUT)
        self.proc = None

    def __enter__(self) -> ServerProcess:
        return self.start()

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        # A failing test should report its own failure, not a secondary shutdown assertion.
        self.stop(check=exc_type is None)
