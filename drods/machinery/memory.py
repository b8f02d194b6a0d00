"""How a long-running process spends memory time: when the garbage collector runs (tuned for a
server, held off while a latency-bound pass builds many objects) and how the C allocator hands
out the large temporary arrays of array code."""

from __future__ import annotations

import contextlib
import ctypes
import gc
import logging
from collections.abc import Iterator

log = logging.getLogger(__name__)

_M_TRIM_THRESHOLD, _M_MMAP_THRESHOLD = -1, -3  # glibc mallopt parameters


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


def tune_allocator(mmap_threshold: int = 32 << 20, trim_threshold: int = 64 << 20) -> bool:
    """Large temporary arrays from the heap, and freed heap kept for the next ones (glibc only).

    Array code over (services x client sites x instances) allocates and frees arrays of a few
    megabytes dozens of times per pass. glibc starts by mapping each of them fresh and trimming
    the heap after they are freed, raising both thresholds only as it sees such frees, so every pass
    paid page faults on memory it had just given back: a 64-service steering step took 26 ms
    instead of 15. These are the values glibc's own adjustment tops out at (32 MiB, 64 MiB), set from
    the start: up to ``trim_threshold`` bytes of freed heap stay mapped. False where the C library
    has no ``mallopt``."""
    try:
        mallopt = ctypes.CDLL(None).mallopt
    except (AttributeError, OSError):
        return False
    mallopt.argtypes, mallopt.restype = [ctypes.c_int, ctypes.c_int], ctypes.c_int
    ok = bool(mallopt(_M_MMAP_THRESHOLD, mmap_threshold)) and bool(mallopt(_M_TRIM_THRESHOLD, trim_threshold))
    if not ok:
        log.debug("mallopt refused the allocator settings")
    return ok


def tune_for_serving() -> None:
    """What a long-running DRO-DS process sets at start: `tune_gc` and `tune_allocator`."""
    tune_gc()
    tune_allocator()
