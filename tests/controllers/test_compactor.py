from __future__ import annotations

import pytest

from drods.controllers.compactor import Compactor
from drods.store import Compacted, Store


async def test_compacts_only_history_older_than_retention(store: Store) -> None:
    c = Compactor(store, retention_s=100)
    await store.put("/c/a", b"1")
    old = await store.current_revision()
    assert await c.tick(now=0) is None
    await store.put("/c/a", b"2")
    assert await c.tick(now=50) is None  # nothing is older than the window yet
    assert await c.tick(now=100) == old
    with pytest.raises(Compacted):
        async for _ in store.watch("/c/", start_revision=old - 1):
            break
    assert (await store.get("/c/a")).value == b"2"  # type: ignore[union-attr]
    assert await c.tick(now=101) is None  # never compacts the same revision twice
