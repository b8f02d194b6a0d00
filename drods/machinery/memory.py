"""How a long-running process spends memory time: when the garbage collector runs (tuned for a
server, held off while a latency-bound pass builds many objects), how the C allocator hands
out the large temporary arrays of array code, and when freed heap goes back to the system."""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import gc
import logging
import os
from collections.abc import Callable, Iterator

from prometheus_client import CollectorRegistry, Counter

log = logging.getLogger(__name__)

_M_TRIM_THRESHOLD, _M_MMAP_THRESHOLD, _M_ARENA_MAX = -1, -3, -8  # glibc mallopt parameters


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


def tune_allocator(mmap_threshold: int = 32 << 20, trim_threshold: int = 64 << 20, arenas: int = 2) -> bool:
    """Large temporary arrays from the heap, and freed heap kept for the next ones (glibc only).

    Array code over (services x client sites x instances) allocates and frees arrays of a few
    megabytes dozens of times per pass. glibc starts by mapping each of them fresh and trimming
    the heap after they are freed, raising both thresholds only as it sees such frees, so every pass
    paid page faults on memory it had just given back: a 64-service steering step took 26 ms
    instead of 15. These are the values glibc's own adjustment tops out at (32 MiB, 64 MiB), set from
    the start: up to ``trim_threshold`` bytes of freed heap stay mapped (`HeapReturn` gives it back
    between passes).

    At most ``arenas`` allocator arenas (glibc's default is eight per core): the store's reader and
    writer threads and the event loop's workers each got one of their own, and what they allocate is
    mostly freed on the event loop's thread, leaving holes in every arena that none of them reuses.
    In a failure storm at 2,000 clusters (`bench/memory.py`) that held ~20 MiB more. Set before the
    process starts its threads. False where the C library has no ``mallopt``."""
    mallopt = _libc("mallopt", [ctypes.c_int, ctypes.c_int])
    if mallopt is None:
        return False
    ok = (bool(mallopt(_M_MMAP_THRESHOLD, mmap_threshold)) and bool(mallopt(_M_TRIM_THRESHOLD, trim_threshold))
          and bool(mallopt(_M_ARENA_MAX, arenas)))
    if not ok:
        log.debug("mallopt refused the allocator settings")
    return ok


def _libc(name: str, argtypes: list[type[ctypes._SimpleCData[int]]]) -> Callable[..., int] | None:
    """The C library's function ``name`` returning an int (None where it has no such function)."""
    try:
        fn = getattr(ctypes.CDLL(None), name)
    except (AttributeError, OSError):
        return None
    fn.argtypes, fn.restype = argtypes, ctypes.c_int
    return fn  # type: ignore[no-any-return]


def tune_for_serving() -> None:
    """What a long-running DRO-DS process sets at start: `tune_gc` and `tune_allocator`."""
    tune_gc()
    tune_allocator()


def resident_bytes() -> int:
    """The process's resident set (0 where ``/proc`` is not there)."""
    try:
        with open("/proc/self/statm", "rb") as f:
            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):
        return 0


class HeapReturn:
    """Gives the C heap's free pages back to the system every ``interval`` seconds (glibc's
    ``malloc_trim``).

    glibc returns freed memory only from the top of an arena's heap, and `tune_allocator` keeps up
    to 64 MiB of it mapped on purpose; a burst of short-lived documents (a failure storm re-deciding
    every binding, a relist) leaves free pages in the middle that the RSS keeps showing until the
    process ends: ~30 MiB of a 2,000-cluster storm's ~150 MiB growth. Trimming between passes costs
    the next large-array pass its page faults once. The trim runs off the event loop (it takes each
    arena's lock in turn, not the interpreter's); nothing happens where the C library has no
    ``malloc_trim``."""

    def __init__(self, registry: CollectorRegistry, interval: float = 30.0) -> None:
        self.interval = interval
        self.returned = Counter("drods_heap_returned_bytes",
                                "Resident memory given back to the system by trimming the C heap",
                                registry=registry)
        self._trim = _libc("malloc_trim", [ctypes.c_size_t])

    def trim(self) -> int:
        """Trim now; the resident bytes it gave back."""
        if self._trim is None:
            return 0
        before = resident_bytes()
        self._trim(0)
        freed = max(0, before - resident_bytes())
        self.returned.inc(freed)
        return freed

    async def run(self) -> None:
        if self._trim is None or self.interval <= 0:
            return
        while True:
            await asyncio.sleep(self.interval)
            await asyncio.to_thread(self.trim)
