"""The store contract: a small etcd-shaped interface that every backend implements.

Everything in DRO-DS (objects, status, leases for leader election) goes through this interface,
so the embedded SQLite default and etcd must be indistinguishable to callers. The conformance
suite in ``tests/store`` is the executable form of this contract.
"""

from __future__ import annotations

import abc
import enum
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass, field


class StoreError(Exception):
    """Base class of every store failure."""


class CasFailed(StoreError):
    """A compare-and-swap precondition did not hold; ``current`` is what the key holds now."""

    def __init__(self, key: str, current: KeyValue | None) -> None:
        super().__init__(f"revision mismatch on {key!r}")
        self.key = key
        self.current = current


class Compacted(StoreError):
    """A watch asked for history older than the last compaction."""

    def __init__(self, compact_revision: int) -> None:
        super().__init__(f"revision compacted up to {compact_revision}")
        self.compact_revision = compact_revision


class LeaseNotFound(StoreError):
    """The lease expired or was revoked."""


class Unavailable(StoreError):
    """The backend could not be reached within its deadline, or cannot write now (`WriteFailed`)."""


class WriteFailed(Unavailable):
    """The backend cannot write: its disk is full, read-only or failing (``path``: where; ``cause``: the
    OS's or SQLite's word). An `Unavailable`, so every caller that waits for the store to come back
    waits for space too; the API answers it 503 ``STORE_UNAVAILABLE`` naming both."""

    def __init__(self, path: str, cause: str) -> None:
        super().__init__(f"cannot write the store {path}: {cause}")
        self.path = path
        self.cause = cause


@dataclass(frozen=True, slots=True)
class KeyValue:
    key: str
    value: bytes
    create_revision: int
    mod_revision: int
    version: int
    lease: int = 0


class EventType(enum.Enum):
    PUT = "PUT"
    DELETE = "DELETE"


@dataclass(frozen=True, slots=True)
class WatchEvent:
    """One change. For DELETE, ``kv.value`` is empty and ``kv.mod_revision`` is the delete's revision."""

    type: EventType
    kv: KeyValue
    prev_kv: KeyValue | None = None


@dataclass(frozen=True, slots=True)
class Compare:
    """A txn guard on ``key``: ``target`` is one of mod|create|version|value, ``op`` one of = != < >.

    A missing key has mod/create/version 0 and an empty value, exactly as in etcd.
    """

    key: str
    target: str
    op: str
    value: int | bytes


@dataclass(frozen=True, slots=True)
class Put:
    key: str
    value: bytes
    lease: int = 0


@dataclass(frozen=True, slots=True)
class Delete:
    key: str
    prefix: bool = False


@dataclass(frozen=True, slots=True)
class Get:
    key: str
    prefix: bool = False


TxnOp = Put | Delete | Get


@dataclass(frozen=True, slots=True)
class TxnResult:
    succeeded: bool
    revision: int
    # One entry per executed op: list[KeyValue] for Get, the new revision for Put,
    # list of deleted KeyValue for Delete.
    responses: list[object] = field(default_factory=list)


@dataclass(frozen=True, slots=True)
class Lease:
    id: int
    ttl: int


def prefix_end(prefix: str) -> str:
    """The first key after every key that starts with ``prefix`` (etcd's range_end rule)."""
    raw = bytearray(prefix.encode())
    while raw:
        if raw[-1] < 0xFF:
            raw[-1] += 1
            return raw.decode(errors="surrogateescape")
        raw.pop()
    return "\0"


def compare_holds(cmp: Compare, kv: KeyValue | None) -> bool:
    """Evaluate one txn guard the way etcd does (used by backends that evaluate guards themselves)."""
    actual: int | bytes
    if cmp.target == "mod":
        actual = kv.mod_revision if kv else 0
    elif cmp.target == "create":
        actual = kv.create_revision if kv else 0
    elif cmp.target == "version":
        actual = kv.version if kv else 0
    elif cmp.target == "value":
        actual = kv.value if kv else b""
    else:
        raise ValueError(f"unknown compare target {cmp.target!r}")
    expected = cmp.value
    if cmp.op == "=":
        return actual == expected
    if cmp.op == "!=":
        return actual != expected
    if cmp.op == "<":
        return actual < expected  # type: ignore[operator]
    if cmp.op == ">":
        return actual > expected  # type: ignore[operator]
    raise ValueError(f"unknown compare op {cmp.op!r}")


class Store(abc.ABC):
    """Async key-value store with revisions, CAS, prefix watch and leases.

    Revisions are global and strictly increasing; every successful write (put, delete, txn
    with writes) takes exactly one new revision, as in etcd.
    """

    #: The most operations one ``txn`` may carry (etcd's ``--max-txn-ops``, 128 by default).
    max_txn_ops: int = 128

    @abc.abstractmethod
    async def get(self, key: str) -> KeyValue | None: ...

    @abc.abstractmethod
    async def range(self, prefix: str, *, limit: int = 0, after: str = "") -> tuple[list[KeyValue], int]:
        """Every key under ``prefix`` in key order (at most ``limit`` of them, those after ``after``
        when it is given: a page that goes on where the last one ended), and the store revision the
        read saw."""

    @abc.abstractmethod
    async def put(
        self, key: str, value: bytes, *, expect_revision: int | None = None, lease: int = 0
    ) -> int:
        """Write and return the new revision.

        ``expect_revision``: None = unconditional; 0 = the key must not exist; N = the key's
        mod_revision must be N. A failed precondition raises :class:`CasFailed`.
        """

    @abc.abstractmethod
    async def delete(self, key: str, *, expect_revision: int | None = None) -> KeyValue | None:
        """Delete one key and return what it held (None if it did not exist)."""

    @abc.abstractmethod
    async def delete_prefix(self, prefix: str) -> int:
        """Delete every key under ``prefix``; returns how many were deleted."""

    @abc.abstractmethod
    async def txn(
        self, compares: Sequence[Compare], success: Sequence[TxnOp], failure: Sequence[TxnOp] = ()
    ) -> TxnResult: ...

    @abc.abstractmethod
    def watch(self, prefix: str, *, start_revision: int | None = None) -> AsyncIterator[WatchEvent]:
        """Every change under ``prefix`` from ``start_revision`` (inclusive) or from now on.

        The iterator survives a dropped connection by resuming after the last delivered
        revision; it raises :class:`Compacted` if ``start_revision`` is no longer kept.
        """

    @abc.abstractmethod
    async def grant_lease(self, ttl: int) -> Lease: ...

    @abc.abstractmethod
    async def keep_alive(self, lease_id: int) -> int:
        """Refresh a lease; returns its TTL; raises :class:`LeaseNotFound` once it has expired."""

    @abc.abstractmethod
    async def revoke_lease(self, lease_id: int) -> None:
        """Drop a lease and delete every key attached to it."""

    @abc.abstractmethod
    async def compact(self, revision: int) -> None:
        """Forget history below ``revision`` (as etcd); watches from older revisions then fail."""

    @abc.abstractmethod
    async def current_revision(self) -> int: ...

    @abc.abstractmethod
    async def close(self) -> None: ...

    def write_failure(self) -> WriteFailed | None:
        """Why this process's last write could not be made (disk full, read-only, I/O error), until a
        write or the store's own probe succeeds: readiness (``/readyz``) is false meanwhile, so a load
        balancer stops sending writes to a server that cannot take them. None when writes go through."""
        return None

    async def __aenter__(self) -> Store:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()
