"""Embedded store: one SQLite file in WAL mode, shaped like etcd.

Why it looks the way it does:

* Durability: ``synchronous=FULL`` in WAL mode fsyncs the log on every commit, so a write whose
  ``put()`` has returned survives a SIGKILL or power cut.
* Throughput despite one fsync per commit: a single writer thread drains a queue of pending
  writes and commits them together (group commit). Each op is still evaluated in order and takes
  its own revision, so CAS semantics are those of a serial store.
* History: every change is appended to ``log`` (with the previous value) so ``watch`` can replay
  from any revision not yet compacted, in this process or another one sharing the file.
* A value of ``COMPRESS_MIN`` bytes or more is stored LZ4-compressed (``codec`` 2) when that saves
  at least an eighth: it is written twice (current table and log) and again as the next write's
  previous value, and a 16 KB document spills into overflow pages. A JSON document shrinks ~5x; the
  334 ServiceRoutes one saturated cluster rewrites commit in ~45 ms instead of ~120 ms raw (~65 ms
  with zlib, which shrinks them ~7x but packs and unpacks them five times slower: the writer
  thread is what a large publication waits for). The previous value moves to the log in its stored
  form, without being decompressed. Values a previous version stored with zlib (``codec`` 1) still
  read. A write reads its key's row once: a guarded key's row serves its compare and, for a Put, its
  previous value.
* The event loop does not wait on the disk: writes go to the writer thread, ranges to a small
  thread pool with one connection per thread. A point read (``get``: one row by its primary key,
  from the page cache, and in WAL mode a reader never waits for the writer) runs on the calling
  thread's own connection: handing it to a thread cost five times the read itself (~100 µs of CPU
  against ~18 µs), several times per propagated copy. Nothing is bound to an event loop, so one
  store can serve several loops over its lifetime (futures are resolved on the loop that awaits them).
* Leases are expired by the writer thread (it already owns the write connection and runs no
  matter which loop is alive); expiry deletes the attached keys with ordinary DELETE events.
* Watches get an in-process push after each commit. Writes made by another process on the same
  file (e.g. a separate scheduler) are noticed by the writer thread, which checks the revision
  every ``NOTICE`` (10 ms) while they keep committing and every ``tick`` (100 ms by default) once
  they have been quiet for ``QUIET``, reads the new log entries once and delivers them to every
  watch as it does its own commits. A store that others seldom write (a simulated member's, which
  only ``drods token revoke`` shares) takes a longer ``tick``: a hundred of them in one process woke
  a thousand times a second with nothing to find.
* A write the disk refuses (full, read-only, an I/O error) is `WriteFailed` naming the file and the
  cause, and is remembered (`write_failure`, which ``/readyz`` reports) until the writer's probe — two
  pages written and removed in one transaction, every ``PROBE_EVERY`` while writes fail and at once
  after a write that went through — commits: a small update that fit in place proves no room, and the
  server is ready again within a second of space being freed.
"""

from __future__ import annotations

import asyncio
import bisect
import collections
import contextlib
import errno
import functools
import os
import queue
import secrets
import shutil
import sqlite3
import threading
import time
import zlib
from collections.abc import AsyncIterator, Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, TypeVar

import cramjam

from drods.store.base import (
    CasFailed,
    Compacted,
    Compare,
    Delete,
    EventType,
    Get,
    KeyValue,
    Lease,
    LeaseNotFound,
    Put,
    Store,
    StoreError,
    TxnOp,
    TxnResult,
    WatchEvent,
    WriteFailed,
    compare_holds,
)

T = TypeVar("T")

TICK = 0.1  # seconds between the writer's lease-expiry sweeps and, while quiet, checks for other processes' commits
NOTICE = 0.01  # seconds between those checks while other processes are committing
QUIET = 1.0  # seconds without another process's commit before the checks slow down to TICK again
MAX_BATCH = 512  # writes per group commit
REPLAY_WINDOW = 5000  # revisions fetched per history query
MAX_PENDING_BATCHES = 1024  # in-memory backlog per watcher before it falls back to reading the log
BUSY_TIMEOUT_MS = 30_000
COMPRESS_MIN = 2048  # bytes; smaller values are stored as they are
_RAW, _ZLIB, _LZ4 = 0, 1, 2  # codecs of a stored value (an LZ4 block carries its size)
_UNREAD = object()  # a row not read yet
PROBE_EVERY = 1.0  # seconds between the writer's probe writes while the disk refuses writes
PROBE_BYTES = 8192  # a probe's write: more than a page, so it needs pages the file may not have room for
# what says the disk, not the write, is at fault (primary result codes; errnos of an OSError)
_UNWRITABLE_CODES = frozenset({sqlite3.SQLITE_FULL, sqlite3.SQLITE_IOERR, sqlite3.SQLITE_READONLY,
                               sqlite3.SQLITE_CANTOPEN})
_UNWRITABLE_ERRNOS = frozenset({errno.ENOSPC, errno.EROFS, errno.EIO, errno.EDQUOT})
_UNCAPPED_PAGES = 1073741823  # SQLite's default max_page_count (older builds; newer ones allow more)

_SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (name TEXT PRIMARY KEY, value INTEGER NOT NULL);
INSERT OR IGNORE INTO meta (name, value) VALUES ('rev', 1), ('compact', 0);
CREATE TABLE IF NOT EXISTS kv (
    key BLOB PRIMARY KEY,
    value BLOB NOT NULL,
    create_rev INTEGER NOT NULL,
    mod_rev INTEGER NOT NULL,
    version INTEGER NOT NULL,
    lease INTEGER NOT NULL,
    codec INTEGER NOT NULL DEFAULT 0
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS kv_lease ON kv (lease) WHERE lease != 0;
CREATE TABLE IF NOT EXISTS log (
    id INTEGER PRIMARY KEY,
    rev INTEGER NOT NULL,
    type INTEGER NOT NULL,
    key BLOB NOT NULL,
    value BLOB NOT NULL,
    create_rev INTEGER NOT NULL,
    version INTEGER NOT NULL,
    lease INTEGER NOT NULL,
    prev_value BLOB,
    prev_create_rev INTEGER,
    prev_mod_rev INTEGER,
    prev_version INTEGER,
    prev_lease INTEGER,
    codec INTEGER NOT NULL DEFAULT 0,
    prev_codec INTEGER NOT NULL DEFAULT 0
);
CREATE INDEX IF NOT EXISTS log_rev ON log (rev);
CREATE TABLE IF NOT EXISTS leases (id INTEGER PRIMARY KEY, ttl INTEGER NOT NULL, expiry REAL NOT NULL);
CREATE INDEX IF NOT EXISTS leases_expiry ON leases (expiry);
"""

_PUT, _DELETE = 0, 1
_KV_COLS = "key, value, create_rev, mod_rev, version, lease, codec"
_LOG_COLS = (
    "rev, type, key, value, create_rev, version, lease,"
    " prev_value, prev_create_rev, prev_mod_rev, prev_version, prev_lease, codec, prev_codec"
)
_COLUMNS_ADDED = (  # columns a store file made by an older version lacks
    ("kv", "codec", "INTEGER NOT NULL DEFAULT 0"),
    ("log", "codec", "INTEGER NOT NULL DEFAULT 0"),
    ("log", "prev_codec", "INTEGER NOT NULL DEFAULT 0"),
)


def _pack(value: bytes) -> tuple[bytes, int]:
    """A value in the form it is stored, and its codec."""
    if len(value) >= COMPRESS_MIN:
        packed = bytes(cramjam.lz4.compress_block(value))
        if len(packed) <= len(value) - len(value) // 8:
            return packed, _LZ4
    return value, _RAW


def _unpack(stored: bytes, codec: int) -> bytes:
    if codec == _LZ4:
        return bytes(cramjam.lz4.decompress_block(stored))
    return zlib.decompress(stored) if codec == _ZLIB else stored


def _kb(key: str) -> bytes:
    return key.encode("utf-8", "surrogateescape")


def _ks(raw: bytes) -> str:
    return raw.decode("utf-8", "surrogateescape")


def _range_bounds(prefix: str) -> tuple[bytes, bytes | None]:
    """Byte bounds [start, end) of every key under ``prefix``; end None means unbounded."""
    start = _kb(prefix)
    end = bytearray(start)
    while end:
        if end[-1] < 0xFF:
            end[-1] += 1
            return start, bytes(end)
        end.pop()
    return start, None


def _row_kv(row: Sequence[Any], *, value: bool = True) -> KeyValue:
    """A kv row as a KeyValue; ``value=False`` leaves the value unread (b"")."""
    return KeyValue(_ks(row[0]), _unpack(row[1], row[6]) if value else b"", row[2], row[3], row[4], row[5])


def _log_event(row: Sequence[Any]) -> WatchEvent:
    rev, typ, kraw, value, create_rev, version, lease = row[:7]
    key = _ks(kraw)
    prev = None
    if row[9] is not None:
        prev = KeyValue(key, _unpack(row[7], row[13]), row[8], row[9], row[10], row[11])
    if typ == _PUT:
        return WatchEvent(EventType.PUT, KeyValue(key, _unpack(value, row[12]), create_rev, rev, version, lease), prev)
    return WatchEvent(EventType.DELETE, KeyValue(key, b"", 0, rev, 0, 0), prev)


def _connect(path: str, *, readonly: bool = False, cache_kib: int | None = None) -> sqlite3.Connection:
    conn = sqlite3.connect(
        path, isolation_level=None, check_same_thread=False, timeout=BUSY_TIMEOUT_MS / 1000
    )
    conn.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
    conn.execute("PRAGMA synchronous = FULL")
    if cache_kib is not None:
        conn.execute(f"PRAGMA cache_size = {-int(cache_kib)}")  # negative: KiB, not pages
    if readonly:
        conn.execute("PRAGMA query_only = 1")
    return conn


class _WriteTxn:
    """The writer's view of one open SQLite transaction (one group commit)."""

    def __init__(self, conn: sqlite3.Connection, now: float) -> None:
        self.conn = conn
        self.now = now
        self.base_rev = self.rev = conn.execute("SELECT value FROM meta WHERE name = 'rev'").fetchone()[0]
        self.compact_rev = conn.execute("SELECT value FROM meta WHERE name = 'compact'").fetchone()[0]
        self.events: list[WatchEvent] = []

    # -- reads inside the write transaction
    def load(self, key: str) -> KeyValue | None:
        row = self.stored_row(key)
        return _row_kv(row) if row else None

    def stored_row(self, key: str) -> Any:
        """The key's row as stored (value still packed), or None."""
        return self.conn.execute(f"SELECT {_KV_COLS} FROM kv WHERE key = ?", (_kb(key),)).fetchone()

    def range(self, key: str, prefix: bool, limit: int = 0) -> list[KeyValue]:
        if not prefix:
            kv = self.load(key)
            return [kv] if kv else []
        start, end = _range_bounds(key)
        sql = f"SELECT {_KV_COLS} FROM kv WHERE key >= ?"
        args: list[Any] = [start]
        if end is not None:
            sql += " AND key < ?"
            args.append(end)
        sql += " ORDER BY key"
        if limit > 0:
            sql += " LIMIT ?"
            args.append(limit)
        return [_row_kv(r) for r in self.conn.execute(sql, args)]

    def lease_alive(self, lease_id: int) -> bool:
        row = self.conn.execute("SELECT expiry FROM leases WHERE id = ?", (lease_id,)).fetchone()
        return row is not None and row[0] > self.now

    def check_leases(self, ops: Sequence[TxnOp]) -> None:
        for op in ops:
            if isinstance(op, Put) and op.lease and not self.lease_alive(op.lease):
                raise LeaseNotFound(f"lease {op.lease} not found")

    # -- writes; ``rev`` is the revision of the op in progress (self.rev + 1)
    def write_put(self, key: str, value: bytes, lease: int, rev: int, row: Any = _UNREAD) -> None:
        """``row``: the key's stored row if the caller has just read it (`stored_row`)."""
        row = self.stored_row(key) if row is _UNREAD else row
        prev = _row_kv(row) if row else None
        create = prev.create_revision if prev else rev
        version = prev.version + 1 if prev else 1
        kraw = _kb(key)
        stored, codec = _pack(value)
        self.conn.execute(
            f"INSERT OR REPLACE INTO kv ({_KV_COLS}) VALUES (?, ?, ?, ?, ?, ?, ?)",
            (kraw, stored, create, rev, version, lease, codec),
        )
        self._log(rev, _PUT, kraw, KeyValue(key, value, create, rev, version, lease), (stored, codec),
                  prev, (row[1], row[6]) if row else None)

    def write_delete(self, kvs: Sequence[KeyValue], rev: int) -> None:
        for kv in kvs:
            kraw = _kb(kv.key)
            self.conn.execute("DELETE FROM kv WHERE key = ?", (kraw,))
            self._log(rev, _DELETE, kraw, KeyValue(kv.key, b"", 0, rev, 0, 0), (b"", _RAW), kv, _pack(kv.value))

    def _log(self, rev: int, typ: int, kraw: bytes, kv: KeyValue, stored: tuple[bytes, int],
             prev: KeyValue | None, prev_stored: tuple[bytes, int] | None) -> None:
        """Append the change; ``stored`` and ``prev_stored`` are the values as stored, with their codec."""
        self.conn.execute(
            f"INSERT INTO log ({_LOG_COLS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (
                rev, typ, kraw, stored[0], kv.create_revision, kv.version, kv.lease,
                prev_stored[0] if prev_stored else None, prev.create_revision if prev else None,
                prev.mod_revision if prev else None, prev.version if prev else None,
                prev.lease if prev else None, stored[1], prev_stored[1] if prev_stored else _RAW,
            ),
        )
        self.events.append(WatchEvent(EventType.PUT if typ == _PUT else EventType.DELETE, kv, prev))

    def revoke(self, lease_id: int) -> bool:
        """Delete the lease and its keys (one revision if any key went); False if it was unknown."""
        if self.conn.execute("DELETE FROM leases WHERE id = ?", (lease_id,)).rowcount == 0:
            return False
        rows = self.conn.execute(f"SELECT {_KV_COLS} FROM kv WHERE lease = ? ORDER BY key", (lease_id,))
        kvs = [_row_kv(r) for r in rows]
        if kvs:
            self.write_delete(kvs, self.rev + 1)
            self.rev += 1
        return True

    def expire_leases(self) -> None:
        rows = self.conn.execute("SELECT id FROM leases WHERE expiry <= ?", (self.now,)).fetchall()
        for (lease_id,) in rows:
            self.revoke(lease_id)


