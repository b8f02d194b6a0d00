"""Fenced writes (A6): a deposed leader's writes are refused by the store itself.

A leader holds ``/leases/<name>``; the key's modification revision at the moment it was won is the
*leadership generation*. Every write of a single-active component is a transaction that also
compares that key's revision, so it fails the instant the key is gone or re-taken — even by a
restarted replica that reuses the same identity (comparing the holder's name would let that
through). Reads pass straight through.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from drods.store import (
    CasFailed,
    Compare,
    Delete,
    Get,
    KeyValue,
    Put,
    Store,
    StoreError,
    TxnResult,
)
from drods.store.base import TxnOp
from drods.store.delegating import DelegatingStore


class LeadershipLost(StoreError):
    """A fenced write was refused: this process no longer holds the lease it was granted under."""

    def __init__(self, fence: Fence) -> None:
        super().__init__(f"leadership of {fence.key} (generation {fence.generation}) was lost")
        self.fence = fence


class WritesRefused(Exception):
    """A write this process may no longer send: the lease it writes under may have expired
    (`LeaderElector.fresh`), and a member cluster cannot refuse a deposed leader's write the way the
    store does. Nothing was sent; the key is tried again, by this leader once its lease is heard of or
    by the next."""


@dataclass(frozen=True, slots=True)
class Fence:
    """Proof of leadership: the lease key and the revision at which this holder took it."""

    key: str
    generation: int

    def compare(self) -> Compare:
        return Compare(self.key, "mod", "=", self.generation)


class FencedStore(DelegatingStore):
    """A view of ``inner`` whose every write carries ``fence``; raises `LeadershipLost` once it fails."""

    def __init__(self, inner: Store, fence: Fence) -> None:
        super().__init__(inner)
        self.fence = fence
        self.max_txn_ops = inner.max_txn_ops - 1

    async def _guarded(self, compares: Sequence[Compare], success: Sequence[TxnOp],
                       failure: Sequence[TxnOp] = ()) -> TxnResult:
        res = await self.inner.txn([self.fence.compare(), *compares], success,
                                   [*failure, Get(self.fence.key)])
        if res.succeeded:
            return res
        held = res.responses[-1]
        assert isinstance(held, list)
        if not held or held[0].mod_revision != self.fence.generation:
            raise LeadershipLost(self.fence)
        return TxnResult(False, res.revision, res.responses[:-1])

    async def put(self, key: str, value: bytes, *, expect_revision: int | None = None, lease: int = 0) -> int:
        guard = [] if expect_revision is None else [Compare(key, "mod", "=", expect_revision)]
        res = await self._guarded(guard, [Put(key, value, lease)], [Get(key)])
        if not res.succeeded:
            current = res.responses[0]
            assert isinstance(current, list)
            raise CasFailed(key, current[0] if current else None)
        return res.revision

    async def delete(self, key: str, *, expect_revision: int | None = None) -> KeyValue | None:
        guard = [] if expect_revision is None else [Compare(key, "mod", "=", expect_revision)]
        res = await self._guarded(guard, [Delete(key)], [Get(key)])
        if not res.succeeded:
            current = res.responses[0]
            assert isinstance(current, list)
            raise CasFailed(key, current[0] if current else None)
        deleted = res.responses[0]
        assert isinstance(deleted, list)
        return deleted[0] if deleted else None

    async def delete_prefix(self, prefix: str) -> int:
        res = await self._guarded([], [Delete(prefix, prefix=True)])
        deleted = res.responses[0]
        assert isinstance(deleted, list)
        return len(deleted)

    async def txn(self, compares: Sequence[Compare], success: Sequence[TxnOp],
                  failure: Sequence[TxnOp] = ()) -> TxnResult:
        return await self._guarded(compares, success, failure)

    async def close(self) -> None:
        """The inner store belongs to the process, not to one leadership term."""
