"""The etcd backend against an etcd that serves TLS, asks for client certificates and has
authentication on — as a production etcd runs — from the store and from ``drods serve``."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path

import pytest

from drods.security.tls import ensure_certs, issue_client_cert
from drods.store import StoreError, open_store
from drods.store.etcd import EtcdTLS
from tests.etcd_server import EtcdCluster, etcd_binary
from tests.server_process import ServerProcess


@pytest.fixture(scope="module")
def secure_etcd(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, EtcdTLS]]:
    if etcd_binary() is None:
        pytest.skip("etcd binary not found")
    root = tmp_path_factory.mktemp("etcd-secure")
    certs = ensure_certs(root / "pki", "etcd", "127.0.0.1")
    cert, key = issue_client_cert(root / "pki", "drods")
    tls = EtcdTLS(certs.ca, cert, key)
    with EtcdCluster(1, base_dir=str(root / "etcd"), tls=tls) as cluster:
        cluster.members[0].enable_auth("root", "s3cret")
        yield cluster.endpoints[0], tls


def _url(endpoint: str, tls: EtcdTLS, userinfo: str = "root:s3cret", client_cert: bool = True) -> str:
    query = f"ca={tls.ca}" + (f"&cert={tls.cert}&key={tls.key}" if client_cert else "")
    return f"etcd://{userinfo}@{endpoint}?{query}" if userinfo else f"etcd://{endpoint}?{query}"


def test_store_over_tls_with_client_certificate_and_password(secure_etcd: tuple[str, EtcdTLS]) -> None:
    endpoint, tls = secure_etcd

    async def run() -> None:
        store = open_store(_url(endpoint, tls))
        try:
            rev = await store.put("/t/a", b"1")
            assert (await store.get("/t/a")).value == b"1"  # type: ignore[union-attr]
            lease = await store.grant_lease(5)
            await store.put("/t/b", b"2", lease=lease.id)
            events = []
            async for ev in store.watch("/t/", start_revision=rev):
                events.append(ev.kv.key)
                if len(events) == 2:
                    break
            assert events == ["/t/a", "/t/b"]
        finally:
            await store.close()

        for bad in (_url(endpoint, tls, "root:wrong"), _url(endpoint, tls, ""),
                    _url(endpoint, tls, client_cert=False), f"etcd://root:s3cret@{endpoint}"):
            store = open_store(bad)
            store.deadline = 2.0  # type: ignore[attr-defined]
            try:
                with pytest.raises((StoreError, Exception)):
                    await store.get("/t/a")
            finally:
                await store.close()

    asyncio.run(run())


def test_open_store_url_errors() -> None:
    with pytest.raises(ValueError, match="cert and key"):
        open_store("etcd://127.0.0.1:2379?cert=/a")
    with pytest.raises(ValueError, match="unknown parameters"):
        open_store("etcd://127.0.0.1:2379?insecure=1")


def test_drods_serve_on_a_secured_etcd(secure_etcd: tuple[str, EtcdTLS], tmp_path: Path) -> None:
    endpoint, tls = secure_etcd
    url = _url(endpoint, tls, userinfo="root")  # the password from the environment, not the command line
    with ServerProcess(tmp_path / "data", args=["--store", url], env={"DRODS_ETCD_PASSWORD": "s3cret"}) as server, \
            server.client() as http:
        r = http.post("/api/v1/clusters", json={"name": "over-tls", "syncMode": "Pull"})
        assert r.status_code == 201, r.text
        assert [c["name"] for c in http.get("/api/v1/clusters").json()["items"]] == ["over-tls"]