@dataclass(slots=True)
class _Request:
    fn: Callable[[_WriteTxn], Any]
    loop: asyncio.AbstractEventLoop
    future: asyncio.Future[Any]


_Batch = tuple[int, int, list[WatchEvent]]  # (revision before, revision after, events)


@dataclass(eq=False)
class _Watcher:
    """Per-watch mailbox, fed from the writer thread via ``loop.call_soon_threadsafe``."""

    loop: asyncio.AbstractEventLoop
    prefix: str
    wake: asyncio.Event = field(default_factory=asyncio.Event)
    pending: collections.deque[_Batch] = field(default_factory=collections.deque)
    overflow: bool = False
    stale: bool = False  # another process wrote: re-read the log

    def nudge(self) -> None:
        self.stale = True
        self.wake.set()

    def deliver(self, batch: _Batch, keys: list[str]) -> None:
        """``keys``: the batch's event keys, sorted (shared by every watcher of the batch)."""
        base, last, events = batch
        prefix = self.prefix
        at = bisect.bisect_left(keys, prefix)
        if at == len(keys) or not keys[at].startswith(prefix):
            # Nothing for this watch: its revisions are noted as seen (merged with a quiet run just
            # before) without waking it — a process holds dozens of watches, and every commit woke
            # each of them to find nothing.
            tail = self.pending[-1] if self.pending else None
            if tail is not None and not tail[2] and tail[1] == base:
                self.pending[-1] = (tail[0], last, [])
                return
            batch = (base, last, [])
            if len(self.pending) < MAX_PENDING_BATCHES:
                self.pending.append(batch)
                return
        if len(self.pending) >= MAX_PENDING_BATCHES:
            self.pending.clear()
            self.overflow = True  # the consumer is slow: it will re-read the log instead
        else:
            self.pending.append(batch)
        self.wake.set()


