"""The embedded store on a full disk (``PRAGMA max_page_count``: a genuine ``SQLITE_FULL``): writes
batched together each fail with `WriteFailed` naming the file, none half-made, and the store says so
(`write_failure`) until its own probe finds room again — without any write being retried."""

from __future__ import annotations

import asyncio
import os
import time
from pathlib import Path

import pytest

from drods.store import Unavailable, WriteFailed
from drods.store.sqlite import SqliteStore


async def test_writes_the_disk_refuses_fail_by_name_and_the_probe_sees_room_return(tmp_path: Path) -> None:
    store = SqliteStore(str(tmp_path / "drods.db"))
    try:
        await store.put("/a", b"small")
        pages = await store._write(lambda t: t.conn.execute("PRAGMA page_count").fetchone()[0])
        await store._write(lambda t: t.conn.execute(f"PRAGMA max_page_count = {pages}").fetchone())
        rev = await store.current_revision()
        big = [os.urandom(50_000) for _ in range(8)]  # incompressible: pages the file has not got
        results = await asyncio.gather(*(store.put(f"/big/{i}", v) for i, v in enumerate(big)),
                                       return_exceptions=True)
        assert all(isinstance(r, WriteFailed) for r in results), results
        failed = results[0]
        assert isinstance(failed, Unavailable) and isinstance(failed, WriteFailed)
        assert failed.path == store.path and "SQLITE_FULL" in failed.cause and str(store.path) in str(failed)
        assert store.write_failure() is not None
        assert (await store.range("/big/"))[0] == [] and await store.current_revision() == rev  # nothing half-made
        assert (await store.get("/a")) is not None

        await store._write(lambda t: t.conn.execute("PRAGMA max_page_count = 1000000").fetchone())
        deadline = time.monotonic() + 5
        while store.write_failure() is not None:
            assert time.monotonic() < deadline, "the probe did not see the room"
            await asyncio.sleep(0.05)
        assert await store.current_revision() == rev  # the probe made no revision
        await store.put("/big/0", big[0])
        assert (await store.get("/big/0")) is not None
    finally:
        await store.close()


@pytest.mark.parametrize("exc", [OSError(28, "No space left on device"), OSError(30, "Read-only file system")])
def test_an_os_error_of_the_disk_is_a_write_failure(exc: OSError) -> None:
    from drods.store.sqlite import write_failure_of

    failed = write_failure_of(exc, "/data/drods.db")
    assert failed is not None and failed.path == "/data/drods.db" and exc.strerror in failed.cause
    assert write_failure_of(OSError(2, "No such file or directory"), "/data/drods.db") is None
