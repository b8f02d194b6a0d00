"""Key-by-key controllers share the event loop fairly with the rest of the process."""

from __future__ import annotations

import asyncio
from collections.abc import Hashable

import pytest

from drods.machinery import metrics
from drods.machinery.controller import Controller
from drods.machinery.fence import WritesRefused
from tests.monitor_e2e.conftest import eventually


async def test_reconciles_that_never_suspend_still_let_other_tasks_run() -> None:
    """A queue of keys whose reconcile writes nothing must not hold the loop until it is drained:
    the process's lease keep-alives run on the same loop (a storm of 100,000 such keys lost every
    lease before each reconcile gave the loop a turn)."""
    keys = 5000
    done: list[Hashable] = []

    async def reconcile(key: Hashable) -> None:
        done.append(key)  # no await that suspends: the cache already says there is nothing to do

    controller = Controller("quiet", reconcile, workers=2)
    for i in range(keys):
        controller.queue.add(i)
    seen_at: list[int] = []

    task = asyncio.create_task(controller.run())
    try:
        for _ in range(4):  # the controller's task starts, then its workers; each turn of ours is one loop pass
            await asyncio.sleep(0)
            seen_at.append(len(done))
        assert seen_at[-1] > 0, "the workers never started"
        assert seen_at[-1] < keys // 10, f"the loop was held for {seen_at[-1]} reconciles"

        async def drained() -> bool:
            return len(done) == keys

        await eventually(drained, what="every key reconciled")
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)


async def test_a_controller_reports_its_queue_depth_and_each_key_s_wait() -> None:
    """``drods_workqueue_depth`` while it runs (gone when it stops) and
    ``drods_workqueue_queue_duration_seconds`` per key taken."""
    m = metrics.ReconcileMetrics()
    release = asyncio.Event()
    done: list[Hashable] = []

    async def reconcile(key: Hashable) -> None:
        await release.wait()
        done.append(key)

    controller = Controller("slow", reconcile, workers=1)
    for i in range(5):
        controller.queue.add(i)

    async def run() -> None:
        metrics.CURRENT.set(m)  # as the manager sets it for its runnables
        await controller.run()

    def depth() -> float | None:
        return m.registry.get_sample_value("drods_workqueue_depth", {"controller": "slow"})

    task = asyncio.create_task(run())
    try:
        async def one_taken() -> bool:
            return depth() == 4

        await eventually(one_taken, what="one key taken, four waiting")
        release.set()

        async def drained() -> bool:
            return len(done) == 5 and depth() == 0

        await eventually(drained, what="every key reconciled")
        assert m.registry.get_sample_value("drods_workqueue_queue_duration_seconds_count", {"controller": "slow"}) == 5
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
    assert depth() is None  # a stopped controller's queue is no longer reported


async def test_a_write_withheld_for_a_lapsed_lease_is_a_line_and_a_retry(caplog: pytest.LogCaptureFixture) -> None:
    """When this process's lease may have lapsed, every key's member write is withheld at once: each is
    retried, and said in one line — a traceback per key was most of a paused leader's CPU."""
    tries: list[Hashable] = []

    async def reconcile(key: Hashable) -> None:
        tries.append(key)
        if tries.count(key) == 1:
            raise WritesRefused(f"PATCH {key} not sent: this process's leadership may have lapsed")

    controller = Controller("execution-a", reconcile, workers=2)
    for key in ("w1", "w2"):
        controller.queue.add(key)
    task = asyncio.create_task(controller.run())
    try:
        async def retried() -> bool:
            return tries.count("w1") == 2 and tries.count("w2") == 2

        await eventually(retried, what="each key tried again")
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
    said = [r for r in caplog.records if "leadership may have lapsed" in r.getMessage()]
    assert len(said) == 2
    assert all(r.levelname == "WARNING" and r.exc_info is None and "retry in" in r.getMessage() for r in said)
