"""A pull-mode agent follows its Works again within moments of the control plane's return, however long
it was away: its relist backoff has grown meanwhile (up to ``max_backoff``), and nothing else tells it the
control plane is back when local autonomy does not run (the metrics heartbeat runs on its own, with its
own backoff). While it is down the agent asks only about every ``probe_every``, not in a tight loop."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from pathlib import Path

import httpx

from drods.members.works import WorkAgent
from tests.members.test_work_agent_reads import Member, manifests, work
from tests.members.waiting import wait_until


class Plane:
    """The control plane as the agent sees it: up (lists the Works, holds a watch open until it goes
    down, answers ``/readyz``) or down (every connection refused)."""

    def __init__(self) -> None:
        self.up = True
        self.works = [work("w0", "h0", manifests("app0"))]
        self.gone = asyncio.Event()
        self.calls_while_down = 0

    async def handle(self, request: httpx.Request) -> httpx.Response:
        if not self.up:
            self.calls_while_down += 1
            raise httpx.ConnectError("connection refused", request=request)
        if request.url.path == "/readyz":
            return httpx.Response(200, text="ok")
        if request.method == "PUT":  # a Work's status
            return httpx.Response(200, json={})
        if request.url.params.get("watch") == "true":
            return httpx.Response(200, content=self._held(self.gone))
        return httpx.Response(200, json={"metadata": {"resourceVersion": "1"}, "items": self.works})

    @staticmethod
    async def _held(gone: asyncio.Event) -> AsyncIterator[bytes]:
        await gone.wait()
        raise httpx.ReadError("connection reset by peer")
        yield b""  # pragma: no cover - a generator: the watch's stream

    def down(self) -> None:
        self.up = False
        self.gone.set()

    def back(self, *works: dict[str, object]) -> None:
        self.gone = asyncio.Event()
        self.works = [*self.works, *works]
        self.up = True


async def test_the_agent_follows_its_works_within_moments_of_the_control_planes_return(tmp_path: Path) -> None:
    plane = Plane()
    member = Member()
    http = httpx.AsyncClient(base_url="http://cp", transport=httpx.MockTransport(plane.handle))
    agent = WorkAgent("edge", member, http, tmp_path, usage_interval=3600.0,  # type: ignore[arg-type]
                      max_backoff=8.0)
    agent.probe_every = 0.2  # (set after: the defaults are what an agent runs with)
    stop = asyncio.Event()
    running = asyncio.create_task(agent.run(stop))
    try:
        await wait_until(lambda: ("Deployment", "default", "app0") in member.objects, 5.0, "w0 applied")

        plane.down()
        outage = 4.5  # the relists' backoff has grown past 2 s by now (1, 2, then 4 s without the probe)
        await asyncio.sleep(outage)  # the outage itself: nothing is waited for here
        assert not agent.authoritative  # it knows it is cut off
        # while down, it knocked about once per probe_every (jittered), not in a tight loop
        assert plane.calls_while_down <= outage / (agent.probe_every * 0.5) + 5, plane.calls_while_down

        back = time.monotonic()
        plane.back(work("w1", "h1", manifests("app1")))  # a workload propagated right after the return
        await wait_until(lambda: ("Deployment", "default", "app1") in member.objects, 1.0,
                         "the Work made after the return applied within 1 s")
        assert time.monotonic() - back < 1.0
        await wait_until(lambda: agent.authoritative, 1.0, "following the Works again")
    finally:
        stop.set()
        await asyncio.wait_for(running, 10)
        await http.aclose()
