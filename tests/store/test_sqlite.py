"""What only the embedded backend has to prove: acknowledged writes survive SIGKILL, and a
second process on the same file sees changes through watch."""

from __future__ import annotations

import asyncio
import os
import signal
import sys
import textwrap
from pathlib import Path

import pytest

from drods.store import Compacted, EventType, StoreError
from drods.store.sqlite import SqliteStore
from tests.store.util import take

REPO = Path(__file__).resolve().parents[2]

WRITER = textwrap.dedent(
    """
    import asyncio, sys
    from drods.store.sqlite import SqliteStore

    async def main(path, writers, count):
        store = SqliteStore(path)

        async def writer(w):
            for i in range(count):
                key = f"/dur/{w:02d}/{i:06d}"
                await store.put(key, key.encode(), expect_revision=0)
                sys.stdout.write(key + "\\n")  # acknowledged: put() returned
                sys.stdout.flush()

        await asyncio.gather(*(writer(w) for w in range(writers)))
        await store.close()

    asyncio.run(main(sys.argv[1], int(sys.argv[2]), int(sys.argv[3])))
    """
)


async def _spawn(*args: str) -> asyncio.subprocess.Process:
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")]))
    return await asyncio.create_subprocess_exec(
        sys.executable, "-c", WRITER, *args, stdout=asyncio.subprocess.PIPE, env=env
    )


async def test_acknowledged_writes_survive_sigkill(tmp_path: Path) -> None:
    path = str(tmp_path / "dur.db")
    SqliteStore(path)  # create the schema up front so the child starts writing at once
    proc = await _spawn(path, "8", "100000")
    assert proc.stdout is not None
    acked: list[str] = []
    try:
        async with asyncio.timeout(30):
            while len(acked) < 2000:
                line = await proc.stdout.readline()
                assert line, "writer exited early"
                acked.append(line.decode().strip())
    finally:
        proc.send_signal(signal.SIGKILL)  # mid-stream, with group commits in flight
    acked += [line.strip() for line in (await proc.stdout.read()).decode().splitlines() if line.strip()]
    await proc.wait()
    assert proc.returncode == -signal.SIGKILL

    store = SqliteStore(path)
    try:
        kvs, _ = await store.range("/dur/")
        present = {kv.key for kv in kvs}
        missing = [k for k in acked if k not in present]
        assert not missing, f"{len(missing)} acknowledged writes lost, e.g. {missing[:5]}"
        revs = sorted(kv.mod_revision for kv in kvs)
        assert len(set(revs)) == len(revs)  # one revision per write, none reused after the crash
        assert await store.current_revision() == revs[-1]
        assert await store.put("/dur/after", b"x") == revs[-1] + 1
    finally:
        await store.close()


async def test_watch_sees_writes_from_another_process(tmp_path: Path) -> None:
    path = str(tmp_path / "xproc.db")
    store = SqliteStore(path)
    try:
        it = store.watch("/dur/")
        proc = await _spawn(path, "2", "25")
        assert await proc.wait() == 0
        events = await take(it, 50)
        assert all(e.type is EventType.PUT for e in events)
        assert len({e.kv.key for e in events}) == 50
        revs = [e.kv.mod_revision for e in events]
        assert revs == sorted(revs)
        # ...and our own writes interleave with theirs on one revision counter.
        rev = await store.put("/dur/mine", b"x")
        assert rev == revs[-1] + 1
        assert (await take(it, 1))[0].kv.mod_revision == rev
        await it.aclose()  # type: ignore[attr-defined]
    finally:
        await store.close()


async def test_closed_store_refuses_work(tmp_path: Path) -> None:
    store = SqliteStore(str(tmp_path / "c.db"))
    it = store.watch("/")
    await store.put("/a", b"1")
    await take(it, 1)  # the watch is running
    waiter = asyncio.ensure_future(anext(it))
    await store.close()
    with pytest.raises(StopAsyncIteration):
        await asyncio.wait_for(waiter, 5)  # open watches end when the store closes
    with pytest.raises(StoreError):
        await store.put("/a", b"2")
    with pytest.raises(StoreError):
        await store.get("/a")
    reopened = SqliteStore(str(tmp_path / "c.db"))
    kv = await reopened.get("/a")
    assert kv is not None and kv.value == b"1"
    await reopened.close()


