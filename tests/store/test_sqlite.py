"""What only the embedded backend has to prove: acknowledged writes survive SIGKILL, and a
second process on the same file sees changes through watch."""

from __future__ import annotations

import asyncio
import os
import signal
import sqlite3
import sys
import textwrap
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

import drods.store.sqlite as backend
from drods.store import CasFailed, Compacted, EventType, StoreError, WatchEvent
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


async def _established(store: SqliteStore, *prefixes: str) -> list[AsyncIterator[WatchEvent]]:
    """Watches on ``prefixes``, each known to be running (it has seen a write of ``store``'s own)."""
    its = [store.watch(p) for p in prefixes]
    for p, it in zip(prefixes, its, strict=True):
        await store.put(p + "mark", b"m")
        assert (await take(it, 1))[0].kv.key == p + "mark"
    return its


async def test_another_writers_commits_reach_every_watch_through_one_log_read(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Commits another store made on the file (another process's, as far as this store can tell) are
    read from the log once, by the writer thread, and delivered to every watch with their previous
    values: no watch reads the log for them."""
    path = str(tmp_path / "foreign.db")
    ours, theirs = SqliteStore(path), SqliteStore(path)
    reads: list[bytes] = []
    read_log = backend._read_log

    def counted(c: Any, after: int, start: bytes, end: bytes | None, **kw: Any) -> Any:
        reads.append(start)
        return read_log(c, after, start, end, **kw)

    monkeypatch.setattr(backend, "_read_log", counted)
    decoded: list[str] = []
    log_event = backend._log_event

    def recorded(row: Any) -> WatchEvent:
        ev = log_event(row)
        decoded.append(ev.kv.key)
        return ev

    monkeypatch.setattr(backend, "_log_event", recorded)
    try:
        a, b, quiet = await _established(ours, "/a/", "/b/", "/c/")
        reads.clear()
        await theirs.put("/z/unwatched", b"z" * 4096)
        await theirs.put("/a/1", b"v1")
        await theirs.put("/a/1", b"v2")
        await theirs.put("/b/1", b"x")
        await theirs.delete("/b/1")
        on_a, on_b = await take(a, 2), await take(b, 2)
        assert [e.kv.value for e in on_a] == [b"v1", b"v2"]
        assert on_a[1].prev_kv is not None and on_a[1].prev_kv.value == b"v1"
        assert [e.type for e in on_b] == [EventType.PUT, EventType.DELETE]
        assert on_b[1].prev_kv is not None and on_b[1].prev_kv.value == b"x"
        assert [e.kv.mod_revision for e in on_a + on_b] == sorted(e.kv.mod_revision for e in on_a + on_b)
        rev = await ours.put("/c/end", b"e")
        assert [(e.kv.key, e.kv.mod_revision) for e in await take(quiet, 1)] == [("/c/end", rev)]
        assert reads and set(reads) == {b""}, reads  # the writer's reads of everything, none per watch
        assert "/z/unwatched" not in decoded  # read, but not unpacked: no watch wants it
    finally:
        await ours.close()
        await theirs.close()


async def test_a_gap_wider_than_one_log_read_is_read_by_each_watch(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """More foreign commits than one log read returns: each watch reads the log itself, in windows,
    and still sees every event in order."""
    monkeypatch.setattr(backend, "NOTICE", 3600.0)  # the test decides when the writer looks
    monkeypatch.setattr(backend, "TICK", 3600.0)
    path = str(tmp_path / "gap.db")
    ours, theirs = SqliteStore(path), SqliteStore(path)
    try:
        (a,) = await _established(ours, "/a/")
        for i in range(10):
            await theirs.put(f"/a/{i}", str(i).encode())
        monkeypatch.setattr(backend, "REPLAY_WINDOW", 3)
        conn = backend._connect(path)
        try:
            assert ours._notice_other_writers(conn)
        finally:
            conn.close()
        events = await take(a, 10)
        assert [e.kv.key for e in events] == [f"/a/{i}" for i in range(10)]
        assert [e.kv.mod_revision for e in events] == sorted(e.kv.mod_revision for e in events)
    finally:
        await ours.close()
        await theirs.close()


@pytest.mark.parametrize("window", [5000, 1])
async def test_a_write_of_ours_that_fails_after_another_writers_commit_still_passes_it_on(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, window: int) -> None:
    """The writer learns of another store's commits when its own transaction starts after them; a
    write of ours that changes nothing (a failed CAS) must not swallow them (window 1: more than one
    log read, so the watches read the log themselves)."""
    monkeypatch.setattr(backend, "NOTICE", 3600.0)  # only our own write can make the writer look
    monkeypatch.setattr(backend, "TICK", 3600.0)
    path = str(tmp_path / "cas.db")
    ours, theirs = SqliteStore(path), SqliteStore(path)
    try:
        (a,) = await _established(ours, "/a/")
        monkeypatch.setattr(backend, "REPLAY_WINDOW", window)
        await theirs.put("/a/x", b"1")
        await theirs.put("/a/y", b"2")
        with pytest.raises(CasFailed):
            await ours.put("/a/x", b"mine", expect_revision=1)
        assert [e.kv.key for e in await take(a, 2)] == ["/a/x", "/a/y"]
    finally:
        await ours.close()
        await theirs.close()


async def test_a_value_another_process_stored_that_does_not_unpack_fails_its_watch_not_our_writes(
        tmp_path: Path) -> None:
    path = str(tmp_path / "bad.db")
    ours = SqliteStore(path)
    try:
        (a,) = await _established(ours, "/a/")
        rev = await ours.current_revision() + 1
        conn = sqlite3.connect(path, isolation_level=None)
        conn.execute("BEGIN IMMEDIATE")
        conn.execute("INSERT INTO kv VALUES (?, ?, ?, ?, 1, 0, 2)", (b"/a/bad", b"not lz4", rev, rev))
        conn.execute("INSERT INTO log (rev, type, key, value, create_rev, version, lease, codec) "
                     "VALUES (?, 0, ?, ?, ?, 1, 0, 2)", (rev, b"/a/bad", b"not lz4", rev))
        conn.execute("UPDATE meta SET value = ? WHERE name = 'rev'", (rev,))
        conn.execute("COMMIT")
        conn.close()
        assert await asyncio.wait_for(ours.put("/b/mine", b"x"), 10) == rev + 1  # our write goes through
        with pytest.raises(Exception):  # noqa: B017 - whatever the codec raises, the watch reports it
            await take(a, 1)
    finally:
        await ours.close()


async def test_a_bounded_page_cache_holds_on_every_connection(tmp_path: Path) -> None:
    """A fleet of simulated members holds a hundred stores: each connection's page cache is bounded."""
    store = SqliteStore(str(tmp_path / "small.db"), cache_kib=64)
    default = SqliteStore(str(tmp_path / "default.db"))
    try:
        for s in (store, default):
            await s.put("/a", b"1")
            await s.get("/a")  # the calling thread's connection
            await s.range("/")  # a reader thread's
        assert store._reader_conns and default._reader_conns
        assert {c.execute("PRAGMA cache_size").fetchone()[0] for c in store._reader_conns} == {-64}
        assert await store._write(lambda txn: txn.conn.execute("PRAGMA cache_size").fetchone()[0]) == -64
        assert {c.execute("PRAGMA cache_size").fetchone()[0] for c in default._reader_conns} == {-2000}
    finally:
        await store.close()
        await default.close()
