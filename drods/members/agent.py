"""The metrics agent of a member cluster (SPEC A4, C1): reads the member through its Kubernetes API
and pushes the status to DRO-DS with ``PUT /api/v1/metrics``, as often as the control plane asks.

For clusters DRO-DS cannot reach (pull mode: behind NAT, at the edge) the agent runs next to the
member with a ``cluster-agent`` token bound to that cluster. Each report is the same body the
control plane's own Kubernetes collector builds (`report_from_summary`), so pushed and pulled
status are interchangeable. The answer's ``nextReportSeconds`` — the fastest need among the
subscriptions that match the cluster (`drods.monitor.subscriptions`) — sets the next report.

It never gives up on a transient failure: a member or control plane that is down is retried at the
report interval (with backoff for the control plane), so the agent outlives restarts on both sides.
A refused token (401/403) is not transient: `run_agent` raises `AgentRefused`.

A member that stops answering (its client NotReady: ``failure_threshold`` attempts in a row failed) is
said at once, as a ``ClusterNotReachable`` domain event, and its return as ``ClusterReachable``
(`drods.model.reachability`): the cluster turns NotReady within a report interval, not after the
control plane's ``pullGraceSeconds`` of silence. An event that did not get through is sent again the
next round.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import random
import ssl
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import httpx

from drods.members.client import MemberClient
from drods.members.collector import report_from_summary
from drods.model import reachability
from drods.transport import async_transport

log = logging.getLogger(__name__)


class AgentRefused(Exception):
    """The control plane refused the agent's credentials: retrying cannot help."""


def next_report_seconds(body: Mapping[str, Any], default: float) -> float:
    """How long to wait before the next report, from a ``PUT /api/v1/metrics`` answer."""
    value = body.get("nextReportSeconds")
    if isinstance(value, int | float) and not isinstance(value, bool) and value > 0:
        return float(value)
    return default


@dataclass(slots=True)
class AgentStats:
    reports: int = 0  # accepted by the control plane
    failures: int = 0  # member unreadable or control plane unreachable / refusing the report
    interval: float = 0.0  # the interval in force


async def report_once(member: MemberClient, http: httpx.AsyncClient, cluster: str) -> httpx.Response:
    """Read the member once and send the report; the response as the control plane gave it."""
    body = report_from_summary(cluster, await member.summary())
    return await http.put("/api/v1/metrics", json=body)


async def say_reachable(http: httpx.AsyncClient, cluster: str, reachable: bool, message: str) -> bool:
    """Tell the control plane whether the member answers; whether it took the word."""
    body = reachability.event(cluster, reachable, message)
    try:
        r = await http.post("/api/v1/metrics/events", json=body)
    except httpx.HTTPError as e:
        log.warning("cannot send %s for cluster %s to %s: %s", body["type"], cluster, http.base_url, e)
        return False
    if r.status_code != 201:
        log.warning("%s for cluster %s not recorded: HTTP %d %s", body["type"], cluster, r.status_code, r.text[:300])
    return r.status_code == 201


async def run_agent(cluster: str, member: MemberClient, server: str, token: str, *,
                    interval: float = 15.0, verify: ssl.SSLContext | bool = True, max_backoff: float = 60.0,
                    stop: asyncio.Event | None = None, stats: AgentStats | None = None) -> AgentStats:
    """Report until ``stop`` is set; ``interval`` is the default when the answer names none."""
    stop = stop or asyncio.Event()
    stats = stats or AgentStats()
    stats.interval = interval
    backoff = 1.0
    phased = False
    said_unreachable = False  # the control plane has the member's ClusterNotReachable
    member.follow_pods()  # reported every interval: its pods followed, not listed each time
    headers = {"Authorization": f"Bearer {token}"}
    async with httpx.AsyncClient(base_url=server.rstrip("/"), headers=headers, transport=async_transport(verify),
                                 timeout=10) as http:
        while not stop.is_set():
            wait = stats.interval
            try:
                r = await report_once(member, http, cluster)
            except httpx.HTTPError as e:  # the control plane is unreachable: back off, keep the member's pace
                stats.failures += 1
                wait = min(backoff, max_backoff)
                backoff = min(backoff * 2, max_backoff)
                log.warning("cannot reach %s: %s; retrying in %.0fs", server, e, wait)
            except Exception as e:  # noqa: BLE001 - the member is unreadable: said once it does not answer
                stats.failures += 1
                log.warning("cannot read cluster %s: %s", cluster, e)
                if not said_unreachable and member.state.condition == "NotReady":
                    said_unreachable = await say_reachable(http, cluster, False, member.state.last_error or str(e))
            else:
                backoff = 1.0
                if r.status_code in (401, 403):
                    raise AgentRefused(f"{server} refused the token for cluster {cluster}: HTTP {r.status_code} "
                                       f"{r.text[:300]}")
                if said_unreachable:
                    said_unreachable = not await say_reachable(http, cluster, True, "answering again")
                if r.status_code == 200:
                    stats.reports += 1
                    stats.interval = next_report_seconds(r.json(), interval)
                    # the report after the first at a point of the interval of this member's own:
                    # agents started together (one process for many) would otherwise report at once
                    wait = stats.interval if phased else random.uniform(0.0, stats.interval)
                    phased = True
                else:  # 202 stale/out of order, 422 invalid, 5xx: logged, the next report may fare better
                    stats.failures += 1
                    log.warning("report for %s not applied: HTTP %d %s", cluster, r.status_code, r.text[:300])
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), wait)
    return stats
