"""A store that refuses writes for want of space, the same on both backends: the embedded store's file on
a full disk (``PRAGMA max_page_count`` and its free pages used up: a genuine ``SQLITE_FULL``) and etcd over
its backend quota (a real etcd started with a tiny ``--quota-backend-bytes`` and filled until it raises
its NOSPACE alarm: "mvcc: database space exceeded").

Either way a write is `WriteFailed` naming the store and what to do — through the API 503
``STORE_UNAVAILABLE`` —, ``/readyz`` is 503 with the cause while ``/livez`` stays 200, nothing is
half-written, and once the operator frees space (the cap raised; etcd compacted, defragmented and its
alarm disarmed) the server is ready again by itself and writes go through."""

from __future__ import annotations

import asyncio
import contextlib
import os
import subprocess
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import grpc
import pytest
from aetcd import rpc

import drods.store.etcd as etcd_store
from drods.api.auth import Role
from drods.server import ServerConfig, build_app
from drods.store import Store, StoreError, WriteFailed
from drods.store.etcd import EtcdStore
from drods.store.sqlite import PROBE_EVERY, SqliteStore
from tests.api.conftest import Api, served
from tests.api.test_disk_full import cap_pages, config_map, fill, integrity, until
from tests.etcd_server import EtcdMember, etcd_binary
from tests.free_port import free_port

CM = "/api/v1/namespaces/default/configmaps"
QUOTA = 2_000_000  # etcd's --quota-backend-bytes: full after some forty 50 kB values
CHECK_EVERY = max(PROBE_EVERY, etcd_store.ALARM_CHECK_EVERY)


@contextlib.contextmanager
def quota_etcd(root: Path, quota: int = QUOTA) -> Iterator[EtcdMember]:
    """A one-member etcd on loopback whose backend holds at most ``quota`` bytes."""
    binary = etcd_binary()
    if binary is None:
        if os.environ.get("DRODS_REQUIRE_ETCD") == "1":
            pytest.fail("etcd binary not found")
        pytest.skip("etcd binary not found (apt-get install etcd-server, or set ETCD_BINARY)")
    for attempt in range(3):  # a port another server took between its choice and etcd's bind: anew
        member = EtcdMember("m0", root / f"etcd{attempt}", free_port(), free_port())
        member.data_dir.mkdir(parents=True)
        client_url = f"http://{member.endpoint}"
        with open(member.data_dir / "etcd.log", "ab") as log:
            member.proc = subprocess.Popen(
                [binary, "--name", member.name, "--data-dir", str(member.data_dir / "data"),
                 "--listen-client-urls", client_url, "--advertise-client-urls", client_url,
                 "--listen-peer-urls", member.peer_url, "--initial-advertise-peer-urls", member.peer_url,
                 "--initial-cluster", f"{member.name}={member.peer_url}", "--initial-cluster-state", "new",
                 "--quota-backend-bytes", str(quota), "--logger", "zap", "--log-outputs", "stderr"],
                stdout=log, stderr=log, stdin=subprocess.DEVNULL)
        deadline = time.monotonic() + 30
        while member.alive() and not member.healthy() and time.monotonic() < deadline:
            time.sleep(0.05)
        if member.healthy():
            break
        member.stop()
        if "address already in use" not in member.log_tail() or attempt == 2:
            raise RuntimeError(f"etcd did not start:\n{member.log_tail()}")
    try:
        yield member
    finally:
        member.stop()


async def fill_etcd(store: EtcdStore) -> None:
    """Put incompressible values until etcd refuses one: its NOSPACE alarm is raised."""
    for i in range(1_000):
        try:
            await store.put(f"/fill/{i}", os.urandom(50_000))
        except StoreError:
            return
    raise AssertionError(f"etcd with a {QUOTA}-byte quota took 50 MB")


async def free_etcd(endpoint: str, store: EtcdStore) -> None:
    """What the operator does (etcd's runbook): delete, compact the history, defragment, disarm."""
    await store.delete_prefix("/fill/")  # deletes go through while the alarm stands
    await store.compact(await store.current_revision())
    async with grpc.aio.insecure_channel(endpoint) as channel:
        maintenance = rpc.MaintenanceStub(channel)
        await maintenance.Defragment(rpc.DefragmentRequest(), timeout=30)
        listed = await maintenance.Alarm(rpc.AlarmRequest(action=rpc.AlarmRequest.GET), timeout=5)
        assert [a.alarm for a in listed.alarms] == [rpc.NOSPACE], listed
        for alarm in listed.alarms:  # etcdctl alarm disarm: each member's alarm by its ID
            await maintenance.Alarm(rpc.AlarmRequest(action=rpc.AlarmRequest.DEACTIVATE, memberID=alarm.memberID,
                                                     alarm=alarm.alarm), timeout=5)


@dataclass
class Full:
    """A store of one backend, and how to fill it and to free it again."""

    store: Store
    where: str  # what WriteFailed.path names
    says: tuple[str, ...]  # words of the cause that tell the operator what is wrong and what to do
    fill: Callable[[], Awaitable[None]]
    free: Callable[[], Awaitable[None]]
    intact: Callable[[], bool] = lambda: True


