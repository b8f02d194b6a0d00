"""A member's call window: halves when the member is slower than what it is sent, grows back as it answers."""

from __future__ import annotations

import asyncio
import contextlib

import urllib3
from kubernetes.client.exceptions import ApiException

from drods.members.client import MemberClient, MemberOptions, MemberUnavailable
from drods.members.pacing import CallWindow, overloaded


def test_timeouts_and_429_503_are_overload_a_refused_connection_is_not() -> None:
    assert overloaded(urllib3.exceptions.ReadTimeoutError(None, "/", "read timed out"))  # type: ignore[arg-type]
    assert overloaded(TimeoutError())
    assert overloaded(ApiException(status=429)) and overloaded(ApiException(status=503))
    assert not overloaded(ApiException(status=500)) and not overloaded(ApiException(status=404))
    assert not overloaded(ConnectionRefusedError())


def test_the_window_starts_at_two_calls_and_doubles_each_window_of_answers_up_to_the_ceiling() -> None:
    assert CallWindow(1).limit == 1.0
    w = CallWindow(8)
    assert w.limit == 2.0
    for _ in range(2):
        w.answered()
    assert w.limit == 4.0
    for _ in range(10):
        w.answered()
    assert w.limit == 8.0


def test_the_window_halves_on_overload_and_then_grows_one_per_window_of_answers() -> None:
    w = CallWindow(8)
    for _ in range(6):
        w.answered()
    assert w.limit == 8.0
    w.overloaded()
    assert w.limit == 4.0
    for _ in range(3):
        w.overloaded()
    assert w.limit == 1.0  # never below one call
    w.answered()
    assert w.limit == 2.0  # a window's worth of answers at one call: one more
    for _ in range(5):
        w.answered()
    assert 3.0 <= w.limit < 4.0  # 1/limit an answer: about one more a window
    for _ in range(100):
        w.answered()
    assert w.limit == 8.0  # never above the ceiling


async def test_no_more_calls_are_in_flight_than_the_window_allows() -> None:
    w = CallWindow(4)  # two calls to start with
    most = in_flight = 0
    release = asyncio.Event()

    async def call() -> None:
        nonlocal most, in_flight
        async with w:
            in_flight += 1
            most = max(most, in_flight)
            await release.wait()
            in_flight -= 1

    calls = [asyncio.create_task(call()) for _ in range(6)]
    for _ in range(10):
        await asyncio.sleep(0)
    assert (in_flight, w.in_flight) == (2, 2)
    release.set()
    await asyncio.wait_for(asyncio.gather(*calls), 5)
    assert most == 2 and w.in_flight == 0


async def test_a_member_timing_out_gets_fewer_calls_at_once_then_more_as_it_answers() -> None:
    client = MemberClient("slow", lambda cfg: None, MemberOptions(concurrency=8, retries=0, failure_threshold=100))
    try:
        def times_out() -> None:
            raise urllib3.exceptions.ReadTimeoutError(None, "/apis", "read timed out")  # type: ignore[arg-type]

        def answers() -> str:
            client._heard()  # the member's answer arrived (what a request does when its headers come)
            return "ok"

        for _ in range(6):
            assert await client._call(answers) == "ok"
        window = client._windows[asyncio.get_running_loop()]
        assert window.limit == 8.0
        for _ in range(2):
            with contextlib.suppress(MemberUnavailable):
                await client._call(times_out)
        assert window.limit == 2.0
        for _ in range(9):
            assert await client._call(answers) == "ok"
        assert 4.0 <= window.limit < 5.0
    finally:
        await client.close()