def _resolve(items: list[tuple[asyncio.Future[Any], Any, BaseException | None]]) -> None:
    for fut, result, error in items:
        if fut.done():
            continue
        if error is not None:
            fut.set_exception(error)
        else:
            fut.set_result(result)


def _deliver_all(watchers: list[_Watcher], *, batch: _Batch) -> None:
    keys = sorted(ev.kv.key for ev in batch[2])
    for w in watchers:
        w.deliver(batch, keys)


def _nudge_all(watchers: list[_Watcher]) -> None:
    for w in watchers:
        w.nudge()


_STOP = object()


class SqliteStore(Store):
    """The embedded default backend (see the module docstring for the design)."""

    max_txn_ops = 100_000

    def __init__(self, path: str, *, tick: float = TICK, cache_kib: int | None = None) -> None:
        """``cache_kib`` bounds each connection's page cache (SQLite's default is 2 MiB a connection;
        a process holding a hundred small stores pays it on each of a store's connections, up to four)."""
        if path in ("", ":memory:") or path.startswith("file::memory:"):
            raise ValueError("SqliteStore needs a file path (its connections must share one database)")
        self.path = path
        self.tick = tick
        self.cache_kib = cache_kib
        conn = _connect(path)
        try:
            conn.execute("PRAGMA journal_mode = WAL")
            conn.executescript("BEGIN IMMEDIATE;" + _SCHEMA + "COMMIT;")
            _add_columns(conn)
            self._seen_rev = _read_rev(conn)  # highest revision observed: anchors watch-from-now
            self._writer_rev = self._seen_rev  # highest revision the writer thread knows is in the file
        finally:
            conn.close()
        self._lock = threading.Lock()
        self._queue: queue.SimpleQueue[Any] = queue.SimpleQueue()
        self._writer: threading.Thread | None = None
        self._readers: ThreadPoolExecutor | None = None
        self._reader_conns: list[sqlite3.Connection] = []
        self._local = threading.local()
        self._watchers: set[_Watcher] = set()
        self._closed = False
        self._write_failure: WriteFailed | None = None  # set and cleared by the writer thread

    # ------------------------------------------------------------------ plumbing

    def write_failure(self) -> WriteFailed | None:
        return self._write_failure

    def _check_open(self) -> None:
        if self._closed:
            raise StoreError("store is closed")

    def _start_writer(self) -> None:
        with self._lock:
            self._start_writer_locked()

    def _start_writer_locked(self) -> None:
        if self._closed:
            raise StoreError("store is closed")
        if self._writer is None:
            self._writer = threading.Thread(target=self._writer_main, name="drods-sqlite-writer", daemon=True)
            self._writer.start()

    async def _write(self, fn: Callable[[_WriteTxn], T]) -> T:
        loop = asyncio.get_running_loop()
        fut: asyncio.Future[T] = loop.create_future()
        with self._lock:  # so nothing is queued behind the writer's stop marker
            self._start_writer_locked()
            self._queue.put(_Request(fn, loop, fut))
        return await fut

    def _reader_conn(self) -> sqlite3.Connection:
        conn: sqlite3.Connection | None = getattr(self._local, "conn", None)
        if conn is None:
            conn = _connect(self.path, readonly=True, cache_kib=self.cache_kib)
            self._local.conn = conn
            with self._lock:
                self._reader_conns.append(conn)
        return conn

    async def _read(self, fn: Callable[[sqlite3.Connection], T]) -> T:
        self._check_open()
        if self._readers is None:
            self._start_writer()  # lease expiry must run even in a read-only process
            with self._lock:
                if self._readers is None:
                    self._readers = ThreadPoolExecutor(max_workers=2, thread_name_prefix="drods-sqlite-read")
        readers = self._readers
        return await asyncio.get_running_loop().run_in_executor(readers, lambda: fn(self._reader_conn()))

    def _saw(self, rev: int) -> int:
        if rev > self._seen_rev:
            self._seen_rev = rev
        return rev

    # ------------------------------------------------------------------ writer thread

    def _writer_main(self) -> None:
        conn = _connect(self.path, cache_kib=self.cache_kib)
        next_sweep = next_notice = last_foreign = next_probe = 0.0
        stopping = False
        try:
            while not stopping:
                batch: list[_Request] = []
                try:
                    item = self._queue.get(timeout=max(0.0, min(next_sweep, next_notice) - time.monotonic()))
                except queue.Empty:
                    item = None
                while item is not None:
                    if item is _STOP:
                        stopping = True
                        break
                    batch.append(item)
                    if len(batch) >= MAX_BATCH:
                        break
                    try:
                        item = self._queue.get_nowait()
                    except queue.Empty:
                        item = None
                now = time.monotonic()
                if now >= next_notice:
                    if self._notice_other_writers(conn):
                        last_foreign = now
                    # each wake costs ~0.1 ms of CPU: checks are frequent only while others write
                    next_notice = now + (NOTICE if now - last_foreign < QUIET else self.tick)
                if self._write_failure is not None and not batch and now >= next_probe:
                    next_probe = now + PROBE_EVERY
                    self._probe(conn)
                sweep = now >= next_sweep
                if sweep:
                    next_sweep = now + self.tick
                    if not batch and not self._leases_due(conn):
                        continue
                if batch or sweep:
                    try:
                        self._commit(conn, batch, sweep)
                    except Exception as exc:  # never let the writer die: callers would hang
                        error = self._failed(exc, conn) or StoreError(f"sqlite writer: {exc!r}")
                        self._settle([(req, None, error) for req in batch])
        finally:
            conn.close()
            leftovers: list[tuple[_Request, Any, BaseException | None]] = []
            with contextlib.suppress(queue.Empty):
                while True:
                    item = self._queue.get_nowait()
                    if isinstance(item, _Request):
                        leftovers.append((item, None, StoreError("store is closed")))
            self._settle(leftovers)

    def _failed(self, exc: BaseException, conn: sqlite3.Connection) -> WriteFailed | None:
        """``exc`` as `WriteFailed` when the disk refused the write, remembered for readiness."""
        failed = write_failure_of(exc, self.path, conn)
        if failed is not None:
            self._write_failure = failed
        return failed

    def _probe(self, conn: sqlite3.Connection) -> None:
        """Whether the disk takes writes again while they fail: ``PROBE_BYTES`` written to a table of
        its own and removed in one transaction (no revision, no event), that needs fresh pages as a
        write does. Its commit clears `write_failure`."""
        try:
            conn.execute("BEGIN IMMEDIATE")
            conn.execute("CREATE TABLE IF NOT EXISTS write_probe (id INTEGER PRIMARY KEY, pad BLOB NOT NULL)")
            conn.execute("INSERT INTO write_probe (pad) VALUES (zeroblob(?))", (PROBE_BYTES,))
            conn.execute("DELETE FROM write_probe")
            conn.execute("COMMIT")
        except sqlite3.Error as exc:
            with contextlib.suppress(sqlite3.Error):
                conn.execute("ROLLBACK")
            self._failed(exc, conn)  # its cause may have changed (full, then read-only)
            return
        self._write_failure = None

    def _notice_other_writers(self, conn: sqlite3.Connection) -> bool:
        """Pass on to every watch what another process sharing the file has committed.

        One revision check per store and tick, not one per watch, and then one read of the new log
        entries for all of this process's watches, delivered as its own commits are: a process
        holds dozens of watches, and each re-reading the log after every foreign commit cost more
        than deciding what was committed. A gap wider than one log read, or entries compacted
        before they were read, wakes the watches to read the log themselves. True when another
        process had committed."""
        with self._lock:
            watchers = list(self._watchers)
        after = self._writer_rev
        try:
            rev = _read_rev(conn)
        except sqlite3.Error:
            return False
        if rev <= after:
            return False
        self._writer_rev = rev
        if not watchers:
            return True
        if rev > after + REPLAY_WINDOW:
            self._nudge()
            return True
        try:
            rev, compact_rev, events = _read_log(conn, after, b"", None, watched=_prefixes(watchers))
        except Exception:  # busy, or a value that does not unpack: each watch meets it in its own read
            self._nudge()
            return True
        self._writer_rev = max(self._writer_rev, rev)
        if rev > after + REPLAY_WINDOW or after + 1 < compact_rev:
            self._nudge()
        else:
            self._fan_out(watchers, functools.partial(_deliver_all, batch=(after, rev, events)))
        return True

    def _nudge(self) -> None:
        """Wake every watch to read the log itself."""
        with self._lock:
            watchers = list(self._watchers)
        self._fan_out(watchers, _nudge_all)

    def _foreign_before(self, conn: sqlite3.Connection, txn: _WriteTxn) -> tuple[list[_Watcher], _Batch] | None:
        """What other processes committed between this writer's last look and ``txn``, read inside it
        for the watches there are now: delivered to them just before ``txn``'s own events, it saves
        each a log read."""
        after = self._writer_rev
        if txn.base_rev <= after or txn.base_rev > after + REPLAY_WINDOW or after + 1 < txn.compact_rev:
            return None  # nothing new, or more than one read: the watches read the log themselves
        with self._lock:
            watchers = list(self._watchers)
        if not watchers:
            return None
        try:
            events = _log_between(conn, after, txn.base_rev, b"", None, watched=_prefixes(watchers))
        except Exception:  # never fail this process's writes over theirs: the watches read the log
            return None
        return watchers, (after, txn.base_rev, events)

    def _leases_due(self, conn: sqlite3.Connection) -> bool:
        try:
            row = conn.execute("SELECT 1 FROM leases WHERE expiry <= ? LIMIT 1", (time.time(),)).fetchone()
        except sqlite3.Error:
            return False
        return row is not None

    def _commit(self, conn: sqlite3.Connection, batch: list[_Request], sweep: bool) -> None:
        """Run ``batch`` in one transaction (one fsync).

        Each op runs inside its own savepoint, so a failing op (a CAS miss, or a bug) leaves no
        trace while the others still commit. If the commit itself fails, each op is retried alone.
        """
        outcomes: list[tuple[_Request, Any, BaseException | None]] = []
        refused = False  # the disk refused one of the ops (that SQLite undid alone)
        try:
            conn.execute("BEGIN IMMEDIATE")
            changes = conn.total_changes
            txn = _WriteTxn(conn, time.time())
            foreign = self._foreign_before(conn, txn)
            for req in batch:
                rev, compact_rev, n_events = txn.rev, txn.compact_rev, len(txn.events)
                conn.execute("SAVEPOINT op")
                try:
                    result = req.fn(txn)
                except Exception as exc:
                    if not conn.in_transaction:
                        raise  # SQLite rolled the whole transaction back (disk full, I/O error): its cause
                    conn.execute("ROLLBACK TO op")
                    conn.execute("RELEASE op")
                    txn.rev, txn.compact_rev = rev, compact_rev
                    del txn.events[n_events:]
                    failed = self._failed(exc, conn)
                    refused = refused or failed is not None
                    outcomes.append((req, None, failed or exc))
                else:
                    conn.execute("RELEASE op")
                    outcomes.append((req, result, None))
            if sweep:
                txn.expire_leases()
            if txn.rev != txn.base_rev:
                conn.execute("UPDATE meta SET value = ? WHERE name = 'rev'", (txn.rev,))
            conn.execute("COMMIT")
        except sqlite3.Error as exc:
            with contextlib.suppress(sqlite3.Error):
                conn.execute("ROLLBACK")
            failed = self._failed(exc, conn)  # all or nothing was written: nothing
            if len(batch) > 1:
                for req in batch:  # each alone: one that fits (or breaks nothing) is still made
                    self._commit(conn, [req], False)
            else:
                self._settle([(req, None, failed or StoreError(f"sqlite: {exc}")) for req in batch])
            return
        # a write went through while writes failed: room again, or only an update that fit in place?
        probe = self._write_failure is not None and conn.total_changes > changes and not refused
        if foreign is not None:
            self._fan_out(foreign[0], functools.partial(_deliver_all, batch=foreign[1]))
        elif txn.base_rev > self._writer_rev and not txn.events:
            self._nudge()  # others committed and no batch of ours will tell the watches
        self._writer_rev = max(self._writer_rev, txn.rev)
        if txn.events:
            self._publish((txn.base_rev, txn.rev, txn.events))
        self._saw(txn.rev)
        self._settle(outcomes)
        if probe:
            self._probe(conn)

    def _settle(self, outcomes: list[tuple[_Request, Any, BaseException | None]]) -> None:
        by_loop: dict[asyncio.AbstractEventLoop, list[tuple[asyncio.Future[Any], Any, BaseException | None]]]
        by_loop = {}
        for req, result, error in outcomes:
            by_loop.setdefault(req.loop, []).append((req.future, result, error))
        for loop, items in by_loop.items():
            with contextlib.suppress(RuntimeError):  # that loop is closed: nobody is waiting
                loop.call_soon_threadsafe(_resolve, items)

    def _publish(self, batch: _Batch) -> None:
        with self._lock:
            watchers = list(self._watchers)
        self._fan_out(watchers, functools.partial(_deliver_all, batch=batch))

    @staticmethod
    def _fan_out(watchers: list[_Watcher], call: Callable[[list[_Watcher]], None]) -> None:
        """Run ``call`` on each event loop's share of ``watchers``, in that loop's thread."""
        by_loop: dict[asyncio.AbstractEventLoop, list[_Watcher]] = {}
        for w in watchers:
            by_loop.setdefault(w.loop, []).append(w)
        for loop, ws in by_loop.items():
            with contextlib.suppress(RuntimeError):
                loop.call_soon_threadsafe(call, ws)

    # ------------------------------------------------------------------ reads

    async def get(self, key: str) -> KeyValue | None:
        self._check_open()
        if self._writer is None:
            self._start_writer()  # lease expiry must run even in a read-only process
        row = self._reader_conn().execute(f"SELECT {_KV_COLS} FROM kv WHERE key = ?", (_kb(key),)).fetchone()
        return _row_kv(row) if row else None

    async def range(self, prefix: str, *, limit: int = 0, after: str = "") -> tuple[list[KeyValue], int]:
        start, end = _range_bounds(prefix)
        sql = f"SELECT {_KV_COLS} FROM kv WHERE key >= ?"
        args: list[Any] = [start]
        if after and _kb(after) >= start:
            sql = f"SELECT {_KV_COLS} FROM kv WHERE key > ?"
            args = [_kb(after)]
        if end is not None:
            sql += " AND key < ?"
            args.append(end)
        sql += " ORDER BY key"
        if limit > 0:
            sql += " LIMIT ?"
            args.append(limit)

        def q(c: sqlite3.Connection) -> tuple[list[KeyValue], int]:
            c.execute("BEGIN")
            try:
                rev = c.execute("SELECT value FROM meta WHERE name = 'rev'").fetchone()[0]
                kvs = [_row_kv(r) for r in c.execute(sql, args)]
            finally:
                c.execute("COMMIT")
            return kvs, rev

        kvs, rev = await self._read(q)
        self._saw(rev)
        return kvs, rev

    async def current_revision(self) -> int:
        return self._saw(await self._read(_read_rev))

    # ------------------------------------------------------------------ writes

    async def put(
        self, key: str, value: bytes, *, expect_revision: int | None = None, lease: int = 0
    ) -> int:
        value = bytes(value)

        def op(t: _WriteTxn) -> int:
            row = t.stored_row(key)
            if expect_revision is not None and (row[3] if row else 0) != expect_revision:
                raise CasFailed(key, _row_kv(row) if row else None)
            if lease and not t.lease_alive(lease):
                raise LeaseNotFound(f"lease {lease} not found")
            t.rev += 1
            t.write_put(key, value, lease, t.rev, row)
            return t.rev

        return await self._write(op)

    async def delete(self, key: str, *, expect_revision: int | None = None) -> KeyValue | None:
        def op(t: _WriteTxn) -> KeyValue | None:
            cur = t.load(key)
            if expect_revision is not None and (cur.mod_revision if cur else 0) != expect_revision:
                raise CasFailed(key, cur)
            if cur is None:
                return None
            t.rev += 1
            t.write_delete([cur], t.rev)
            return cur

        return await self._write(op)

    async def delete_prefix(self, prefix: str) -> int:
        def op(t: _WriteTxn) -> int:
            kvs = t.range(prefix, True)
            if kvs:
                t.rev += 1
                t.write_delete(kvs, t.rev)
            return len(kvs)

        return await self._write(op)

    async def txn(
        self, compares: Sequence[Compare], success: Sequence[TxnOp], failure: Sequence[TxnOp] = ()
    ) -> TxnResult:
        compares, success, failure = list(compares), list(success), list(failure)
        for o in (*success, *failure):
            if not isinstance(o, Get | Put | Delete):
                raise ValueError(f"unknown txn op {o!r}")

        def op(t: _WriteTxn) -> TxnResult:
            # Each guarded key's row is read once, as stored; a Put of that key reuses it as its
            # previous value (a batch of guarded writes, e.g. a controller's, reads every key once).
            rows: dict[str, Any] = {c.key: t.stored_row(c.key) for c in compares}
            ok = all(compare_holds(c, _row_kv(rows[c.key], value=c.target == "value") if rows[c.key] else None)
                     for c in compares)
            ops = success if ok else failure
            t.check_leases(ops)
            rev = t.rev + 1
            wrote = False
            responses: list[object] = []
            for o in ops:
                if isinstance(o, Get):
                    responses.append(t.range(o.key, o.prefix))
                elif isinstance(o, Put):
                    t.write_put(o.key, bytes(o.value), o.lease, rev, rows.pop(o.key, _UNREAD))
                    wrote = True
                    responses.append(rev)
                elif isinstance(o, Delete):
                    rows.clear()  # what it deletes is no longer what was read
                    kvs = t.range(o.key, o.prefix)
                    if kvs:
                        t.write_delete(kvs, rev)
                        wrote = True
                    responses.append(kvs)
                else:
                    raise ValueError(f"unknown txn op {o!r}")
            if wrote:
                t.rev = rev
            return TxnResult(ok, t.rev, responses)

        result = await self._write(op)
        self._saw(result.revision)
        return result

    async def compact(self, revision: int) -> None:
        def op(t: _WriteTxn) -> None:
            if revision > t.rev:
                raise StoreError(f"cannot compact future revision {revision} (current {t.rev})")
            if revision <= t.compact_rev:
                return
            t.conn.execute("DELETE FROM log WHERE rev < ?", (revision,))
            t.conn.execute("UPDATE meta SET value = ? WHERE name = 'compact'", (revision,))
            t.compact_rev = revision

        await self._write(op)

    # ------------------------------------------------------------------ leases

    async def grant_lease(self, ttl: int) -> Lease:
        if ttl <= 0:
            raise ValueError("lease TTL must be positive")

        def op(t: _WriteTxn) -> Lease:
            while True:
                lease_id = secrets.randbits(62) or 1  # random so several processes never collide
                try:
                    t.conn.execute(
                        "INSERT INTO leases (id, ttl, expiry) VALUES (?, ?, ?)", (lease_id, ttl, t.now + ttl)
                    )
                except sqlite3.IntegrityError:
                    continue
                return Lease(lease_id, ttl)

        return await self._write(op)

    async def keep_alive(self, lease_id: int) -> int:
        def op(t: _WriteTxn) -> int | _DeferredError:
            row = t.conn.execute("SELECT ttl, expiry FROM leases WHERE id = ?", (lease_id,)).fetchone()
            if row is None:
                raise LeaseNotFound(f"lease {lease_id} not found")
            ttl, expiry = row
            if expiry <= t.now:
                t.revoke(lease_id)  # already dead: reap it now rather than at the next sweep
                return _DeferredError(LeaseNotFound(f"lease {lease_id} expired"))
            t.conn.execute("UPDATE leases SET expiry = ? WHERE id = ?", (t.now + ttl, lease_id))
            return int(ttl)

        result = await self._write(op)
        if isinstance(result, _DeferredError):
            raise result.error
        return result

    async def revoke_lease(self, lease_id: int) -> None:
        def op(t: _WriteTxn) -> None:
            t.revoke(lease_id)

        await self._write(op)

    # ------------------------------------------------------------------ watch

    def watch(self, prefix: str, *, start_revision: int | None = None) -> AsyncIterator[WatchEvent]:
        # "From now" is anchored at the call, not at the first iteration: anything this instance
        # writes after calling watch() is delivered even if iteration starts later.
        anchor = None if start_revision is not None else self._seen_rev + 1
        return self._watch(prefix, start_revision, anchor)

    async def _watch(
        self, prefix: str, start_revision: int | None, anchor: int | None
    ) -> AsyncIterator[WatchEvent]:
        self._check_open()
        self._start_writer()
        w = _Watcher(asyncio.get_running_loop(), prefix)
        with self._lock:
            self._watchers.add(w)
        try:
            if start_revision is not None:
                known, need_log, strict = start_revision - 1, True, True
            elif anchor is not None:
                known, need_log, strict = anchor - 1, True, False
            else:
                known, need_log, strict = self._saw(await self._read(_read_rev)), False, False
            start, end = _range_bounds(prefix)
            while not self._closed:
                if need_log:
                    need_log = False
                    read = functools.partial(_read_log, after=known, start=start, end=end)
                    top, compact_rev, events = await self._read(read)
                    if known + 1 < compact_rev:
                        if strict:
                            raise Compacted(compact_rev)
                        known = compact_rev - 1  # a from-now watch just starts at what is kept
                        need_log = True
                        continue
                    for ev in events:
                        yield ev
                    need_log = top > known + REPLAY_WINDOW
                    known = max(known, min(top, known + REPLAY_WINDOW))
                    self._saw(known)
                    strict = True  # established: from here on a gap must be reported, not skipped
                    continue
                if w.overflow:
                    w.overflow, need_log = False, True
                    w.pending.clear()
                    continue
                if w.pending:
                    base, last, events = w.pending.popleft()
                    if last <= known:
                        continue
                    if base > known:  # someone else (another process) wrote in between
                        w.pending.appendleft((base, last, events))
                        need_log = True
                        continue
                    for ev in events:
                        if ev.kv.mod_revision > known and ev.kv.key.startswith(prefix):
                            yield ev
                    known = last
                    continue
                if w.stale:
                    w.stale, need_log = False, True
                    continue
                w.wake.clear()
                await w.wake.wait()
        finally:
            with self._lock:
                self._watchers.discard(w)

    # ------------------------------------------------------------------ lifecycle

    async def close(self) -> None:
        if self._closed:
            return
        with self._lock:
            self._closed = True
            writer, readers, watchers = self._writer, self._readers, list(self._watchers)
            if writer is not None:
                self._queue.put(_STOP)
        if writer is not None:
            await asyncio.to_thread(writer.join)
        for w in watchers:
            with contextlib.suppress(RuntimeError):
                w.loop.call_soon_threadsafe(w.wake.set)
        if readers is not None:
            await asyncio.to_thread(readers.shutdown, True)
        with self._lock:
            conns, self._reader_conns = self._reader_conns, []
        for conn in conns:
            conn.close()


