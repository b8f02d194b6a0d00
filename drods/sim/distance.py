"""Emulated distance (SPEC C2): ``drods sim --latency-to TARGET=MS[±JITTER][,loss=P]``.

A kernel completes the TCP handshake before the server's ``accept()``, so a process cannot delay a
bare TCP connect from user space; distance is therefore emulated at the application level. A
request that names its probing site in the header ``X-Drods-Probe-From: SITE`` (what
`drods.members.probe` sends) is answered ``MS ± JITTER`` milliseconds late (uniform jitter) when
``SITE`` is a configured TARGET, and with probability ``P`` not answered at all (a lost probe: the
prober's timeout expires). MS is the round trip the prober should measure. Requests without the
header (kubectl, the member client) are never delayed.
"""

from __future__ import annotations

import asyncio
import random
import re
from dataclasses import dataclass

from starlette.types import ASGIApp, Receive, Scope, Send

PROBE_HEADER = "x-drods-probe-from"
_SPEC = re.compile(r"^(?P<target>[^=\s]+)=(?P<ms>\d+(?:\.\d+)?)(?:(?:±|\+-)(?P<jitter>\d+(?:\.\d+)?))?"
                   r"(?:,loss=(?P<loss>\d+(?:\.\d+)?))?$")
LOST_HOLD_SECONDS = 60.0  # a lost probe's request is held this long, then dropped unanswered


@dataclass(frozen=True)
class Link:
    """The emulated round trip to one probing site."""

    rtt_ms: float
    jitter_ms: float = 0.0
    loss: float = 0.0  # probability 0..1 that a probe goes unanswered

    def describe(self) -> dict[str, float]:
        return {"rttMs": self.rtt_ms, "jitterMs": self.jitter_ms, "lossRatio": self.loss}


def parse_latency_to(text: str) -> tuple[str, Link]:
    """``DFW=70``, ``DFW=70±5``, ``DFW=70+-5,loss=0.01`` → (``DFW``, Link)."""
    m = _SPEC.match(text.strip())
    if m is None:
        raise ValueError(f"--latency-to {text!r}: expected TARGET=MS[±JITTER][,loss=P], e.g. LHR=70±3,loss=0.01")
    ms, jitter = float(m["ms"]), float(m["jitter"] or 0.0)
    loss = float(m["loss"] or 0.0)
    if jitter > ms:
        raise ValueError(f"--latency-to {text!r}: jitter cannot exceed the delay")
    if not 0.0 <= loss <= 1.0:
        raise ValueError(f"--latency-to {text!r}: loss is a probability between 0 and 1")
    return m["target"], Link(ms, jitter, loss)


class DistanceTable:
    """Probing site → its emulated link; changed at run time through the sim's control port."""

    def __init__(self, links: dict[str, Link] | None = None, rng: random.Random | None = None) -> None:
        self.links: dict[str, Link] = dict(links or {})
        self.rng = rng or random.Random()

    def set(self, target: str, link: Link | None) -> None:
        if link is None:
            self.links.pop(target, None)
        else:
            self.links[target] = link

    def describe(self) -> dict[str, dict[str, float]]:
        return {t: link.describe() for t, link in sorted(self.links.items())}

    def delay_for(self, site: str) -> float | None:
        """Seconds to hold a probe from ``site`` (0: none), or None when this probe is lost."""
        link = self.links.get(site)
        if link is None:
            return 0.0
        if link.loss and self.rng.random() < link.loss:
            return None
        return max(0.0, link.rtt_ms + self.rng.uniform(-link.jitter_ms, link.jitter_ms)) / 1000.0


class DistanceMiddleware:
    """ASGI layer that delays (or drops) probe requests from configured sites."""

    def __init__(self, app: ASGIApp, table: DistanceTable) -> None:
        self.app = app
        self.table = table

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and self.table.links:
            site = next((v.decode("latin-1") for k, v in scope.get("headers") or []
                         if k.decode("latin-1").lower() == PROBE_HEADER), None)
            if site is not None:
                hold = self.table.delay_for(site)
                if hold is None:
                    await asyncio.sleep(LOST_HOLD_SECONDS)
                    return
                if hold:
                    await asyncio.sleep(hold)
        await self.app(scope, receive, send)