def test_rejects_in_memory_path() -> None:
    with pytest.raises(ValueError):
        SqliteStore(":memory:")


async def test_lagging_watch_reports_compaction(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A consumer so slow that its backlog spilled, then lost to compaction, gets Compacted."""
    import drods.store.sqlite as sqlite_backend

    monkeypatch.setattr(sqlite_backend, "MAX_PENDING_BATCHES", 2)
    store = SqliteStore(str(tmp_path / "lag.db"))
    try:
        it = store.watch("/lag/")
        await store.put("/lag/0", b"0")
        await take(it, 1)  # established
        for i in range(1, 6):
            rev = await store.put(f"/lag/{i}", b"x")  # one commit each: more batches than it keeps
        await store.compact(rev)
        with pytest.raises(Compacted):
            await take(it, 5)
    finally:
        await store.close()


async def test_opens_a_store_file_from_before_compression(tmp_path: Path) -> None:
    """A file whose tables lack the codec columns is brought up to date; its rows read as stored."""
    import sqlite3

    from drods.store.sqlite import _SCHEMA

    path = str(tmp_path / "old.db")
    old_schema = _SCHEMA.replace(",\n    codec INTEGER NOT NULL DEFAULT 0\n) WITHOUT ROWID;", "\n) WITHOUT ROWID;")
    old_schema = old_schema.replace(
        ",\n    codec INTEGER NOT NULL DEFAULT 0,\n    prev_codec INTEGER NOT NULL DEFAULT 0\n);", "\n);")
    assert "codec" not in old_schema
    big = b"x" * 10_000
    conn = sqlite3.connect(path, isolation_level=None)
    conn.executescript(old_schema)
    conn.execute("INSERT INTO kv VALUES (?, ?, 2, 2, 1, 0)", (b"/old/doc", big))
    conn.execute("INSERT INTO log (rev, type, key, value, create_rev, version, lease) VALUES (2, 0, ?, ?, 2, 1, 0)",
                 (b"/old/doc", big))
    conn.execute("UPDATE meta SET value = 2 WHERE name = 'rev'")
    conn.close()
    store = SqliteStore(path)
    try:
        kv = await store.get("/old/doc")
        assert kv is not None and kv.value == big
        rev = await store.put("/old/doc", big + b"y")
        events = await take(store.watch("/old/", start_revision=2), 2)
        assert [e.kv.value for e in events] == [big, big + b"y"]
        assert events[1].prev_kv is not None and events[1].prev_kv.value == big
        assert events[1].kv.mod_revision == rev
    finally:
        await store.close()


async def test_reads_values_an_earlier_version_stored_with_zlib(tmp_path: Path) -> None:
    """Rows packed with zlib (codec 1) read back, as current values, in the log and as previous values."""
    import sqlite3
    import zlib

    path = str(tmp_path / "zlib.db")
    await SqliteStore(path).close()  # creates the schema
    doc = b'{"routes": "' + b"abc" * 4000 + b'"}'
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("INSERT INTO kv VALUES (?, ?, 2, 2, 1, 0, 1)", (b"/z/doc", zlib.compress(doc)))
    conn.execute("INSERT INTO log (rev, type, key, value, create_rev, version, lease, codec) "
                 "VALUES (2, 0, ?, ?, 2, 1, 0, 1)", (b"/z/doc", zlib.compress(doc)))
    conn.execute("UPDATE meta SET value = 2 WHERE name = 'rev'")
    conn.close()
    store = SqliteStore(path)
    try:
        kv = await store.get("/z/doc")
        assert kv is not None and kv.value == doc
        assert [kv.value for kv in (await store.range("/z/"))[0]] == [doc]
        await store.put("/z/doc", doc + b" ")
        events = await take(store.watch("/z/", start_revision=2), 2)
        assert [e.kv.value for e in events] == [doc, doc + b" "]
        assert events[1].prev_kv is not None and events[1].prev_kv.value == doc
    finally:
        await store.close()
