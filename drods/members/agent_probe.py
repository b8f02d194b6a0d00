"""``drods agent --probe NAME=URL`` (SPEC C2): a pull member measures the network from its own site.

Besides its ``--probe`` targets, the agent asks the control plane each round what else to measure
(``GET /api/v1/agent/probe-targets``: the client sites' probe endpoints of ``steering.probe`` and the
other clusters' API endpoints) unless ``--no-discover-probes``; a ``--probe`` target of the same name
wins, and when the control plane does not answer the last answer stands.

Each round probes every target (`drods.members.probe`, header ``X-Drods-Probe-From: <cluster>``)
and reports the results with ``PUT /api/v1/network/status`` as ``source: measured`` pairs
(target → this cluster): a round trip is the same both ways, and a cluster-agent token may only
report pairs that end at its own cluster. Steering reads (client site → cluster) pairs, so a client
site's probe URL gives exactly the leg it needs.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from dataclasses import dataclass, field
from typing import Any

import httpx

from drods.members.probe import ProbeResult, probe
from drods.model.timefmt import rfc3339_ms

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class ProbePlan:
    """What ``drods agent`` measures: target name → URL, probes per round, a probe's timeout, the period."""

    targets: dict[str, str] = field(default_factory=dict)
    discover: bool = False  # also the control plane's targets (GET /api/v1/agent/probe-targets)
    count: int = 5
    wait_s: float = 2.0
    every_s: float = 10.0


def parse_target(text: str) -> tuple[str, str]:
    """``NAME=URL`` → (NAME, URL)."""
    name, _, url = text.partition("=")
    if not name or not url.startswith(("http://", "https://")):
        raise ValueError(f"--probe {text!r}: expected NAME=URL with an http(s) URL, e.g. LHR=https://probe.lhr:443")
    return name, url


def report_body(cluster: str, results: list[ProbeResult]) -> dict[str, Any]:
    return {"measurements": [{
        "from": r.target, "to": cluster, "source": "measured", "lossRatio": round(r.loss_ratio, 4),
        "measuredAt": rfc3339_ms(r.measured_at),
        **({"rttMs": round(r.rtt_ms, 3)} if r.rtt_ms is not None else {}),
        **({"jitterMs": round(r.jitter_ms, 3)} if r.jitter_ms is not None else {})} for r in results]}


async def probe_round(http: httpx.AsyncClient, cluster: str, targets: dict[str, str], count: int,
                      wait_s: float) -> httpx.Response:
    """Probe every target once (``count`` probes each) and report. Targets are probed one after
    another: another target's TLS handshake on this event loop would land inside a measured round trip."""
    results = [await probe(name, url, cluster, count, wait_s) for name, url in targets.items()]
    return await http.put("/api/v1/network/status", json=report_body(cluster, results))


async def discovered(http: httpx.AsyncClient, last: dict[str, str]) -> dict[str, str]:
    """The control plane's probe targets for this cluster (name → URL); ``last`` when it does not answer."""
    try:
        r = await http.get("/api/v1/agent/probe-targets")
        if r.status_code == 200:
            return {str(t["name"]): str(t["url"]) for t in r.json().get("targets") or []}
        log.warning("probe targets not read: HTTP %d %s", r.status_code, r.text[:300])
    except (httpx.HTTPError, ValueError, KeyError, TypeError) as e:
        log.warning("probe targets not read: %s", e)
    return last


async def run_probes(http: httpx.AsyncClient, cluster: str, plan: ProbePlan, stop: asyncio.Event) -> None:
    """A round every ``plan.every_s`` until ``stop``; a failed report is logged, the next round comes."""
    found: dict[str, str] = {}
    while not stop.is_set():
        try:
            if plan.discover:
                found = await discovered(http, found)
            targets = {**found, **plan.targets}
            r = await probe_round(http, cluster, targets, plan.count, plan.wait_s) if targets else None
            if r is not None and r.status_code != 200:
                log.warning("network status for %s not applied: HTTP %d %s", cluster, r.status_code, r.text[:300])
        except httpx.HTTPError as e:
            log.warning("cannot report network status: %s", e)
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(stop.wait(), plan.every_s)
