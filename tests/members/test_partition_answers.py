"""A partitioned member stays NotReady until the partition heals (a real `drods sim`, a real client).

The walkthrough saw a hung member flip back to Ready within seconds, again and again: a reflector's
``resource()`` at each listing (the work-status controller's, every ``statusPollSeconds``) is served by the
cached discovery, heard nothing from the member, and was counted as its answer — and the health check
takes a recent answer for its probe. Nothing was ever failed over.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Iterator
from types import SimpleNamespace
from typing import Any

import pytest

from drods.controllers.health import ClusterHealth, _Health
from drods.controllers.settings import MemberSettings
from drods.members.client import MemberClient, MemberOptions, MemberUnavailable
from drods.sim.harness import SimProcess
from tests.sim.util import running_sims

pytestmark = pytest.mark.timeout(120)

OPTIONS = MemberOptions(connect_timeout=1.0, read_timeout=1.5, retries=0, failure_threshold=2, probe_interval=0.5)
PROBE, GRACE = 0.5, 2.0


@pytest.fixture(scope="module")
def sim(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SimProcess]:
    with running_sims(tmp_path_factory.mktemp("partition"), {"m-cut": ["--nodes", "1"]}) as s:
        yield s["m-cut"]


async def _until(what: str, deadline: float, fn: Any) -> None:
    while not fn():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        await asyncio.sleep(0.05)


async def test_a_partitioned_member_turns_not_ready_and_stays_so_until_it_heals(sim: SimProcess) -> None:
    client = MemberClient.from_kubeconfig("m-cut", sim.kubeconfig, options=OPTIONS)
    judged: list[tuple[float, str, str]] = []  # (when, Ready, message)

    class _Recorded(ClusterHealth):
        async def _write(self, name: str, obj: object, st: _Health, ready: str, reason: str, message: str,
                         now: float) -> None:
            judged.append((time.monotonic(), ready, message))

    async def get(_name: str) -> tuple[MemberClient, None]:
        return client, None

    obj = {"metadata": {"name": "m-cut"}, "spec": {}, "status": {}}
    fleet = SimpleNamespace(cluster=lambda _name: obj, clients=SimpleNamespace(get=get))
    health = _Recorded(fleet=fleet, settings=MemberSettings(  # type: ignore[arg-type]
        probeIntervalSeconds=PROBE, notReadyGraceSeconds=GRACE, summaryIntervalSeconds=3600), monitor=None)
    health.state["m-cut"] = _Health(first_seen=time.time(), summarised=time.time())

    async def probes() -> None:
        while True:
            started = time.monotonic()
            await health.check("m-cut")
            await asyncio.sleep(max(PROBE - (time.monotonic() - started), 0.05))

    async def reflector() -> None:
        """What the work-status controller's reflector does against a member whose watch broke: the kind's
        resource (cached discovery), then a listing, every ``statusPollSeconds``."""
        while True:
            with contextlib.suppress(Exception):
                res = await client.resource("apps/v1", "Deployment")
                await client.list_versioned(res)
            await asyncio.sleep(0.2)

    def ready() -> str | None:
        return judged[-1][1] if judged else None

    tasks: list[asyncio.Task[None]] = []
    try:
        await client.resource("apps/v1", "Deployment")  # discovery read while it answers
        tasks = [asyncio.create_task(probes()), asyncio.create_task(reflector())]
        await _until("Ready", time.monotonic() + 10, lambda: ready() == "True")
        sim.fault("partition")
        cut = time.monotonic()
        await _until("NotReady", cut + GRACE + PROBE + 2.0, lambda: ready() == "False")
        not_ready = len(judged) - 1
        # and it stays NotReady: no call that heard nothing (the cached discovery) passes for an answer
        hold = time.monotonic() + 2 * GRACE + 2 * PROBE
        await _until("two more grace periods", hold + 5, lambda: time.monotonic() >= hold or ready() != "False")
        assert [r for _t, r, _m in judged[not_ready:]] == ["False"] * len(judged[not_ready:]), judged[not_ready:]
        assert len(judged) - not_ready >= 3, "checks went on meanwhile"
        assert client.state.last_success is None or client.state.last_success < time.time() - 2 * GRACE
        with pytest.raises(MemberUnavailable):
            await client.version()
    finally:
        sim.fault("up")
    try:
        healed = time.monotonic()
        await _until("Ready again", healed + GRACE + 5, lambda: ready() == "True")
    finally:
        for t in tasks:
            t.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        await client.close()


async def test_a_watch_held_by_a_partition_is_no_answer(sim: SimProcess) -> None:
    """A watch opened before the partition hears nothing more: its stream held open is not the member
    answering, and its end by the read timeout is a failure."""
    client = MemberClient.from_kubeconfig("m-cut", sim.kubeconfig, options=OPTIONS)
    try:
        _pods, rv = await client.list_pods_versioned()
        watch = asyncio.create_task(client.watch_pods(rv, 1.0, lambda _t, _o: None))
        await asyncio.sleep(0.3)  # its headers arrived: the stream is open
        sim.fault("partition")
        cut = time.time()
        try:
            with pytest.raises(MemberUnavailable, match="Timeout"):
                await asyncio.wait_for(watch, 10)
            assert client.state.last_success is not None and client.state.last_success < cut
        finally:
            sim.fault("up")
    finally:
        await client.close()
