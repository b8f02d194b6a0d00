"""The event loop's lateness: a callback that holds the loop shows as lag of the timer behind it."""

from __future__ import annotations

import asyncio
import contextlib
import time

from prometheus_client import CollectorRegistry

from drods.machinery.looplag import LoopLag
from tests.monitor_e2e.conftest import eventually


async def test_a_callback_holding_the_loop_is_measured_as_lag() -> None:
    registry = CollectorRegistry()
    lag = LoopLag(registry, interval=0.01)
    task = asyncio.create_task(lag.run())

    def observed() -> tuple[float, float]:
        count = registry.get_sample_value("drods_event_loop_lag_seconds_count") or 0.0
        return count, registry.get_sample_value("drods_event_loop_lag_seconds_sum") or 0.0

    async def measured(n: float) -> bool | None:
        return True if observed()[0] >= n else None

    try:
        await eventually(lambda: measured(3), 5.0, "a few timers measured")
        before_count, before_sum = observed()
        time.sleep(0.2)  # noqa: ASYNC251 - the point: a callback that holds the loop; the timer due runs late
        await eventually(lambda: measured(before_count + 2), 5.0, "the timers after it")
        count, total = observed()
        assert total - before_sum >= 0.15
        slow = registry.get_sample_value("drods_event_loop_lag_seconds_bucket", {"le": "0.1"}) or 0.0
        assert slow < count  # the late one is above 0.1 s, the others below
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
