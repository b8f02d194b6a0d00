"""Key-by-key controllers share the event loop fairly with the rest of the process."""

from __future__ import annotations

import asyncio
from collections.abc import Hashable

from drods.machinery.controller import Controller
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
