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
