"""Periodic controllers: a pass per resync period and on a wake-up, failures logged and counted."""

from __future__ import annotations

import asyncio

import pytest

from drods.machinery import metrics
from drods.machinery.fence import Fence, LeadershipLost
from drods.machinery.periodic import Periodic
from drods.machinery.tasks import raise_ended
from tests.monitor_e2e.conftest import eventually


async def _true(value: bool) -> bool:
    return value


def sample(m: metrics.ReconcileMetrics, name: str, **labels: str) -> float:
    return m.registry.get_sample_value(name, labels) or 0.0


async def test_a_pass_each_period_and_at_once_when_woken_errors_counted_and_survived() -> None:
    runs: list[int] = []

    async def step() -> None:
        runs.append(len(runs))
        if len(runs) == 2:
            raise RuntimeError("second pass fails")

    wake = asyncio.Event()
    m = metrics.ReconcileMetrics()
    periodic = Periodic("probe", step, 3600.0, wake=wake, first_at_start=True)

    async def run() -> None:
        metrics.CURRENT.set(m)  # as the manager sets it for its runnables
        await periodic.run()

    task = asyncio.create_task(run())
    try:
        await eventually(lambda: _true(len(runs) == 1), what="the first pass at start")
        wake.set()
        await eventually(lambda: _true(len(runs) == 2), what="the pass on a wake-up")
        wake.set()
        await eventually(lambda: _true(len(runs) == 3), what="a pass after a failed one")
        assert periodic.passes == 3
        assert sample(m, "drods_controller_reconcile_total", controller="probe", result="success") == 2
        assert sample(m, "drods_controller_reconcile_total", controller="probe", result="error") == 1
        assert sample(m, "drods_controller_reconcile_errors_total", controller="probe") == 1
        assert sample(m, "drods_controller_reconcile_time_seconds_count", controller="probe") == 3
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)


async def test_without_a_wake_the_first_pass_waits_one_period() -> None:
    runs: list[float] = []

    async def step() -> None:
        runs.append(asyncio.get_running_loop().time())

    started = asyncio.get_running_loop().time()
    task = asyncio.create_task(Periodic("tick", step, 0.05).run())
    try:
        await eventually(lambda: _true(len(runs) >= 2), what="two passes")
        assert runs[0] - started >= 0.05
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)


async def test_restart_on_failure_counts_the_failed_pass_and_raises_it() -> None:
    async def step() -> None:
        raise RuntimeError("boom")

    m = metrics.ReconcileMetrics()
    periodic = Periodic("strict", step, 3600.0, first_at_start=True, restart_on_failure=True)

    async def run() -> None:
        metrics.CURRENT.set(m)
        await periodic.run()

    try:
        await asyncio.wait_for(run(), 5)
    except RuntimeError as e:
        assert str(e) == "boom"
    else:
        raise AssertionError("the failed pass did not end the runnable")
    assert periodic.passes == 1
    assert sample(m, "drods_controller_reconcile_errors_total", controller="strict") == 1


async def test_without_a_period_a_pass_only_when_woken_after_coalescing() -> None:
    runs: list[int] = []

    async def step() -> None:
        runs.append(len(runs))

    wake = asyncio.Event()
    task = asyncio.create_task(Periodic("changes", step, None, wake=wake, coalesce_s=0.01).run())
    try:
        await asyncio.sleep(0.05)
        assert runs == []
        wake.set()
        await eventually(lambda: _true(len(runs) == 1), what="the pass on a wake-up")
        await asyncio.sleep(0.05)
        assert runs == [0]
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)


async def test_a_custom_wait_replaces_period_and_wake() -> None:
    runs: list[int] = []
    gate = asyncio.Queue[None]()

    async def step() -> None:
        runs.append(len(runs))

    task = asyncio.create_task(Periodic("gated", step, None, wait=gate.get).run())
    try:
        await asyncio.sleep(0.02)
        assert runs == []
        gate.put_nowait(None)
        await eventually(lambda: _true(len(runs) == 1), what="a pass when the wait returns")
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)


async def test_a_pass_refused_for_lost_leadership_ends_the_loop_instead_of_repeating() -> None:
    """Per-cluster loops that could only fail again (and log a traceback each) end with the term."""
    runs: list[int] = []

    async def step() -> None:
        runs.append(len(runs))
        raise LeadershipLost(Fence("/leases/member-controllers", 7))

    with pytest.raises(LeadershipLost):
        await asyncio.wait_for(Periodic("probe", step, 0.01, first_at_start=True).run(), timeout=10)
    assert runs == [0]


async def test_a_group_owner_sees_the_exception_a_member_loop_ended_with() -> None:
    async def lost() -> None:
        raise LeadershipLost(Fence("/leases/x", 1))

    async def fine() -> None:
        return None

    ended_well = [asyncio.create_task(fine())]
    await asyncio.gather(*ended_well)
    raise_ended(ended_well)  # a loop that returned, or is still running, ends nothing
    running = asyncio.create_task(asyncio.sleep(3600))
    failed = asyncio.create_task(lost())
    await asyncio.gather(failed, return_exceptions=True)
    try:
        raise_ended([running])
        with pytest.raises(LeadershipLost):
            raise_ended([running, failed])
    finally:
        running.cancel()
        await asyncio.gather(running, return_exceptions=True)


async def test_a_paced_pass_waits_its_own_time_many_times_over() -> None:
    """A pass whose cost grows with the state (every Binding read) takes at most 1/pace of the
    process: a 0.1 s pass with pace 10 waits ~1 s for the next one, not its 0.01 s period."""
    runs: list[float] = []

    async def step() -> None:
        runs.append(asyncio.get_running_loop().time())
        await asyncio.sleep(0.1)

    task = asyncio.create_task(Periodic("paced", step, 0.01, first_at_start=True, pace=10.0).run())
    try:
        await eventually(lambda: _true(len(runs) >= 3), what="three passes")
        gaps = [b - a for a, b in zip(runs, runs[1:], strict=False)]
        assert all(g >= 0.1 + 0.9 for g in gaps), gaps  # the pass, then ten times its time
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
