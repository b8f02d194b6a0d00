"""An agent's metrics reports: the first at once, the second at a point of the interval of the agent's
own, then one every interval — agents started together (`drods agents`, one process for many members)
do not all report at once every interval."""

from __future__ import annotations

import asyncio
import time
from types import SimpleNamespace

import httpx
import pytest

from drods.members import agent
from drods.members.agent import AgentStats, run_agent
from tests.members.waiting import wait_until


async def test_agents_started_together_report_at_their_own_places_in_the_interval(
        monkeypatch: pytest.MonkeyPatch) -> None:
    interval = 0.4
    reports: dict[str, list[float]] = {}

    async def report_once(_member: object, _http: object, cluster: str) -> httpx.Response:
        reports.setdefault(cluster, []).append(time.monotonic())
        return httpx.Response(200, json={"nextReportSeconds": interval})

    monkeypatch.setattr(agent, "report_once", report_once)
    # no TLS context per agent (each ~50 ms of the loop): the reports are what is measured
    monkeypatch.setattr(agent, "async_transport", lambda _verify: httpx.MockTransport(lambda _r: httpx.Response(500)))
    member = SimpleNamespace(follow_pods=lambda: None)
    stop = asyncio.Event()
    names = [f"c{i}" for i in range(30)]
    tasks = [asyncio.create_task(run_agent(n, member, "https://plane.invalid", "token",  # type: ignore[arg-type]
                                           interval=60.0, stop=stop, stats=AgentStats())) for n in names]
    try:
        await wait_until(lambda: all(len(reports.get(n, [])) >= 3 for n in names), 10.0, "three reports each")
    finally:
        stop.set()
        await asyncio.gather(*tasks)
    second = sorted(reports[n][1] - reports[n][0] for n in names)
    assert second[0] >= 0.0 and second[-1] <= interval + 0.5 and second[-1] - second[0] > interval / 3, second
    # then every interval the answer names (the default, 60 s, is not used); the upper bounds leave
    # room for a loaded machine's late timers
    assert all(interval - 0.05 <= reports[n][2] - reports[n][1] <= interval + 0.5 for n in names), reports
