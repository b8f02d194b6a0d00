"""An agent's state file: written whole, behind the event loop, the saves asked for during a write
going together in the next one."""

from __future__ import annotations

import asyncio
import os
import stat
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from drods.members.state_file import StateFile, StateSaver
from tests.members.waiting import wait_until


@dataclass(frozen=True)
class HeldFile(StateFile):
    """Writes wait until ``release`` is set (a slow disk); each write's bytes are recorded."""

    release: threading.Event = field(default_factory=threading.Event)
    writing: threading.Event = field(default_factory=threading.Event)
    written: list[bytes] = field(default_factory=list)

    def write(self, data: bytes) -> None:
        self.writing.set()
        assert self.release.wait(10), "the test never released the write"
        super().write(data)
        self.written.append(data)


async def test_saves_asked_for_during_a_write_go_together_in_the_next_and_the_loop_runs_meanwhile(
        tmp_path: Path) -> None:
    f = HeldFile(tmp_path / "state" / "works.json", "edge")
    doc: dict[str, Any] = {"works": {"n": 0}}
    saver = StateSaver(f, lambda: doc)
    saver.request()
    assert await asyncio.to_thread(f.writing.wait, 5), "the first write never started"
    for i in range(1, 6):  # while the first write is held: the loop is free, and these go in one write
        doc = {"works": {"n": i}}
        saver.request()
        await asyncio.sleep(0)
    f.release.set()
    await asyncio.wait_for(saver.flush(), 5)
    assert [StateFile(f.path, "edge").encode({"works": {"n": n}}) for n in (0, 5)] == f.written
    assert f.load() == {"works": {"n": 5}, "cluster": "edge"}
    assert stat.S_IMODE(os.stat(f.path).st_mode) == 0o600  # manifests may hold Secrets
    assert StateFile(f.path, "another").load() is None


async def test_a_failed_write_is_logged_and_the_next_save_writes(tmp_path: Path,
                                                                 caplog: pytest.LogCaptureFixture) -> None:
    blocker = tmp_path / "not-a-dir"
    blocker.write_text("")
    doc: dict[str, Any] = {"works": {}}
    saver = StateSaver(StateFile(blocker / "works.json", "edge"), lambda: doc)
    saver.request()
    await asyncio.wait_for(saver.flush(), 5)
    assert "saving" in caplog.text and not (blocker / "works.json").exists()
    blocker.unlink()
    saver.request()
    await asyncio.wait_for(saver.flush(), 5)
    assert StateFile(blocker / "works.json", "edge").load() == {"works": {}, "cluster": "edge"}


async def test_a_flush_cancelled_leaves_the_write_to_finish(tmp_path: Path) -> None:
    f = HeldFile(tmp_path / "works.json", "edge")
    saver = StateSaver(f, lambda: {"works": {"a": 1}})
    saver.request()
    waiter = asyncio.create_task(saver.flush())
    assert await asyncio.to_thread(f.writing.wait, 5)
    waiter.cancel()
    with pytest.raises(asyncio.CancelledError):
        await waiter
    f.release.set()
    await asyncio.wait_for(saver.flush(), 5)
    assert f.load() == {"works": {"a": 1}, "cluster": "edge"}


@dataclass(frozen=True)
class SteppedFile(StateFile):
    """Each write waits for one ``step`` release; ``started`` counts the writes begun."""

    step: threading.Semaphore = field(default_factory=lambda: threading.Semaphore(0))
    started: list[int] = field(default_factory=list)

    def write(self, data: bytes) -> None:
        self.started.append(1)
        assert self.step.acquire(timeout=10), "the test never let the write through"
        super().write(data)


async def test_a_flush_waits_for_the_document_as_it_was_not_for_the_saves_asked_after(tmp_path: Path) -> None:
    f = SteppedFile(tmp_path / "works.json", "edge")
    doc: dict[str, Any] = {"works": {"n": 1}}
    saver = StateSaver(f, lambda: doc)
    saver.request()
    await wait_until(lambda: len(f.started) == 1)
    doc = {"works": {"n": 2}}
    saver.request()
    flushed = asyncio.create_task(saver.flush())  # the document as it is now: n = 2
    f.step.release()
    await wait_until(lambda: len(f.started) == 2)  # the second write (n = 2) began
    doc = {"works": {"n": 3}}
    saver.request()  # a change after the flush was called: not waited for
    assert not flushed.done()
    f.step.release()
    await asyncio.wait_for(flushed, 5)
    assert f.load() == {"works": {"n": 2}, "cluster": "edge"}
    await wait_until(lambda: len(f.started) == 3)
    f.step.release()
    await asyncio.wait_for(saver.flush(), 5)
    assert f.load() == {"works": {"n": 3}, "cluster": "edge"}

