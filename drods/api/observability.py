"""Prometheus exposition of the API server's own work (request rate/latency, store ops, watches)."""

from __future__ import annotations

import time
from collections.abc import AsyncIterator, Sequence
from typing import Any

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

from drods.store import Store
from drods.store.base import Compare, KeyValue, TxnOp, TxnResult, WatchEvent
from drods.store.delegating import DelegatingStore


class ApiMetrics:
    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        self.requests = Counter("drods_apiserver_requests_total", "API requests by route, method and code",
                                ["route", "method", "code"], registry=self.registry)
        self.latency = Histogram("drods_apiserver_request_duration_seconds", "API request latency by route",
                                 ["route", "method"], registry=self.registry,
                                 buckets=(.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10))
        self.store_latency = Histogram("drods_store_operation_duration_seconds", "Store operation latency",
                                       ["operation"], registry=self.registry,
                                       buckets=(.0005, .001, .0025, .005, .01, .025, .05, .1, .25, 1))
        self.watches = Gauge("drods_apiserver_watches", "Open watch streams", registry=self.registry)
        # one per prefix is what a process's shared informers open (API clients' watches add theirs)
        self.store_watches = Gauge("drods_store_watches", "Open store watches by key prefix", ["prefix"],
                                   registry=self.registry)


class InstrumentedStore(DelegatingStore):
    """Times every store call; the wrapped store does the work."""

    def __init__(self, inner: Store, metrics: ApiMetrics) -> None:
        super().__init__(inner)
        self._h = metrics.store_latency
        self._watches = metrics.store_watches

    async def _timed(self, op: str, coro: Any) -> Any:
        t0 = time.perf_counter()
        try:
            return await coro
        finally:
            self._h.labels(op).observe(time.perf_counter() - t0)

    async def get(self, key: str) -> KeyValue | None:
        return await self._timed("get", self.inner.get(key))  # type: ignore[no-any-return]

    async def range(self, prefix: str, *, limit: int = 0, after: str = "") -> tuple[list[KeyValue], int]:
        return await self._timed("range", self.inner.range(prefix, limit=limit, after=after))  # type: ignore[no-any-return]

    async def put(self, key: str, value: bytes, *, expect_revision: int | None = None, lease: int = 0) -> int:
        return await self._timed(  # type: ignore[no-any-return]
            "put", self.inner.put(key, value, expect_revision=expect_revision, lease=lease))

    async def delete(self, key: str, *, expect_revision: int | None = None) -> KeyValue | None:
        return await self._timed("delete", self.inner.delete(key, expect_revision=expect_revision))  # type: ignore[no-any-return]

    async def delete_prefix(self, prefix: str) -> int:
        return await self._timed("delete_prefix", self.inner.delete_prefix(prefix))  # type: ignore[no-any-return]

    async def txn(self, compares: Sequence[Compare], success: Sequence[TxnOp],
                  failure: Sequence[TxnOp] = ()) -> TxnResult:
        return await self._timed("txn", self.inner.txn(compares, success, failure))  # type: ignore[no-any-return]

    def watch(self, prefix: str, *, start_revision: int | None = None) -> AsyncIterator[WatchEvent]:
        # the inner watch is called now: "from now" is anchored at the call, not the first iteration
        return self._counted(prefix, self.inner.watch(prefix, start_revision=start_revision))

    async def _counted(self, prefix: str, events: AsyncIterator[WatchEvent]) -> AsyncIterator[WatchEvent]:
        gauge = self._watches.labels(prefix)
        gauge.inc()
        try:
            async for ev in events:
                yield ev
        finally:
            gauge.dec()
            aclose = getattr(events, "aclose", None)
            if aclose is not None:
                await aclose()  # at once, as when the caller held the store's own iterator


__all__ = ["ApiMetrics", "Compare", "InstrumentedStore", "TxnOp"]
