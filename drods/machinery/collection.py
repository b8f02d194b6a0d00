"""When the garbage collector runs: tuned for a long-running server, and held off while a
latency-bound pass builds many objects."""

from __future__ import annotations

import contextlib
import gc
from collections.abc import Iterator


def tune_gc() -> None:
    """Fewer, cheaper garbage collections for a long-running server.

    With CPython's defaults (700, 10, 10) a busy API process runs a collection every few requests
    and regularly a full one over every long-lived object (informer caches, the fleet view): those
    pauses were most of the p99 of metric ingest (`bench/api.py`: 110-180 ms → 49-105 ms). What
    exists after start-up is frozen out of collections; young generations are collected 70× less
    often; cyclic garbage is still reclaimed.
    """
    gc.collect()
    gc.freeze()
    gc.set_threshold(50_000, 20, 100)


@contextlib.contextmanager
def collections_deferred() -> Iterator[None]:
    """No collection inside the block; the next allocation after it collects as usual.

    A pass that builds tens of thousands of objects it keeps (a saturated cluster's ServiceRoutes:
    ~17,000 client sites' routes) paid 30-110 ms of collections scanning them while its result was
    still unpublished; the collector runs the same scans once the result is out. Nested blocks
    are fine: only the outermost one enables collections again."""
    if not gc.isenabled():
        yield
        return
    gc.disable()
    try:
        yield
    finally:
        gc.enable()
