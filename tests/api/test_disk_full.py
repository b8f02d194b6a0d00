"""A full disk under the embedded store: writes are answered 503 naming the store file and the cause,
``/readyz`` says not ready (a load balancer sends writes elsewhere) while ``/livez`` stays ok, nothing is
half-written, and once space is freed writes go through and the server is ready again by itself.

The disk is filled for real, as SQLite sees it: ``PRAGMA max_page_count`` caps the file, and its free
pages are used up, so every write needing a new page fails with a genuine ``SQLITE_FULL``."""

from __future__ import annotations

import asyncio
import os
import sqlite3
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path

import httpx
import pytest

from drods.api.auth import Role
from drods.server import ServerConfig, build_app
from drods.store.sqlite import PROBE_EVERY, SqliteStore
from tests.api.conftest import Api, served

CM = "/api/v1/namespaces/default/configmaps"


@pytest.fixture
async def disk(tmp_path: Path) -> AsyncIterator[tuple[Api, SqliteStore]]:
    store = SqliteStore(str(tmp_path / "drods.db"))
    app = build_app(ServerConfig(store_url="unused://", data_dir=tmp_path / "data"), store=store)
    tokens = {"admin": app.state.ctx.tokens.issue(Role.ADMIN, subject="test-admin")}
    async with served(app, tokens) as api:
        yield api, store


async def cap_pages(store: SqliteStore, pages: int) -> None:
    """The store's writes may use no more than ``pages`` pages of the file (the limit is the writer's
    connection's, so it is set through the writer)."""
    await store._write(lambda t: t.conn.execute(f"PRAGMA max_page_count = {pages}").fetchone())


def fill(path: str, pages: int) -> None:
    """Take every free page up to ``pages`` (as another writer of the disk would): after this, any write
    that needs a page of its own finds none."""
    c = sqlite3.connect(path, isolation_level=None, timeout=30)
    try:
        c.execute(f"PRAGMA max_page_count = {pages}")
        c.execute("CREATE TABLE IF NOT EXISTS filler (pad BLOB NOT NULL)")
        c.execute("PRAGMA synchronous = OFF")  # a test's filler: no fsync per row
        for size in (512, 16):  # pages first, then what is left in each
            with pytest.raises(sqlite3.OperationalError, match="full"):
                for _ in range(100_000):
                    c.execute("INSERT INTO filler (pad) VALUES (zeroblob(?))", (size,))
    finally:
        c.close()


def integrity(path: str) -> str:
    c = sqlite3.connect(path)
    try:
        return str(c.execute("PRAGMA integrity_check").fetchone()[0])
    finally:
        c.close()


async def until(call: Callable[[], Awaitable[httpx.Response]], seconds: float,
                done: Callable[[httpx.Response], bool]) -> httpx.Response:
    """The response of ``call()`` once ``done`` holds of it, within ``seconds``."""
    deadline = time.monotonic() + seconds
    while True:
        r = await call()
        if done(r):
            return r
        assert time.monotonic() < deadline, f"not within {seconds}s: {r.status_code} {r.text}"
        await asyncio.sleep(0.05)


def config_map(name: str) -> dict[str, object]:
    return {"metadata": {"name": name}, "data": {"blob": os.urandom(24_000).hex()}}  # does not compress


async def test_a_full_disk_refuses_writes_by_name_and_makes_the_server_not_ready(
        disk: tuple[Api, SqliteStore]) -> None:
    api, store = disk
    db = store.path
    assert (await api.call("POST", CM, json=config_map("before"))).status_code == 201
    assert (await api.client.get("/readyz")).status_code == 200

    c = sqlite3.connect(db)
    pages = int(c.execute("PRAGMA page_count").fetchone()[0]) + 64
    c.close()
    await cap_pages(store, pages)
    fill(db, pages)

    r = await api.call("POST", "/api/v1/clusters", json={"name": "edge-1", "endpoint": "https://edge-1.example"})
    assert r.status_code == 503, r.text
    body = r.json()
    assert body["code"] == "STORE_UNAVAILABLE" and set(body) == {"code", "message", "details"}, body
    assert db in body["message"] and "database or disk is full" in body["message"], body  # where, and why
    assert "max_page_count" in body["message"], body  # what is full: the file's cap, not the filesystem
    assert "audit log" not in body["message"], body
    assert r.headers["Retry-After"]
    r = await api.call("POST", CM, json=config_map("full"))  # a Kubernetes path says it as kube-apiserver does
    assert r.status_code == 503 and r.json()["reason"] == "ServiceUnavailable", r.text
    assert db in r.json()["message"] and "database or disk is full" in r.json()["message"], r.text

    ready = await api.client.get("/readyz")
    assert ready.status_code == 503, ready.text
    assert ready.json()["code"] == "STORE_UNAVAILABLE" and ready.json()["message"].startswith("store failed:")
    assert ready.json()["details"]["path"] == db and "SQLITE_FULL" in ready.json()["details"]["cause"]
    assert (await api.client.get("/livez")).status_code == 200  # alive: restarting it frees no space

    # nothing half-written: the object is not there, the file is sound, earlier objects read
    assert (await api.call("GET", f"{CM}/full")).status_code == 404
    assert (await api.call("GET", "/api/v1/clusters/edge-1")).status_code == 404
    assert (await api.call("GET", f"{CM}/before")).status_code == 200
    assert integrity(db) == "ok"
    # the writer's periodic probe finds no room either: not ready at any poll across two probe periods
    deadline = time.monotonic() + 2 * PROBE_EVERY + 0.2
    while time.monotonic() < deadline:
        assert (await api.client.get("/readyz")).status_code == 503
        await asyncio.sleep(0.1)

    await cap_pages(store, 1_000_000)  # space freed
    await until(lambda: api.client.get("/readyz"), 5.0, lambda r: r.status_code == 200)
    r = await api.call("POST", CM, json=config_map("full"))
    assert r.status_code == 201, r.text
    assert (await api.call("POST", "/api/v1/clusters", json={"name": "edge-1", "endpoint": "https://edge-1.example"})
            ).status_code == 201
    assert (await api.call("GET", f"{CM}/full")).json()["data"] == r.json()["data"]
    assert (await api.client.get("/readyz")).status_code == 200
