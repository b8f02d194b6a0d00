"""No dropped connections under load: 1,000 concurrent requests against a real ``drods serve`` (HTTPS,
as a user runs it) while other processes saturate every CPU, in two waves with the connections left
idle between them for about as long as a client pool keeps them. The clients here do *not* retry, so
a reset connection would show; the retrying transport the project's clients use is tested apart."""

from __future__ import annotations

import asyncio
import collections
import http.client
import os
import ssl
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from drods.api.serving import KEEP_ALIVE_SECONDS
from drods.transport import AsyncRetryingTransport, RetryingTransport
from tests.server_process import ServerProcess

CLUSTERS = 50
CONCURRENT = 1000


@pytest.fixture
def saturated_cpus() -> Iterator[None]:
    # One busy process per CPU (niceness 5: the machine is saturated, the server starved of idle time,
    # without stretching the test to minutes on a shared machine).
    burners = [subprocess.Popen([sys.executable, "-c", "import os; os.nice(5)\nwhile True: pass"])
               for _ in range(os.cpu_count() or 2)]
    try:
        yield
    finally:
        for p in burners:
            p.kill()
            p.wait(10)


async def _wave(client: httpx.AsyncClient, wave: int, outcomes: collections.Counter[str]) -> None:
    async def one(i: int) -> None:
        name = f"load-{i % CLUSTERS}"
        try:
            if i % 2:
                r = await client.get(f"/api/v1/clusters/{name}")
            else:
                r = await client.put("/api/v1/metrics", json={"cluster": name, "cpuCapacity": 64,
                                                              "cpuUsage": (i + wave) % 100})
            outcomes[str(r.status_code)] += 1
        except httpx.TransportError as e:
            outcomes[type(e).__name__] += 1

    await asyncio.gather(*(one(i) for i in range(CONCURRENT)))


def test_1000_concurrent_requests_on_saturated_cpus_drop_nothing(tmp_path: Path, saturated_cpus: None) -> None:
    with ServerProcess(tmp_path / "data", start_timeout=60) as server:
        with server.client(timeout=60) as admin:
            for i in range(CLUSTERS):
                r = admin.post("/api/v1/clusters", json={"name": f"load-{i}", "syncMode": "Pull"})
                assert r.status_code == 201, r.text

        async def run() -> collections.Counter[str]:
            outcomes: collections.Counter[str] = collections.Counter()
            limits = httpx.Limits(max_connections=CONCURRENT, max_keepalive_connections=CONCURRENT)
            async with httpx.AsyncClient(base_url=server.url, verify=server.verify, limits=limits, timeout=300,
                                         headers={"Authorization": f"Bearer {server.token('admin')}"}) as client:
                await _wave(client, 0, outcomes)
                # httpx keeps idle connections 5 s: reuse them just before that, when a server that
                # closes idle connections after 5 s would be closing them too.
                await asyncio.sleep(4.8)
                await _wave(client, 1, outcomes)
            return outcomes

        started = time.monotonic()
        outcomes = asyncio.run(run())
        print(f"2 x {CONCURRENT} requests in {time.monotonic() - started:.1f}s: {dict(outcomes)}")
        assert set(outcomes) <= {"200", "202"}, dict(outcomes)
        assert sum(outcomes.values()) == 2 * CONCURRENT


def test_an_idle_connection_is_kept_longer_than_clients_keep_theirs(tmp_path: Path) -> None:
    """The root cause of the resets: the server must not close an idle connection a client may
    still reuse (httpx keeps them 5 s, Go's clients — kubectl — 90 s)."""
    assert KEEP_ALIVE_SECONDS > 90
    with ServerProcess(tmp_path / "data") as server:
        conn = http.client.HTTPSConnection("127.0.0.1", server.port, timeout=10,
                                           context=ssl.create_default_context(cafile=str(server.cert)))
        try:
            conn.request("GET", "/healthz")
            assert conn.getresponse().read() and conn.sock is not None
            first = conn.sock.getsockname()
            time.sleep(6.0)  # past uvicorn's default keep-alive (5 s), which caused the resets
            conn.request("GET", "/healthz")  # on the same socket: a closed one fails here
            response = conn.getresponse()
            assert response.status == 200 and response.read()
            assert conn.sock.getsockname() == first
        finally:
            conn.close()


def _flaky(fail: int, error: type[httpx.TransportError]) -> tuple[list[str], httpx.MockTransport]:
    seen: list[str] = []

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(request.method)
        if len(seen) <= fail:
            raise error("connection reset by peer", request=request)
        return httpx.Response(200, json={"ok": True})

    return seen, httpx.MockTransport(handler)


def test_clients_retry_idempotent_requests_on_a_reset_connection() -> None:
    seen, mock = _flaky(2, httpx.ReadError)
    with httpx.Client(transport=RetryingTransport(mock), base_url="http://x") as c:
        assert c.put("/api/v1/metrics", json={}).status_code == 200
    assert seen == ["PUT", "PUT", "PUT"]
    # A POST may have been applied before the reset: not repeated ...
    seen, mock = _flaky(1, httpx.ReadError)
    with httpx.Client(transport=RetryingTransport(mock), base_url="http://x") as c, \
            pytest.raises(httpx.ReadError):
        c.post("/api/v1/clusters", json={})
    assert seen == ["POST"]
    # ... unless the connection was never made.
    seen, mock = _flaky(1, httpx.ConnectError)
    with httpx.Client(transport=RetryingTransport(mock), base_url="http://x") as c:
        assert c.post("/api/v1/clusters", json={}).status_code == 200
    # Three resets in a row are reported.
    seen, mock = _flaky(3, httpx.RemoteProtocolError)
    with httpx.Client(transport=RetryingTransport(mock), base_url="http://x") as c, \
            pytest.raises(httpx.RemoteProtocolError):
        c.get("/api/v1/clusters")

    async def asynchronous() -> None:
        seen, mock = _flaky(1, httpx.ReadError)
        async with httpx.AsyncClient(transport=AsyncRetryingTransport(mock), base_url="http://x") as c:
            assert (await c.delete("/api/v1/clusters/a")).status_code == 200
        assert seen == ["DELETE", "DELETE"]

    asyncio.run(asynchronous())
