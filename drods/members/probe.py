"""Network probe (SPEC C2): round-trip time, jitter and loss from this site to an HTTP(S) endpoint.

What is measured: per round, one TCP connection (and TLS, for https) is opened and ``count``
``GET /livez`` requests (header ``X-Drods-Probe-From: <this site>``, no credentials) go over it one
after another (HTTP/1.1 keep-alive); each probe is the time from sending a request to reading its
answer's status line — any status counts, a 401 is an answer too. The connect and the TLS handshake
are not in the figure (a kernel completes the handshake before ``accept()``, so an emulated distance
can only show in the exchange; `drods.sim.distance`), so they are paid once a round, not once a probe:
with 100 members and 5 probes each, a handshake per probe was a tenth of the control plane's event
loop. An answer the server will not keep the connection open after, or a probe lost, opens a new
connection for the next one. A probe without an answer within the timeout
is lost. Per target and round: ``rttMs`` is the least answered round trip (a busy prober's
scheduling — another coroutine's TLS handshake, a pause of the process — only ever adds to a round
trip, so the least one is the path's), ``jitterMs`` the mean
absolute difference of consecutive answered round trips (RFC 3550's idea), ``lossRatio`` the lost
share. All probes lost: no ``rttMs`` (never a made-up 0). The server's certificate is not checked —
the probe sends nothing secret and reads only the answers (status line, headers, a short body).
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import ssl
import time
from dataclasses import dataclass
from urllib.parse import urlsplit

import h11

PROBE_HEADER = "X-Drods-Probe-From"


@dataclass(frozen=True)
class ProbeResult:
    target: str
    rtt_ms: float | None  # None when every probe was lost
    jitter_ms: float | None
    loss_ratio: float
    probes: int
    measured_at: float  # wall clock, seconds


@functools.cache
def _insecure_context() -> ssl.SSLContext:
    """One context for every probe: it checks no certificate, so it loads none (loading the
    system's CA bundle per probe took ~70 % of a core with 100 members probed)."""
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE
    return ctx


def _close_late(opening: asyncio.Future[tuple[asyncio.StreamReader, asyncio.StreamWriter]]) -> None:
    """Close a connection made after its probe stopped waiting for it."""
    if opening.cancelled() or opening.exception() is not None:
        return
    opening.result()[1].close()


class _Connection:
    """One keep-alive HTTP/1.1 connection to a probe target (h11 keeps the protocol's state)."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, netloc: str) -> None:
        self.reader, self.writer, self.netloc = reader, writer, netloc
        self.http = h11.Connection(our_role=h11.CLIENT)

    @classmethod
    async def open(cls, url: str, wait_s: float) -> _Connection:
        """A connection within ``wait_s``. One not made by then is left to finish and closed, never
        cancelled: uvloop keeps a TLS connection cancelled in its handshake until its own handshake
        timeout (60 s), ~250 KiB each (measured) — in a saturated control plane, where a probe's
        handshake often outlasts its wait, ~70 of them (18 MiB) at once."""
        parts = urlsplit(url)
        tls = parts.scheme == "https"
        opening = asyncio.ensure_future(asyncio.open_connection(
            parts.hostname or "127.0.0.1", parts.port or (443 if tls else 80),
            ssl=_insecure_context() if tls else None))
        try:
            reader, writer = await asyncio.wait_for(asyncio.shield(opening), wait_s)
        except BaseException:
            opening.add_done_callback(_close_late)
            raise
        return cls(reader, writer, parts.netloc)

    async def round_trip(self, site: str, wait_s: float) -> tuple[float, bool]:
        """Milliseconds from sending a request to its answer's head, and whether the connection can
        carry another request (the whole answer read, the server keeping it open)."""
        self.writer.write(self.http.send(h11.Request(method="GET", target="/livez", headers=[
            ("Host", self.netloc), (PROBE_HEADER, site)])) + (self.http.send(h11.EndOfMessage()) or b""))
        started = time.perf_counter()
        await self.writer.drain()
        elapsed: float | None = None
        async with asyncio.timeout(wait_s):
            while True:
                event = self.http.next_event()
                if event is h11.NEED_DATA:
                    self.http.receive_data(await self.reader.read(65536))
                elif isinstance(event, h11.Response) and elapsed is None:
                    elapsed = (time.perf_counter() - started) * 1000.0
                elif isinstance(event, h11.EndOfMessage | h11.ConnectionClosed):
                    break
        if elapsed is None:
            raise ConnectionError("closed before an answer")
        if self.http.our_state is h11.DONE and self.http.their_state is h11.DONE:
            self.http.start_next_cycle()
            return elapsed, True
        return elapsed, False

    async def close(self) -> None:
        self.writer.close()
        with contextlib.suppress(Exception):
            await self.writer.wait_closed()


async def _round(url: str, site: str, count: int, wait_s: float) -> list[float | None]:
    """``count`` round trips, over one connection while the server keeps it open."""
    out: list[float | None] = []
    conn: _Connection | None = None
    try:
        for _ in range(count):
            rtt: float | None = None
            try:
                if conn is None:
                    conn = await _Connection.open(url, wait_s)
                rtt, reusable = await conn.round_trip(site, wait_s)
            except (OSError, TimeoutError, ssl.SSLError, h11.ProtocolError):
                reusable = False
            out.append(rtt)
            if not reusable and conn is not None:
                await conn.close()
                conn = None
    finally:
        if conn is not None:
            await conn.close()
    return out


async def probe(target: str, url: str, site: str, count: int, wait_s: float) -> ProbeResult:
    """``count`` probes one after another to ``url``."""
    rtts = [rtt for rtt in await _round(url, site, count, wait_s) if rtt is not None]
    diffs = [abs(b - a) for a, b in zip(rtts, rtts[1:], strict=False)]
    return ProbeResult(target=target, rtt_ms=min(rtts) if rtts else None,
                       jitter_ms=sum(diffs) / len(diffs) if diffs else (0.0 if rtts else None),
                       loss_ratio=(count - len(rtts)) / count if count else 0.0, probes=count,
                       measured_at=time.time())