class _DeferredError:
    """An error raised after the writer has committed (so the reaping it did is kept)."""

    def __init__(self, error: StoreError) -> None:
        self.error = error


def _add_columns(conn: sqlite3.Connection) -> None:
    """Bring a store file made by an older version to today's columns (its values read as stored)."""
    for table, column, decl in _COLUMNS_ADDED:
        if column not in {r[1] for r in conn.execute(f"PRAGMA table_info({table})")}:
            with contextlib.suppress(sqlite3.OperationalError):  # another process added it first
                conn.execute(f"ALTER TABLE {table} ADD COLUMN {column} {decl}")


def write_failure_of(exc: BaseException, path: str, conn: sqlite3.Connection | None = None) -> WriteFailed | None:
    """``exc`` as the `WriteFailed` it is when the disk, not the write, is at fault (full, read-only, an
    I/O error; an ``OSError`` of ENOSPC, EROFS, EIO or EDQUOT too); None for any other failure."""
    if isinstance(exc, WriteFailed):
        return exc
    if isinstance(exc, OSError) and exc.errno in _UNWRITABLE_ERRNOS:
        return WriteFailed(path, f"{exc.strerror or exc} ({errno.errorcode.get(exc.errno or 0, exc.errno)})")
    code = getattr(exc, "sqlite_errorcode", None) if isinstance(exc, sqlite3.Error) else None
    if not isinstance(code, int) or code & 0xFF not in _UNWRITABLE_CODES:
        return None
    cause = f"{exc} ({getattr(exc, 'sqlite_errorname', None) or f'SQLite error {code}'})"
    if code & 0xFF == sqlite3.SQLITE_FULL:
        cause += f"; {_room(path, conn)}"
    return WriteFailed(path, cause)


