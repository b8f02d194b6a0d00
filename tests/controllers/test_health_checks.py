"""The health controller's checks across a fleet: bounded in flight, none starved."""

from __future__ import annotations

import asyncio

import pytest
from pydantic import ValidationError

from drods.controllers.health import ClusterHealth
from drods.controllers.settings import MemberSettings


class _Held(ClusterHealth):
    """Checks that wait until released, counting how many are in flight."""

    def __init__(self, settings: MemberSettings, clusters: int) -> None:
        super().__init__(fleet=None, settings=settings, monitor=None)  # type: ignore[arg-type]
        self.clusters = clusters
        self.in_flight = 0
        self.most = 0
        self.checked: set[str] = set()
        self.release = asyncio.Event()
        self.started = asyncio.Event()  # set when as many checks as allowed are in flight
        self.all_checked = asyncio.Event()

    async def check(self, name: str) -> None:
        self.in_flight += 1
        self.most = max(self.most, self.in_flight)
        if self.in_flight == self.settings.probeConcurrency:
            self.started.set()
        try:
            await self.release.wait()
            self.checked.add(name)
            if len(self.checked) == self.clusters:
                self.all_checked.set()
        finally:
            self.in_flight -= 1


async def test_checks_in_flight_are_bounded_and_every_cluster_is_checked() -> None:
    health = _Held(MemberSettings(probeConcurrency=3, probeIntervalSeconds=60), clusters=10)
    loops = [asyncio.create_task(health._loop(f"c{i}")) for i in range(10)]
    try:
        await asyncio.wait_for(health.started.wait(), 5)
        for _ in range(20):  # every other loop gets its turn to try
            await asyncio.sleep(0)
        assert health.in_flight == 3 and health.most == 3, "more checks in flight than probeConcurrency"
        health.release.set()
        await asyncio.wait_for(health.all_checked.wait(), 5)
        assert health.most == 3
    finally:
        for t in loops:
            t.cancel()
        await asyncio.gather(*loops, return_exceptions=True)


def test_probe_concurrency_must_be_positive() -> None:
    with pytest.raises(ValidationError):
        MemberSettings(probeConcurrency=0)
