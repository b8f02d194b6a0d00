"""Network probe (SPEC C2): round-trip time, jitter and loss from this site to an HTTP(S) endpoint.

What is measured: per probe, a TCP connection (and TLS, for https) is opened, then the time from
sending ``GET /livez`` (header ``X-Drods-Probe-From: <this site>``, no credentials) to reading the
answer's status line — any status counts, a 401 is an answer too. The connect and the TLS handshake
are not in the figure (a kernel completes the handshake before ``accept()``, so an emulated distance
can only show in the exchange; `drods.sim.distance`). A probe without an answer within the timeout
is lost. Per target and round: ``rttMs`` is the least answered round trip (a busy prober's
scheduling — another coroutine's TLS handshake, a pause of the process — only ever adds to a round
trip, so the least one is the path's), ``jitterMs`` the mean
absolute difference of consecutive answered round trips (RFC 3550's idea), ``lossRatio`` the lost
share. All probes lost: no ``rttMs`` (never a made-up 0). The server's certificate is not checked —
the probe sends nothing secret and reads only a status line.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import ssl
import time
from dataclasses import dataclass
from urllib.parse import urlsplit

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


async def probe_once(url: str, site: str, wait_s: float) -> float | None:
    """One request/answer round trip in milliseconds, or None when it got no answer in time."""
    parts = urlsplit(url)
    tls = parts.scheme == "https"
    host = parts.hostname or "127.0.0.1"
    port = parts.port or (443 if tls else 80)
    writer: asyncio.StreamWriter | None = None
    try:
        reader, opened = await asyncio.wait_for(
            asyncio.open_connection(host, port, ssl=_insecure_context() if tls else None), wait_s)
        writer = opened
        request = (f"GET /livez HTTP/1.1\r\nHost: {parts.netloc}\r\n{PROBE_HEADER}: {site}\r\n"
                   "Connection: close\r\n\r\n").encode("latin-1")
        started = time.perf_counter()
        opened.write(request)
        await opened.drain()
        line = await asyncio.wait_for(reader.readline(), wait_s)
        elapsed = (time.perf_counter() - started) * 1000.0
        return elapsed if line.startswith(b"HTTP/") else None
    except (OSError, TimeoutError, ssl.SSLError):
        return None
    finally:
        if writer is not None:
            writer.close()
            with contextlib.suppress(Exception):
                await writer.wait_closed()


async def probe(target: str, url: str, site: str, count: int, wait_s: float) -> ProbeResult:
    """``count`` probes one after another to ``url``."""
    rtts: list[float] = []
    for _ in range(count):
        rtt = await probe_once(url, site, wait_s)
        if rtt is not None:
            rtts.append(rtt)
    diffs = [abs(b - a) for a, b in zip(rtts, rtts[1:], strict=False)]
    return ProbeResult(target=target, rtt_ms=min(rtts) if rtts else None,
                       jitter_ms=sum(diffs) / len(diffs) if diffs else (0.0 if rtts else None),
                       loss_ratio=(count - len(rtts)) / count if count else 0.0, probes=count,
                       measured_at=time.time())
