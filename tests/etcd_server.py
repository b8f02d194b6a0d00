"""Real etcd servers on loopback, for tests and benchmarks.

A fake would hide exactly the behaviour the etcd backend must cope with (compaction, lease
expiry, member loss), so tests run the real binary: ``$ETCD_BINARY``, ``etcd`` on PATH or
Debian's ``/usr/bin/etcd``. Each server gets free loopback ports and a throw-away data dir.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import ssl
import subprocess
import tempfile
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

from drods.store.etcd import EtcdTLS
from tests.free_port import free_port

# Fast elections so a 3-member cluster recovers from a killed leader within about a second.
HEARTBEAT_MS = 50
ELECTION_MS = 500
START_TIMEOUT = 30.0


def etcd_binary() -> str | None:
    """Path of the etcd server binary, or None if it is not installed."""
    for candidate in (os.environ.get("ETCD_BINARY"), shutil.which("etcd"), "/usr/bin/etcd"):
        if candidate and os.access(candidate, os.X_OK):
            return candidate
    return None


class EtcdMember:
    """One etcd process; ``endpoint`` is ``127.0.0.1:PORT`` as ``EtcdStore`` wants it."""

    def __init__(self, name: str, data_dir: Path, client_port: int, peer_port: int,
                 tls: EtcdTLS | None = None) -> None:
        self.tls = tls  # serve clients over TLS and ask for their certificates
        self.name = name
        self.data_dir = data_dir
        self.client_port = client_port
        self.peer_port = peer_port
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def endpoint(self) -> str:
        return f"127.0.0.1:{self.client_port}"

    @property
    def peer_url(self) -> str:
        return f"http://127.0.0.1:{self.peer_port}"

    def start(self, binary: str, initial_cluster: str, token: str) -> None:
        self.data_dir.mkdir(parents=True, exist_ok=True)
        log = open(self.data_dir / "etcd.log", "ab")  # noqa: SIM115 - owned by the child
        client_url = f"{'https' if self.tls else 'http'}://127.0.0.1:{self.client_port}"
        tls_args: list[str] = []
        if self.tls is not None:
            assert self.tls.cert is not None and self.tls.key is not None
            server_cert = self.tls.ca.with_name("tls.crt")
            tls_args = ["--cert-file", str(server_cert), "--key-file", str(self.tls.ca.with_name("tls.key")),
                        "--trusted-ca-file", str(self.tls.ca), "--client-cert-auth"]
        self.proc = subprocess.Popen(
            [
                binary,
                "--name", self.name,
                "--data-dir", str(self.data_dir / "data"),
                "--listen-client-urls", client_url,
                "--advertise-client-urls", client_url,
                "--listen-peer-urls", self.peer_url,
                "--initial-advertise-peer-urls", self.peer_url,
                "--initial-cluster", initial_cluster,
                "--initial-cluster-token", token,
                "--initial-cluster-state", "new",
                "--heartbeat-interval", str(HEARTBEAT_MS),
                "--election-timeout", str(ELECTION_MS),
                "--logger", "zap",
                "--log-outputs", "stderr",
                *tls_args,
            ],
            stdout=log,
            stderr=log,
            stdin=subprocess.DEVNULL,
        )
        log.close()

    def _context(self) -> ssl.SSLContext | None:
        if self.tls is None:
            return None
        ctx = ssl.create_default_context(cafile=str(self.tls.ca))
        ctx.load_cert_chain(str(self.tls.cert), str(self.tls.key))
        return ctx

    def healthy(self) -> bool:
        scheme = "https" if self.tls else "http"
        try:
            with urllib.request.urlopen(f"{scheme}://{self.endpoint}/health", timeout=1,
                                        context=self._context()) as resp:
                return bool(json.load(resp).get("health") == "true")
        except (OSError, ValueError):
            return False

    def enable_auth(self, user: str, password: str) -> None:
        """Turn on etcd's authentication with ``user`` as its root user (etcdctl auth enable), over gRPC
        (etcd's JSON gateway needs a server certificate that is also a client certificate)."""
        import grpc
        from aetcd import rpc

        async def run() -> None:
            target = self.endpoint
            channel = (grpc.aio.secure_channel(target, self.tls.credentials()) if self.tls
                       else grpc.aio.insecure_channel(target))
            async with channel:
                auth = rpc.AuthStub(channel)
                await auth.UserAdd(rpc.AuthUserAddRequest(name=user, password=password), timeout=5)
                await auth.RoleAdd(rpc.AuthRoleAddRequest(name="root"), timeout=5)
                await auth.UserGrantRole(rpc.AuthUserGrantRoleRequest(user=user, role="root"), timeout=5)
                await auth.AuthEnable(rpc.AuthEnableRequest(), timeout=5)

        import asyncio

        asyncio.run(run())

    def status(self) -> dict[str, object]:
        """The member's Maintenance.Status (via etcd's JSON gateway)."""
        url = f"http://{self.endpoint}/v3/maintenance/status"
        req = urllib.request.Request(url, data=b"{}", method="POST")
        with urllib.request.urlopen(req, timeout=2) as resp:
            return dict(json.load(resp))

    def is_leader(self) -> bool:
        status = self.status()
        header = status.get("header")
        return isinstance(header, dict) and header.get("member_id") == status.get("leader")

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def kill(self) -> None:
        """SIGKILL: the abrupt failure the client has to survive."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(timeout=10)

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=10)

    def log_tail(self, lines: int = 30) -> str:
        with contextlib.suppress(OSError):
            return "\n".join((self.data_dir / "etcd.log").read_text(errors="replace").splitlines()[-lines:])
        return ""


class _PortTaken(RuntimeError):
    """A member could not bind a chosen port: another server took it first."""


class EtcdCluster:
    """``size`` members on loopback; start() blocks until every member reports healthy."""

    def __init__(self, size: int = 1, base_dir: str | None = None, tls: EtcdTLS | None = None) -> None:
        binary = etcd_binary()
        if binary is None:
            raise FileNotFoundError("etcd binary not found (install etcd-server or set ETCD_BINARY)")
        self.binary = binary
        self._tmp = None if base_dir else tempfile.mkdtemp(prefix="drods-etcd-")
        root = Path(base_dir or self._tmp or ".")
        self.members = [
            EtcdMember(f"m{i}", root / f"m{i}", free_port(), free_port(), tls) for i in range(size)
        ]
        self.token = f"drods-{os.getpid()}-{time.monotonic_ns()}"

    @property
    def endpoints(self) -> list[str]:
        return [m.endpoint for m in self.members]

    def start(self, timeout: float = START_TIMEOUT, attempts: int = 3) -> EtcdCluster:
        """Start every member; a port another test server bound between its choice and etcd's bind
        (``free_port`` only chooses) starts the cluster afresh on new ports, as ``ServerProcess`` does."""
        for attempt in range(attempts):
            try:
                return self._start_once(timeout)
            except _PortTaken:
                if attempt == attempts - 1:
                    raise
                for m in self.members:
                    shutil.rmtree(m.data_dir / "data", ignore_errors=True)
                    (m.data_dir / "etcd.log").unlink(missing_ok=True)
                    m.client_port, m.peer_port = free_port(), free_port()
                self.token = f"drods-{os.getpid()}-{time.monotonic_ns()}"
        raise AssertionError("unreachable")

    def _start_once(self, timeout: float) -> EtcdCluster:
        initial = ",".join(f"{m.name}={m.peer_url}" for m in self.members)
        for m in self.members:
            m.start(self.binary, initial, self.token)
        deadline = time.monotonic() + timeout
        pending = list(self.members)
        while pending:
            pending = [m for m in pending if not m.healthy()]
            dead = [m for m in pending if not m.alive()]
            if dead or (pending and time.monotonic() > deadline):
                tail = "\n".join(f"--- {m.name}\n{m.log_tail()}" for m in dead or pending)
                self.stop(keep_dirs=True)
                if dead and "address already in use" in tail:
                    raise _PortTaken(tail)
                self.stop()
                raise RuntimeError(f"etcd did not become healthy within {timeout}s:\n{tail}")
            if pending:
                time.sleep(0.05)
        return self

    def leader(self, timeout: float = 10.0) -> EtcdMember:
        """The current raft leader among the live members (waits for an election to settle)."""
        deadline = time.monotonic() + timeout
        while True:
            for m in self.members:
                with contextlib.suppress(OSError, ValueError):
                    if m.alive() and m.is_leader():
                        return m
            if time.monotonic() > deadline:
                raise RuntimeError(f"no etcd leader within {timeout}s")
            time.sleep(0.05)

    def stop(self, *, keep_dirs: bool = False) -> None:
        for m in self.members:
            m.stop()
        if self._tmp and not keep_dirs:
            shutil.rmtree(self._tmp, ignore_errors=True)

    def __enter__(self) -> EtcdCluster:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


@contextlib.contextmanager
def etcd_server(size: int = 1) -> Iterator[EtcdCluster]:
    """Start an etcd cluster of ``size`` members for the duration of the block."""
    cluster = EtcdCluster(size)
    cluster.start()
    try:
        yield cluster
    finally:
        cluster.stop()


def wipe(endpoint: str) -> None:
    """Empty a shared etcd (the test session's) before a test whose processes must read everything
    in it: objects other tests left are sealed with their data dirs' keyrings."""
    import asyncio

    from drods.store.etcd import EtcdStore

    async def run() -> None:
        store = EtcdStore([endpoint])
        try:
            await store.delete_prefix("/")
        finally:
            await store.close()

    asyncio.run(run())
