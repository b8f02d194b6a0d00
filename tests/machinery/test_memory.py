"""The process's memory settings: collections held off in a block and back after it; the C
allocator tuned where glibc offers it."""

from __future__ import annotations

import gc
import platform

import pytest

from drods.machinery.memory import collections_deferred, tune_allocator


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
