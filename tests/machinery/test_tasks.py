"""Stopping a group of per-item loops (what they ended with is read, not reported again at exit); bounded fan-out."""

from __future__ import annotations

import asyncio
import gc
import logging
from typing import Any

import pytest

from drods.machinery.fence import Fence, LeadershipLost
from drods.machinery.tasks import each_bounded, stop_tasks


async def test_a_loop_that_ended_on_a_lost_term_is_not_reported_never_retrieved(
        caplog: pytest.LogCaptureFixture) -> None:
    unretrieved: list[dict[str, Any]] = []
    asyncio.get_running_loop().set_exception_handler(lambda _loop, ctx: unretrieved.append(ctx))

    async def lost() -> None:
        raise LeadershipLost(Fence("/leases/member-controllers", 4))

    async def failed() -> None:
        raise RuntimeError("boom")

    ended = [asyncio.create_task(lost()), asyncio.create_task(failed()), asyncio.create_task(asyncio.sleep(60))]
    await asyncio.sleep(0)
    with caplog.at_level(logging.WARNING, logger="drods.machinery.tasks"):
        await stop_tasks(ended)
    del ended
    gc.collect()
    assert unretrieved == []
    assert "RuntimeError('boom')" in caplog.text and "leadership" not in caplog.text  # only the unexpected


async def test_each_bounded_stops_at_the_first_failure() -> None:
    started: list[int] = []

    async def act(i: int) -> None:
        started.append(i)
        await asyncio.sleep(0.001)
        if i == 3:
            raise ValueError("three")

    with pytest.raises(ValueError, match="three"):
        await each_bounded(range(1000), act, 4)
    assert len(started) < 20  # the workers stopped: the rest of the items were never started