@pytest.fixture(params=["sqlite", "etcd"])
async def full(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Full]:
    if request.param == "sqlite":
        sqlite = SqliteStore(str(tmp_path / "drods.db"))

        async def fill_sqlite() -> None:
            pages = await sqlite._write(lambda t: t.conn.execute("PRAGMA page_count").fetchone()[0]) + 64
            await cap_pages(sqlite, pages)
            fill(sqlite.path, pages)

        try:
            yield Full(sqlite, sqlite.path, ("database or disk is full", "SQLITE_FULL", "max_page_count"),
                       fill_sqlite, lambda: cap_pages(sqlite, 1_000_000), lambda: integrity(sqlite.path) == "ok")
        finally:
            await sqlite.close()
        return
    with quota_etcd(tmp_path) as member:
        etcd = EtcdStore([member.endpoint])
        try:
            yield Full(etcd, f"etcd://{member.endpoint}",
                       ("database space exceeded", "NOSPACE", "compact", "defrag", "alarm disarm"),
                       lambda: fill_etcd(etcd), lambda: free_etcd(member.endpoint, etcd))
        finally:
            await etcd.close()


@pytest.fixture
async def api(full: Full, tmp_path: Path) -> AsyncIterator[Api]:
    app = build_app(ServerConfig(store_url="unused://", data_dir=tmp_path / "data"), store=full.store)
    async with served(app, {"admin": app.state.ctx.tokens.issue(Role.ADMIN, subject="test-admin")}) as api_:
        yield api_


async def test_a_store_out_of_space_refuses_writes_by_name_until_space_is_freed(full: Full, api: Api) -> None:
    store = full.store
    assert (await api.call("POST", CM, json=config_map("before"))).status_code == 201
    assert (await api.client.get("/readyz")).status_code == 200
    assert store.write_failure() is None

    await full.fill()
    with pytest.raises(WriteFailed) as refused:  # the store's own word, whichever store it is
        await store.put("/refused", os.urandom(50_000))
    assert refused.value.path == full.where and str(full.where) in str(refused.value)
    assert all(word in refused.value.cause for word in full.says), refused.value.cause
    failed = store.write_failure()
    assert failed is not None and failed.path == full.where

    r = await api.call("POST", "/api/v1/clusters", json={"name": "edge-1", "endpoint": "https://edge-1.example"})
    assert r.status_code == 503, r.text
    body = r.json()
    assert body["code"] == "STORE_UNAVAILABLE" and set(body) == {"code", "message", "details"}, body
    assert full.where in body["message"] and all(word in body["message"] for word in full.says), body
    assert "audit log" not in body["message"], body
    assert r.headers["Retry-After"]
    r = await api.call("POST", CM, json=config_map("full"))  # a Kubernetes path says it as kube-apiserver does
    assert r.status_code == 503 and r.json()["reason"] == "ServiceUnavailable", r.text
    assert full.where in r.json()["message"], r.text

    ready = await api.client.get("/readyz")
    assert ready.status_code == 503, ready.text
    assert ready.json()["code"] == "STORE_UNAVAILABLE" and ready.json()["message"].startswith("store failed:")
    details = ready.json()["details"]
    assert details["path"] == full.where and all(word in details["cause"] for word in full.says), details
    assert (await api.client.get("/livez")).status_code == 200

    # nothing half-written; what was there reads
    assert await store.get("/refused") is None
    assert (await api.call("GET", f"{CM}/full")).status_code == 404
    assert (await api.call("GET", "/api/v1/clusters/edge-1")).status_code == 404
    assert (await api.call("GET", f"{CM}/before")).status_code == 200
    assert full.intact()
    # the store's own periodic look finds no room either: not ready at any poll across two periods
    deadline = time.monotonic() + 2 * CHECK_EVERY + 0.2
    while time.monotonic() < deadline:
        assert (await api.client.get("/readyz")).status_code == 503
        await asyncio.sleep(0.1)

    await full.free()  # no write of ours after it: the store sees the room by itself
    await until(lambda: api.client.get("/readyz"), 5.0, lambda r: r.status_code == 200)
    assert store.write_failure() is None
    r = await api.call("POST", CM, json=config_map("full"))
    assert r.status_code == 201, r.text
    assert (await api.call("POST", "/api/v1/clusters", json={"name": "edge-1", "endpoint": "https://edge-1.example"})
            ).status_code == 201
    assert (await api.call("GET", f"{CM}/full")).json()["data"] == r.json()["data"]
    assert (await api.client.get("/readyz")).status_code == 200


async def test_etcd_a_write_that_stores_clears_the_failure_and_a_delete_does_not(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Each write etcd refuses for space is `WriteFailed` (a put, a CAS put, a txn with a put, a lease
    grant); deletes still go through and clear nothing; the first write that stores something once the
    alarm is disarmed clears the failure at once (the alarm check is held off here)."""
    monkeypatch.setattr(etcd_store, "ALARM_CHECK_EVERY", 3600.0)
    from drods.store import Put

    with quota_etcd(tmp_path) as member:
        store = EtcdStore([member.endpoint])
        try:
            await store.put("/keep", b"kept")
            await fill_etcd(store)
            rev = await store.current_revision()
            kept = await store.get("/keep")
            assert kept is not None
            refusals = [store.put("/x", b"x"), store.put("/keep", b"new", expect_revision=kept.mod_revision),
                        store.txn([], [Put("/y", b"y")]), store.grant_lease(10)]
            for refused in refusals:
                with pytest.raises(WriteFailed, match="database space exceeded"):
                    await refused
            assert await store.current_revision() == rev and await store.get("/x") is None
            assert await store.get("/keep") == kept  # nothing half-written
            assert await store.delete("/fill/0") is not None  # room is made by deleting...
            assert store.write_failure() is not None  # ...which proves none
            await free_etcd(member.endpoint, store)
            assert store.write_failure() is not None  # no write yet, and no look at the alarms
            await store.put("/x", b"x")
            assert store.write_failure() is None
        finally:
            await store.close()