def _room(path: str, conn: sqlite3.Connection | None) -> str:
    """What is full: the file's filesystem (its free bytes), and the file's own size cap when it has one."""
    where = os.path.dirname(os.path.abspath(path))
    try:
        free = shutil.disk_usage(where).free
    except OSError as e:
        said = f"free space of {where} unknown ({e.strerror or e})"
    else:
        said = f"{free} bytes free on the filesystem of {where}"
        if free < 1 << 20:
            said = f"no space left on device (ENOSPC): {said}"
    if conn is not None:
        with contextlib.suppress(sqlite3.Error):
            cap = int(conn.execute("PRAGMA max_page_count").fetchone()[0])
            if cap < _UNCAPPED_PAGES:
                held = int(conn.execute("PRAGMA page_count").fetchone()[0])
                said += f"; the file is capped at {cap} pages (PRAGMA max_page_count) and holds {held}"
    return said


def _read_rev(c: sqlite3.Connection) -> int:
    return int(c.execute("SELECT value FROM meta WHERE name = 'rev'").fetchone()[0])


def _read_log(
    c: sqlite3.Connection, after: int, start: bytes, end: bytes | None, *, watched: tuple[str, ...] | None = None
) -> tuple[int, int, list[WatchEvent]]:
    """Events under [start, end) with revision in (after, after + REPLAY_WINDOW], plus rev and compact;
    with ``watched``, only those under one of these prefixes."""
    c.execute("BEGIN")
    try:
        top = c.execute("SELECT value FROM meta WHERE name = 'rev'").fetchone()[0]
        compact_rev = c.execute("SELECT value FROM meta WHERE name = 'compact'").fetchone()[0]
        events = _log_between(c, after, min(top, after + REPLAY_WINDOW), start, end, watched=watched)
    finally:
        c.execute("COMMIT")
    return top, compact_rev, events


def _log_between(c: sqlite3.Connection, after: int, upto: int, start: bytes, end: bytes | None, *,
                 watched: tuple[str, ...] | None = None) -> list[WatchEvent]:
    """Events under [start, end) with revision in (after, upto], in a transaction the caller holds;
    with ``watched``, only those under one of these prefixes (the others' values are not unpacked)."""
    sql = f"SELECT {_LOG_COLS} FROM log WHERE rev > ? AND rev <= ? AND key >= ?"
    args: list[Any] = [after, upto, start]
    if end is not None:
        sql += " AND key < ?"
        args.append(end)
    rows = c.execute(sql + " ORDER BY id", args).fetchall()
    if watched is not None:
        rows = [r for r in rows if _ks(r[2]).startswith(watched)]
    return [_log_event(r) for r in rows]


def _prefixes(watchers: Sequence[_Watcher]) -> tuple[str, ...]:
    return tuple({w.prefix for w in watchers})
