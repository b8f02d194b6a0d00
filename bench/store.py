"""Store bench: durable CAS writes/s (concurrent and sequential), reads/s, watch latency.

Every write is a compare-and-swap on its own key (``put(expect_revision=...)``), acknowledged
only once durable, which is what the API server and controllers do. For etcd the same workload
also runs on the raw aetcd client, to show what the store layer costs (``ratio_vs_raw``; each
side runs twice in ABBA order and the figures are means).
Watch latency is measured end to end: from calling put() to the event arriving at a watcher,
one write at a time (an idle system, not a saturated one).

Prints the conditions, then one final JSON line of figures.

    python bench/store.py --backend sqlite [--writers 32] [--ops 20000]
    python bench/store.py --backend etcd [--endpoints 127.0.0.1:2379]   # else starts its own etcd
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import sqlite3
import statistics
import sys
import tempfile
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.arguments import positive_int  # noqa: E402
from drods.store import Store  # noqa: E402
from drods.store.etcd import EtcdStore  # noqa: E402
from drods.store.sqlite import SqliteStore  # noqa: E402

VALUE = b"x" * 256  # about the size of a small serialized object


class Driver:
    """One client under test: the store layer, or the raw etcd client beneath it."""

    name = "store"

    async def cas_chain(self, key: str, n: int) -> None:
        raise NotImplementedError

    async def get(self, key: str) -> None:
        raise NotImplementedError

    async def put(self, key: str, value: bytes) -> None:
        raise NotImplementedError

    def watch(self, prefix: str) -> AsyncIterator[str]:
        raise NotImplementedError

    async def ready(self) -> None:
        """Make sure a watch created now sees every later write (anchors "from now")."""

    async def close(self) -> None:
        raise NotImplementedError


class StoreDriver(Driver):
    def __init__(self, store: Store) -> None:
        self.store = store

    async def cas_chain(self, key: str, n: int) -> None:
        rev = 0  # create-only first, then each write on the revision the last one returned
        for _ in range(n):
            rev = await self.store.put(key, VALUE, expect_revision=rev)

    async def get(self, key: str) -> None:
        await self.store.get(key)

    async def put(self, key: str, value: bytes) -> None:
        await self.store.put(key, value)

    async def ready(self) -> None:
        await self.store.current_revision()

    async def watch(self, prefix: str) -> AsyncIterator[str]:  # type: ignore[override]
        async for ev in self.store.watch(prefix):
            yield ev.kv.key

    async def close(self) -> None:
        await self.store.close()


class RawEtcdDriver(Driver):
    """The same operations written directly against aetcd (what the store would cost nothing over)."""

    name = "raw"

    def __init__(self, endpoint: str) -> None:
        import aetcd

        host, _, port = endpoint.rpartition(":")
        self.client = aetcd.Client(host=host, port=int(port))
        self.tx = self.client.transactions

    async def cas_chain(self, key: str, n: int) -> None:
        kb = key.encode()
        for version in range(n):
            ok, _ = await self.client.transaction(
                compare=[self.tx.version(kb) == version],
                success=[self.tx.put(kb, VALUE)],
                failure=[self.tx.get(kb)],
            )
            assert ok

    async def get(self, key: str) -> None:
        await self.client.get(key.encode())

    async def put(self, key: str, value: bytes) -> None:
        await self.client.put(key.encode(), value)

    async def watch(self, prefix: str) -> AsyncIterator[str]:  # type: ignore[override]
        w = await self.client.watch_prefix(prefix.encode(), prev_kv=True)
        async for ev in w:
            yield ev.kv.key.decode()

    async def close(self) -> None:
        await self.client.close()


async def timed(work: Callable[[], Awaitable[Any]]) -> float:
    start = time.perf_counter()
    await work()
    return time.perf_counter() - start


async def run(driver: Driver, args: argparse.Namespace) -> dict[str, float]:
    p = f"/bench/{uuid.uuid4().hex[:8]}/{driver.name}"
    per = _ops(args) // args.writers

    chains = [driver.cas_chain(f"{p}/c/{w}", per) for w in range(args.writers)]
    elapsed = await timed(lambda: asyncio.gather(*chains))
    cas_concurrent = per * args.writers / elapsed

    elapsed = await timed(lambda: driver.cas_chain(f"{p}/s", args.seq_ops))
    cas_sequential = args.seq_ops / elapsed

    async def reader(r: int) -> None:
        for i in range(per):
            await driver.get(f"{p}/c/{(r + i) % args.writers}")

    elapsed = await timed(lambda: asyncio.gather(*(reader(r) for r in range(args.writers))))
    reads = per * args.writers / elapsed

    arrivals: dict[str, float] = {}
    arrived = asyncio.Event()
    await driver.ready()
    stream = driver.watch(f"{p}/w/")

    async def consume() -> None:
        async for key in stream:
            arrivals[key] = time.perf_counter()
            arrived.set()

    consumer = asyncio.create_task(consume())
    latencies = []
    for i in range(args.watch_samples):
        key = f"{p}/w/{i}"
        arrived.clear()
        sent = time.perf_counter()
        await driver.put(key, VALUE)
        async with asyncio.timeout(10):
            while key not in arrivals:
                await arrived.wait()
                arrived.clear()
        latencies.append((arrivals[key] - sent) * 1000)
    consumer.cancel()
    latencies.sort()
    return {
        "cas_writes_per_s_concurrent": round(cas_concurrent, 1),
        "cas_writes_per_s_sequential": round(cas_sequential, 1),
        "reads_per_s": round(reads, 1),
        "watch_latency_ms_p50": round(statistics.median(latencies), 3),
        "watch_latency_ms_p99": round(latencies[min(len(latencies) - 1, int(len(latencies) * 0.99))], 3),
    }


def _ops(args: argparse.Namespace) -> int:
    """The concurrent runs' operations as made: ``--ops`` shared evenly by the writers (at least one each)."""
    return max(1, args.ops // args.writers) * args.writers


def _mean(runs: list[dict[str, float]]) -> dict[str, float]:
    return {k: round(statistics.fmean(r[k] for r in runs), 3) for k in runs[0]}


async def main(args: argparse.Namespace) -> dict[str, Any]:
    figures: dict[str, Any] = {"backend": args.backend, "writers": args.writers, "ops": _ops(args),
                               "seq_ops": args.seq_ops, "watch_samples": args.watch_samples}
    if args.backend == "sqlite":
        with tempfile.TemporaryDirectory(prefix="drods-bench-", dir=args.dir) as tmp:
            driver = StoreDriver(SqliteStore(os.path.join(tmp, "bench.db")))
            try:
                figures.update(await run(driver, args))
            finally:
                await driver.close()
        return figures

    cluster = None
    endpoints = [e for e in (args.endpoints or "").split(",") if e]
    if not endpoints:
        from tests.etcd_server import EtcdCluster

        cluster = EtcdCluster(1).start()
        endpoints = cluster.endpoints
        print(f"started etcd {cluster.binary} at {endpoints[0]} (data dir on {tempfile.gettempdir()})")
    try:
        store_driver = StoreDriver(EtcdStore(endpoints))
        raw_driver = RawEtcdDriver(endpoints[0])
        try:
            # ABBA order, averaged: neither side profits from running on a warmer (or fuller) etcd.
            raws, ourss = [await run(raw_driver, args)], [await run(store_driver, args)]
            ourss.append(await run(store_driver, args))
            raws.append(await run(raw_driver, args))
            raw, ours = _mean(raws), _mean(ourss)
        finally:
            await store_driver.close()
            await raw_driver.close()
    finally:
        if cluster is not None:
            cluster.stop()
    figures.update(ours)
    figures["raw"] = raw
    rates = ("cas_writes_per_s_concurrent", "cas_writes_per_s_sequential", "reads_per_s")
    figures["ratio_vs_raw"] = {k: round(ours[k] / raw[k], 3) for k in rates}
    return figures


def cli() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--backend", choices=["sqlite", "etcd"], required=True)
    ap.add_argument("--writers", type=positive_int, default=32, help="concurrent writers (and readers)")
    ap.add_argument("--ops", type=positive_int, default=20000, help="CAS writes (and reads) in the concurrent runs")
    ap.add_argument("--seq-ops", type=positive_int, default=3000, help="CAS writes by the single sequential writer")
    ap.add_argument("--watch-samples", type=positive_int, default=500)
    ap.add_argument("--endpoints", help="etcd host:port[,host:port]; default: start a private etcd")
    ap.add_argument("--dir", help="directory for the sqlite file (default: system temp dir)")
    args = ap.parse_args()
    print(f"python {platform.python_version()} on {platform.platform()}, {os.cpu_count()} CPUs")
    if args.backend == "sqlite":
        where = args.dir or tempfile.gettempdir()
        print(f"sqlite {sqlite3.sqlite_version}, WAL, synchronous=FULL, file in {where}")
    print(
        f"workload: {args.writers} concurrent writers x {_ops(args) // args.writers} CAS writes on own keys; "
        f"1 writer x {args.seq_ops} CAS writes; {args.writers} readers x {_ops(args) // args.writers} gets; "
        f"{args.watch_samples} put->watch-event round trips; values {len(VALUE)} B"
    )
    figures = asyncio.run(main(args))
    print(json.dumps(figures))


if __name__ == "__main__":
    cli()
