"""The process's memory settings: collections held off in a block and back after it; the C
allocator tuned where glibc offers it; freed heap given back to the system."""

from __future__ import annotations

import asyncio
import gc
import platform
import threading

import pytest
from prometheus_client import CollectorRegistry

from drods.machinery.memory import HeapReturn, collections_deferred, resident_bytes, tune_allocator


def test_collections_are_held_off_inside_and_back_after() -> None:
    assert gc.isenabled()
    with collections_deferred():
        assert not gc.isenabled()
        with collections_deferred():  # nested: only the outer block enables them again
            assert not gc.isenabled()
        assert not gc.isenabled()
    assert gc.isenabled()
    with pytest.raises(RuntimeError), collections_deferred():
        raise RuntimeError("a failing pass")
    assert gc.isenabled()


@pytest.mark.skipif(platform.libc_ver()[0] != "glibc", reason="mallopt is glibc's")
def test_allocator_tuning_is_accepted_by_glibc() -> None:
    assert tune_allocator()


@pytest.mark.skipif(platform.libc_ver()[0] != "glibc", reason="malloc_trim is glibc's")
def test_heap_freed_below_a_live_block_goes_back_to_the_system() -> None:
    registry = CollectorRegistry()
    heap = HeapReturn(registry)
    heap.trim()
    blocks = [bytes(4096) for _ in range(20_000)]  # ~80 MiB from the C heap, not CPython's small-object pools
    pinned = blocks[-1]  # the heap's top stays in use: free() alone cannot shrink it
    del blocks
    before = resident_bytes()
    freed = heap.trim()
    assert freed >= 40 << 20, freed
    assert resident_bytes() <= before - (40 << 20)
    assert registry.get_sample_value("drods_heap_returned_bytes_total") >= freed
    assert pinned


async def test_the_heap_is_trimmed_every_interval_off_the_event_loop() -> None:
    heap = HeapReturn(CollectorRegistry(), interval=0.01)
    loop, loop_thread = asyncio.get_running_loop(), threading.get_ident()
    trims: list[int] = []
    three = asyncio.Event()

    def trim() -> int:
        trims.append(threading.get_ident())
        if len(trims) == 3:
            loop.call_soon_threadsafe(three.set)
        return 0

    heap.trim = trim  # type: ignore[method-assign]
    task = asyncio.create_task(heap.run())
    try:
        async with asyncio.timeout(5):
            await three.wait()
    finally:
        task.cancel()
    assert all(t != loop_thread for t in trims)


async def test_no_interval_means_no_trimming() -> None:
    heap = HeapReturn(CollectorRegistry(), interval=0)
    async with asyncio.timeout(1):
        await heap.run()  # returns at once
