"""The one retry policy of compare-and-swap writes: re-read and re-apply after a lost race, a bounded
budget with bounded jitter, and a typed `Conflict` when it is spent."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from drods.errors import Conflict, NotFound
from drods.store import CasFailed, Store
from drods.store.cas import ATTEMPTS, MAX_JITTER_SECONDS, read_modify_write, update_document
from drods.store.sqlite import SqliteStore


@pytest.fixture
async def sqlite(tmp_path: Path) -> AsyncIterator[Store]:
    s = SqliteStore(str(tmp_path / "cas.db"))
    yield s
    await s.close()


@pytest.fixture
def sleeps(monkeypatch: pytest.MonkeyPatch) -> list[float]:
    """The waits between attempts, recorded instead of slept."""
    out: list[float] = []

    async def record(seconds: float) -> None:
        out.append(seconds)

    monkeypatch.setattr(asyncio, "sleep", record)
    return out


async def test_a_lost_race_is_tried_again_until_it_is_won(sleeps: list[float]) -> None:
    calls: list[int] = []

    async def attempt(n: int) -> str:
        calls.append(n)
        if n < 2:
            raise CasFailed("/k", None) if n == 0 else Conflict("moved")
        return "written"

    assert await read_modify_write(attempt) == "written"
    assert calls == [0, 1, 2] and len(sleeps) == 2


async def test_exhaustion_raises_a_typed_conflict(sleeps: list[float]) -> None:
    calls: list[int] = []

    async def stale(n: int) -> None:
        calls.append(n)
        raise CasFailed("/k", None)

    with pytest.raises(Conflict) as e:
        await read_modify_write(stale)
    assert len(calls) == ATTEMPTS and e.value.status == 409 and e.value.code == "CONFLICT"
    assert isinstance(e.value.__cause__, CasFailed)
    # the caller's own message when it names one; else the last conflict as it was
    with pytest.raises(Conflict, match="kept changing"):
        await read_modify_write(stale, exhausted=lambda: Conflict("the status kept changing"))
    last = Conflict("Binding 'b' was modified", {"currentResourceVersion": "7"})

    async def conflicting(_: int) -> None:
        raise last

    with pytest.raises(Conflict) as again:
        await read_modify_write(conflicting)
    assert again.value is last


async def test_other_refusals_and_a_named_revision_are_not_retried(sleeps: list[float]) -> None:
    calls: list[int] = []

    async def refused(n: int) -> None:
        calls.append(n)
        raise Conflict("a migration is in progress", code="MIGRATION_IN_PROGRESS")

    with pytest.raises(Conflict, match="migration"):
        await read_modify_write(refused)

    async def missing(n: int) -> None:
        calls.append(n)
        raise NotFound("gone")

    with pytest.raises(NotFound):
        await read_modify_write(missing)

    async def stale(n: int) -> None:
        calls.append(n)
        raise Conflict("stale resourceVersion")

    with pytest.raises(Conflict, match="stale"):
        await read_modify_write(stale, retry=False)
    assert calls == [0, 0, 0] and sleeps == []


async def test_the_jitter_between_attempts_is_bounded_and_varies(sleeps: list[float]) -> None:
    async def stale(_: int) -> None:
        raise CasFailed("/k", None)

    for _ in range(5):
        with pytest.raises(Conflict):
            await read_modify_write(stale)
    assert len(sleeps) == 5 * (ATTEMPTS - 1)
    assert all(0 <= s <= MAX_JITTER_SECONDS for s in sleeps) and len(set(sleeps)) > 1


async def test_the_mutation_is_applied_again_to_what_a_concurrent_writer_left(sqlite: Store) -> None:
    await sqlite.put("/doc", json.dumps({"n": 1, "by": []}).encode())
    seen: list[dict[str, Any] | None] = []

    def add(doc: dict[str, Any] | None) -> dict[str, Any]:
        seen.append(doc)
        assert doc is not None
        return {"n": doc["n"] + 1, "by": [*doc["by"], "me"]}

    original = sqlite.get

    async def racing_get(key: str) -> Any:
        kv = await original(key)
        if not seen:  # another writer wins between this read and the write
            await sqlite.put(key, json.dumps({"n": 10, "by": ["other"]}).encode())
        return kv

    sqlite.get = racing_get  # type: ignore[method-assign]
    written = await update_document(sqlite, "/doc", add)
    sqlite.get = original  # type: ignore[method-assign]
    assert written is not None and written[0] == {"n": 11, "by": ["other", "me"]}
    assert seen == [{"n": 1, "by": []}, {"n": 10, "by": ["other"]}]
    stored = await sqlite.get("/doc")
    assert stored is not None and json.loads(stored.value) == written[0] and stored.mod_revision == written[1]
    # nothing to change: the key is left as it is
    assert await update_document(sqlite, "/doc", lambda doc: None) is None
    assert (await sqlite.get("/doc")).mod_revision == written[1]  # type: ignore[union-attr]


async def test_a_write_that_wins_at_once_builds_no_retry_policy(monkeypatch: pytest.MonkeyPatch) -> None:
    """The policy's objects refer to each other: built for every write, they were most of the
    garbage the collector had to find under load."""
    import drods.store.cas as cas

    def refuse(*_: Any, **__: Any) -> None:
        raise AssertionError("a retry policy was built for a write that won at once")

    monkeypatch.setattr(cas, "AsyncRetrying", refuse)

    async def wins(n: int) -> int:
        return n

    assert await read_modify_write(wins) == 0
