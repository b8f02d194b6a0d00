"""Measured network status (SPEC C2): the control plane's probe of push members and client sites.

While this process leads ``/leases/network-probe``, every ``intervalSeconds`` it probes
(`drods.members.probe`: ``probesPerInterval`` request/answer round trips each) from its own site
(``site``, the control plane's location) to

* every push-mode Cluster's API endpoint (``spec.endpoint``) — stored as the pair (``site``, cluster);
* every client site's probe endpoint in ``clientSites`` — stored as the pair (client site, ``site``).

A round's targets start one after another over the first ``SPREAD`` (80 %) of the interval, not all
at once: the members answer the round's handshakes and requests alongside their other work.

Results are written through the term's fenced store as ``source: measured`` (`write_measurements`),
where they win over pushed reports while fresh. Pull members are not probed from here: their
``drods agent`` runs at their site. One slow or unreachable target costs its own timeouts only.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from typing import Any

from drods.machinery.informer import Informer
from drods.machinery.periodic import Periodic
from drods.members.probe import ProbeResult, probe
from drods.model.steering import Measurement
from drods.model.timefmt import rfc3339_ms
from drods.steering.settings import ProbeSettings
from drods.steering.status import MEASURED, write_measurements
from drods.store import Store

LEASE = "network-probe"
SPREAD = 0.8  # the share of the interval over which a round's probes start
MIN_GAP = 0.05  # seconds between rounds at least


def targets(clusters: dict[str, Any], settings: ProbeSettings) -> list[tuple[str, str, str]]:
    """(from, to, url) per target: push clusters with an endpoint, then the client sites."""
    out: list[tuple[str, str, str]] = []
    for obj in clusters.values():
        spec = obj.get("spec") or {}
        if spec.get("syncMode") == "Pull" or not isinstance(spec.get("endpoint"), str):
            continue
        out.append((settings.site, str(obj["metadata"]["name"]), spec["endpoint"]))
    out += [(client, settings.site, url) for client, url in sorted(settings.clientSites.items())]
    return out


def measurement(source_site: str, to: str, r: ProbeResult) -> Measurement:
    return Measurement.model_validate({
        "from": source_site, "to": to, "source": MEASURED, "rttMs": None if r.rtt_ms is None else round(r.rtt_ms, 3),
        "jitterMs": None if r.jitter_ms is None else round(r.jitter_ms, 3), "lossRatio": round(r.loss_ratio, 4),
        "measuredAt": rfc3339_ms(r.measured_at)})


class NetworkProber:
    def __init__(self, store: Store, clusters: Informer, settings: ProbeSettings,
                 clock: Callable[[], float] = time.time) -> None:
        self.store = store
        self.clusters = clusters
        self.settings = settings
        self.clock = clock
        self.rounds = 0
        self.round_started = time.monotonic()  # the next round starts an interval after it

    async def step(self) -> None:
        s = self.settings
        self.round_started = begun = time.monotonic()
        found = targets(dict(self.clusters.cache), s)
        if not found:
            return
        slots = asyncio.Semaphore(s.concurrency)
        # the targets' starts spread over the round: a hundred members probed at once (a TLS
        # handshake and five requests each) held every member's answers to the controllers back
        # for seconds, every round
        spacing = SPREAD * s.intervalSeconds / len(found)

        async def one(k: int, to: str, url: str) -> ProbeResult:
            await asyncio.sleep(max(0.0, begun + k * spacing - time.monotonic()))
            async with slots:
                return await probe(to, url, s.site, s.probesPerInterval, s.timeoutSeconds)

        results = await asyncio.gather(*(one(k, to, url) for k, (_from, to, url) in enumerate(found)))
        items = [measurement(site_from, to, r) for (site_from, to, _url), r in zip(found, results, strict=True)]
        await write_measurements(self.store, items, self.clock)
        self.rounds += 1

    async def run(self) -> None:
        await self.clusters.wait_synced()

        async def wait() -> None:  # a round every interval from the start of the last (it spans most of one)
            elapsed = time.monotonic() - self.round_started
            await asyncio.sleep(max(self.settings.intervalSeconds - elapsed, MIN_GAP))

        await Periodic(LEASE, self.step, None, wait=wait, first_at_start=True).run()
