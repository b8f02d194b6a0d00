"""Read-modify-write under optimistic concurrency: the one retry policy of compare-and-swap writes.

A writer reads a value with its revision, computes the new value from it and writes with
``expect_revision``; when another writer won the race it reads again and re-applies its change.
Every such loop runs through :func:`read_modify_write`, so the attempt budget and the jitter
between attempts are set here once (a loop around a call that already retries would multiply
budgets: call it once instead). The policy is tenacity's.
"""

from __future__ import annotations

import asyncio
import json
import random
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

from tenacity import AsyncRetrying, retry_if_exception, stop_after_attempt, wait_random

from drods.errors import Conflict
from drods.model import jsondoc
from drods.store.base import CasFailed, Store

T = TypeVar("T")
Doc = dict[str, Any]

#: How many times one operation reads, re-applies its change and writes before it gives up: enough
#: for a write among a dozen racing ones and a status that changes every few milliseconds (the
#: Kubernetes API server's guaranteed update does not give up at all; ten lost a flat patch to
#: seven others and a heartbeat on a loaded machine).
ATTEMPTS = 30
#: The most a retry waits (uniformly at random from 0), so racing writers fall out of step.
MAX_JITTER_SECONDS = 0.01


def lost_race(exc: BaseException) -> bool:
    """A write refused because the value moved since it was read: worth reading again. A `Conflict`
    with another code (a rule of the current state, e.g. a migration in progress) is not."""
    return isinstance(exc, CasFailed) or (isinstance(exc, Conflict) and exc.code == Conflict.default_code)


async def read_modify_write(attempt: Callable[[int], Awaitable[T]], *, retry: bool = True,
                            exhausted: Callable[[], Conflict] | None = None) -> T:
    """``attempt(n)`` (``n`` from 0) reads, applies a pure change and writes with the revision it
    read, raising `CasFailed` or `Conflict` when it lost the race; it is called again until it
    wins, at most `ATTEMPTS` times (once without ``retry``: the caller named the revision).
    Exhausted: ``exhausted()`` if given, else the last `Conflict`, else a generic `Conflict`."""
    if not retry:
        return await attempt(0)
    # Most writes win at once: the retry policy is built only after a lost race. Built for every
    # write, its objects (which refer to each other) were most of what the collector had to find:
    # ~40,000 a young collection, a ~0.1 s pause every few seconds at 20 operations a second.
    try:
        return await attempt(0)
    except (CasFailed, Conflict) as e:
        if not lost_race(e):
            raise
    await asyncio.sleep(random.uniform(0, MAX_JITTER_SECONDS))
    policy = AsyncRetrying(stop=stop_after_attempt(ATTEMPTS - 1),
                           wait=wait_random(0, MAX_JITTER_SECONDS), retry=retry_if_exception(lost_race),
                           reraise=True)
    try:
        async for state in policy:
            with state:
                return await attempt(state.retry_state.attempt_number)
    except (CasFailed, Conflict) as e:
        if not lost_race(e):
            raise
        if exhausted is not None:
            raise exhausted() from e
        if isinstance(e, Conflict):
            raise
        raise Conflict(f"{e.key} changed under too many concurrent writers; retry") from e
    raise AssertionError("unreachable: the policy either returns or raises")


async def update_document(store: Store, key: str, mutate: Callable[[Doc | None], Doc | None], *,
                          exhausted: Callable[[], Conflict] | None = None) -> tuple[Doc, int] | None:
    """The JSON document at ``key`` replaced by ``mutate(what is stored)`` (None: nothing stored yet),
    under compare-and-swap, re-read and re-applied after a lost race. ``mutate`` returning None
    leaves the key as it is. Returns the document written and its revision (None when left)."""

    async def attempt(_: int) -> tuple[Doc, int] | None:
        kv = await store.get(key)
        doc = mutate(json.loads(kv.value) if kv is not None else None)
        if doc is None:
            return None
        rev = await store.put(key, jsondoc.dumps(doc), expect_revision=kv.mod_revision if kv is not None else 0)
        return doc, rev

    return await read_modify_write(attempt, exhausted=exhausted)
