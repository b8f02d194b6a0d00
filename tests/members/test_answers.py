"""What counts as a member's answer (`MemberClient._call`): only bytes of a response that arrived.

A partitioned member flipped back to Ready while it answered nobody: calls that heard nothing from it —
served from the cached discovery (a reflector's ``resource()`` at each listing), or refused here before
anything was sent — were counted as answers, refreshed ``last_success``, and the health check took that
for its probe. No network here: fake calls say what they heard, as `MemberClient._request` does.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Callable

import pytest
import urllib3
from kubernetes.client.exceptions import ApiException

from drods.members.client import MemberClient, MemberError, MemberOptions, MemberUnavailable
from drods.members.discovery import KindNotServed

OPTIONS = MemberOptions(retries=0, failure_threshold=2, probe_interval=0.0)


@pytest.fixture
async def client() -> AsyncIterator[MemberClient]:
    c = MemberClient("m1", lambda _cfg: None, OPTIONS)
    yield c
    await c.close()


def _raises(exc: BaseException, *, heard: MemberClient | None = None) -> Callable[[], None]:
    def fn() -> None:
        if heard is not None:
            heard._heard()  # the member's status line and headers arrived
        raise exc
    return fn


def _no_route() -> None:
    raise KindNotServed("example.io/v1 Widget")


# what the calls raise that never heard the member: a kind the cached discovery does not know, a bad
# document refused here, a local bug — none of them an answer
HEARD_NOTHING: list[BaseException] = [ValueError("manifest needs metadata.name"), KeyError("metadata"),
                                      TypeError("bad"), ApiException(status=404, reason="Not Found")]
# what a hung, cut or refused connection raises: failures
UNREACHABLE: list[BaseException] = [
    urllib3.exceptions.ReadTimeoutError(None, "/version", "Read timed out."),  # type: ignore[arg-type]
    urllib3.exceptions.ConnectTimeoutError("connect timed out"),
    urllib3.exceptions.ProtocolError("Connection aborted.", ConnectionResetError(104, "reset")),
    urllib3.exceptions.NewConnectionError(None, "Connection refused"),  # type: ignore[arg-type]
    urllib3.exceptions.IncompleteRead(10, 100),
    urllib3.exceptions.MaxRetryError(None, "/version", None),  # type: ignore[arg-type]
    ConnectionResetError(104, "Connection reset by peer"), TimeoutError("timed out"),
    ApiException(status=0, reason="SSLError"), ApiException(status=503, reason="Service Unavailable"),
]


async def test_a_call_that_heard_nothing_is_no_answer(client: MemberClient) -> None:
    assert await client._call(lambda: "from the cache") == "from the cache"
    assert client.state.last_success is None and client.state.condition == "Unknown"


@pytest.mark.parametrize("exc", HEARD_NOTHING, ids=lambda e: type(e).__name__)
async def test_an_error_raised_before_anything_was_heard_is_no_answer(client: MemberClient,
                                                                      exc: BaseException) -> None:
    with pytest.raises((type(exc), MemberError)):
        await client._call(_raises(exc))
    assert client.state.last_success is None and client.state.consecutive_failures == 0


async def test_a_kind_the_cached_discovery_does_not_know_is_no_answer(client: MemberClient) -> None:
    with pytest.raises(MemberError, match="does not serve"):
        await client._call(client._translate_missing_kind(_no_route))  # type: ignore[arg-type]
    assert client.state.last_success is None


@pytest.mark.parametrize("exc", UNREACHABLE, ids=lambda e: f"{type(e).__name__}-{getattr(e, 'status', '')}")
async def test_a_hung_cut_or_refused_call_is_a_failure(client: MemberClient, exc: BaseException) -> None:
    with pytest.raises(MemberUnavailable):
        await client._call(_raises(exc))
    assert client.state.last_success is None and client.state.consecutive_failures == 1


async def test_a_refusal_the_member_sent_is_an_answer(client: MemberClient) -> None:
    before = time.time()
    with pytest.raises(MemberError) as e:
        await client._call(_raises(ApiException(status=422, reason="Invalid"), heard=client))
    assert e.value.status == 422
    assert client.state.ready and (client.state.last_success or 0) >= before


async def test_an_unreachable_member_is_not_made_ready_by_calls_that_heard_nothing(client: MemberClient) -> None:
    """The walkthrough's flip: NotReady (a partition's timeouts), then a reflector's ``resource()`` from
    the cached discovery, or a document refused here, turned it Ready — and the next health check took
    that "answer" for its probe."""
    hang = urllib3.exceptions.ReadTimeoutError(None, "/version", "Read timed out.")  # type: ignore[arg-type]
    for _ in range(OPTIONS.failure_threshold):
        with pytest.raises(MemberUnavailable):
            await client._call(_raises(hang))
    assert client.state.condition == "NotReady"
    assert await client._call(lambda: "cached") == "cached"
    for exc in HEARD_NOTHING:
        with pytest.raises((type(exc), MemberError)):
            await client._call(_raises(exc))
    with pytest.raises(MemberError):
        await client._call(client._translate_missing_kind(_no_route))  # type: ignore[arg-type]
    assert client.state.condition == "NotReady" and client.state.last_success is None
    assert client.state.consecutive_failures == OPTIONS.failure_threshold


async def test_an_answer_counts_when_it_arrived(client: MemberClient) -> None:
    """A request's answer counts when read to its end (now); a watch's when its last bytes arrived —
    a stream held open long after its last line is no answer for that time."""
    def request() -> str:
        client._heard()
        time.sleep(0.2)  # its body read
        return "ok"

    before = time.time()
    await client._call(request)
    assert (client.state.last_success or 0) >= before + 0.2

    heard_at: list[float] = []

    def stream() -> str:
        heard_at.append(time.time())
        client._heard(stream=True)
        heard_at.append(time.time())
        time.sleep(0.3)  # then nothing more, until the stream ends here (cut: no end heard)
        return "rv"

    await client._call(stream)
    assert heard_at[0] <= (client.state.last_success or 0) <= heard_at[1]
    assert (client.state.last_success or 0) < time.time() - 0.25


async def test_last_success_never_moves_back(client: MemberClient) -> None:
    started = asyncio.Event()

    def stream() -> str:
        client._heard(stream=True)  # heard first, ends last
        asyncio.run_coroutine_threadsafe(_set(started), loop)
        time.sleep(0.3)
        return "rv"

    async def _set(e: asyncio.Event) -> None:
        e.set()

    def request() -> str:
        client._heard()
        return "ok"

    loop = asyncio.get_running_loop()
    watch = asyncio.create_task(client._call(stream, paced=False))
    await asyncio.wait_for(started.wait(), 5)
    await client._call(request)
    newest = client.state.last_success
    await watch
    assert client.state.last_success == newest
