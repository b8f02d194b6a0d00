"""A store view that hands every call to the store it wraps.

The views over a process's store (timing, fencing, encryption at rest) each change a few calls;
deriving from this base they write only those, and a call added to `Store` passes through all of
them at once instead of being hand-written in each.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence

from drods.store.base import Compare, KeyValue, Lease, Store, TxnOp, TxnResult, WatchEvent, WriteFailed


class DelegatingStore(Store):
    """Every call goes to ``inner``; subclasses override what their view changes."""

    def __init__(self, inner: Store) -> None:
        self.inner = inner
        self.max_txn_ops = inner.max_txn_ops

    async def get(self, key: str) -> KeyValue | None:
        return await self.inner.get(key)

    async def range(self, prefix: str, *, limit: int = 0, after: str = "") -> tuple[list[KeyValue], int]:
        return await self.inner.range(prefix, limit=limit, after=after)

    async def put(self, key: str, value: bytes, *, expect_revision: int | None = None, lease: int = 0) -> int:
        return await self.inner.put(key, value, expect_revision=expect_revision, lease=lease)

    async def delete(self, key: str, *, expect_revision: int | None = None) -> KeyValue | None:
        return await self.inner.delete(key, expect_revision=expect_revision)

    async def delete_prefix(self, prefix: str) -> int:
        return await self.inner.delete_prefix(prefix)

    async def txn(self, compares: Sequence[Compare], success: Sequence[TxnOp],
                  failure: Sequence[TxnOp] = ()) -> TxnResult:
        return await self.inner.txn(compares, success, failure)

    def watch(self, prefix: str, *, start_revision: int | None = None) -> AsyncIterator[WatchEvent]:
        return self.inner.watch(prefix, start_revision=start_revision)

    async def grant_lease(self, ttl: int) -> Lease:
        return await self.inner.grant_lease(ttl)

    async def keep_alive(self, lease_id: int) -> int:
        return await self.inner.keep_alive(lease_id)

    async def revoke_lease(self, lease_id: int) -> None:
        await self.inner.revoke_lease(lease_id)

    async def compact(self, revision: int) -> None:
        await self.inner.compact(revision)

    async def current_revision(self) -> int:
        return await self.inner.current_revision()

    async def close(self) -> None:
        await self.inner.close()

    def write_failure(self) -> WriteFailed | None:
        return self.inner.write_failure()
