"""The network probe (C2): a round's probes share one connection while the server keeps it open."""

from __future__ import annotations

import asyncio
import contextlib
import gc
import ssl
import tracemalloc
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path

import pytest

from drods.members.probe import PROBE_HEADER, probe
from drods.security.tls import ensure_certs

Answer = Callable[[int], bytes | None]  # request number → the answer's bytes, or None: no answer


@asynccontextmanager
async def http_server(answer: Answer) -> AsyncIterator[tuple[str, list[int], list[str]]]:
    """A loopback HTTP/1.1 server: per connection, requests answered by ``answer`` until it closes.
    Yields its URL, the requests each connection carried, and the probe header of each request."""
    carried: list[int] = []
    sites: list[str] = []
    seen = 0

    async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        nonlocal seen
        carried.append(0)
        try:
            while head := await reader.readuntil(b"\r\n\r\n"):
                carried[-1] += 1
                sites.extend([line.split(b":", 1)[1].strip().decode() for line in head.split(b"\r\n")
                          if line.lower().startswith(PROBE_HEADER.lower().encode() + b":")])
                seen += 1
                out = answer(seen)
                if out is None:
                    await asyncio.sleep(3600)
                writer.write(out or b"")
                await writer.drain()
                if b"Connection: close" in (out or b""):
                    break
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            writer.close()

    server = await asyncio.start_server(serve, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    try:
        yield f"http://127.0.0.1:{port}", carried, sites
    finally:
        server.close()


KEEP = b"HTTP/1.1 404 Not Found\r\nContent-Type: application/json\r\nContent-Length: 2\r\n\r\n{}"
CLOSE = b"HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: 2\r\n\r\nok"


async def test_a_rounds_probes_go_over_one_kept_alive_connection() -> None:
    async with http_server(lambda _n: KEEP) as (url, carried, sites):
        result = await probe("c1", url, "DFW", 5, 2.0)
    assert carried == [5]  # one connection (one handshake) for the round's five probes
    assert sites == ["DFW"] * 5
    assert result.loss_ratio == 0.0 and result.rtt_ms is not None and result.rtt_ms >= 0.0
    assert result.jitter_ms is not None


async def test_a_server_closing_after_each_answer_gets_a_connection_per_probe() -> None:
    async with http_server(lambda _n: CLOSE) as (url, carried, _sites):
        result = await probe("c1", url, "DFW", 3, 2.0)
    assert carried == [1, 1, 1]
    assert result.loss_ratio == 0.0 and result.rtt_ms is not None


async def test_a_lost_probe_counts_as_lost_and_the_next_one_opens_a_new_connection() -> None:
    async with http_server(lambda n: None if n == 2 else KEEP) as (url, carried, _sites):
        result = await probe("c1", url, "DFW", 4, 0.3)
    assert carried == [2, 2]  # the second request never answered: a new connection for the rest
    assert result.loss_ratio == 0.25 and result.rtt_ms is not None


async def test_nothing_listening_is_every_probe_lost_and_no_rtt() -> None:
    async with http_server(lambda _n: KEEP) as (url, _carried, _sites):
        pass  # closed: nothing listens on the port any more
    result = await probe("c1", url, "DFW", 3, 0.5)
    assert result.loss_ratio == 1.0 and result.rtt_ms is None and result.jitter_ms is None


async def test_a_connection_not_made_within_the_wait_is_closed_once_made_not_cancelled(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """A probe stops waiting for its connection at ``wait_s``; the connection attempt goes on and
    is closed when it is made (uvloop keeps a TLS connection cancelled in its handshake for a minute)."""
    seen: dict[str, bool] = {"cancelled": False, "closed": False}
    closed = asyncio.Event()

    class Writer:
        def close(self) -> None:
            seen["closed"] = True
            closed.set()

    async def slow_open(*_args: object, **_kwargs: object) -> tuple[object, Writer]:
        try:
            await asyncio.sleep(0.3)
        except asyncio.CancelledError:
            seen["cancelled"] = True
            raise
        return object(), Writer()

    monkeypatch.setattr(asyncio, "open_connection", slow_open)
    result = await probe("c1", "http://127.0.0.1:9/livez", "DFW", 1, 0.05)
    assert result.loss_ratio == 1.0 and not seen["closed"]
    await asyncio.wait_for(closed.wait(), 5)
    assert seen == {"cancelled": False, "closed": True}


def test_tls_probes_that_time_out_in_their_handshake_leave_nothing_behind_on_uvloop(tmp_path: Path) -> None:
    """On uvloop (what `drods serve` runs on) against a TLS server: probes whose wait ends during
    the handshake, as in a saturated control plane, hold no memory once their connections are made
    and closed (before, uvloop held each one's ~250 KiB until its 60 s handshake timeout)."""
    uvloop = pytest.importorskip("uvloop")
    certs = ensure_certs(tmp_path, "probe-test", "127.0.0.1")

    async def answer(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        with contextlib.suppress(Exception):
            while await reader.readuntil(b"\r\n\r\n"):
                writer.write(KEEP)
                await writer.drain()
        writer.close()

    async def main() -> int:
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        ctx.load_cert_chain(certs.cert, certs.key)
        server = await asyncio.start_server(answer, "127.0.0.1", 0, ssl=ctx)
        url = f"https://127.0.0.1:{server.sockets[0].getsockname()[1]}/livez"
        await probe("c1", url, "DFW", 3, 2.0)  # what a first connection allocates once, not counted
        tracemalloc.start()
        try:
            before = tracemalloc.get_traced_memory()[0]
            for wait in (0.0005, 0.001, 0.002) * 20:
                await probe("c1", url, "DFW", 3, wait)
            await asyncio.sleep(1.0)  # the late connections made and closed
            gc.collect()
            return tracemalloc.get_traced_memory()[0] - before
        finally:
            tracemalloc.stop()
            server.close()

    held = uvloop.run(main())
    assert held < 2 << 20, f"{held / 2**20:.1f} MiB held after 180 probes"
