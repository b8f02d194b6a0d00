"""A SIGKILL at any moment loses no acknowledged write; the restarted server serves them all."""

from __future__ import annotations

import re
import threading
from pathlib import Path

import httpx
import pytest

from tests.etcd_server import wipe
from tests.server_process import ServerProcess, wait_until


def _writer(server: ServerProcess, token: str, prefix: str, acked: list[str], stop: threading.Event) -> None:
    with httpx.Client(base_url=server.url, headers={"Authorization": f"Bearer {token}"}, verify=server.verify,
                      timeout=5) as client:
        i = 0
        while not stop.is_set():
            name = f"{prefix}-{i}"
            try:
                r = client.post("/api/v1/clusters", json={"name": name, "region": "r", "labels": {"n": str(i)}})
            except httpx.HTTPError:
                return  # the server died mid-request: this write was never acknowledged
            if r.status_code == 201:
                acked.append(name)
            i += 1


@pytest.mark.parametrize("backend", ["sqlite", "etcd"])
def test_sigkill_loses_no_acknowledged_write(tmp_path: Path, backend: str, request: pytest.FixtureRequest) -> None:
    args: list[str] = []
    if backend == "etcd":
        endpoint = request.getfixturevalue("etcd_endpoint")
        args = ["--store", f"etcd://{endpoint}"]
        wipe(endpoint)  # the session's etcd is shared: other tests' objects, sealed with their keyrings
    server = ServerProcess(tmp_path / "data", args=args).start()
    token = server.token("admin")
    acked: list[list[str]] = [[] for _ in range(4)]
    stop = threading.Event()
    threads = [threading.Thread(target=_writer, args=(server, token, f"{backend}-w{k}", acked[k], stop))
               for k in range(4)]
    for t in threads:
        t.start()
    wait_until(lambda: sum(map(len, acked)) >= 200, 60, "200 acknowledged writes")
    server.kill()  # SIGKILL while the writers are still going
    stop.set()
    for t in threads:
        t.join(10)
    written = [name for per_writer in acked for name in per_writer]

    restarted = ServerProcess(tmp_path / "data", args=args, port=server.port).start()
    try:
        with restarted.client("admin") as client:
            r = client.get("/api/v1/clusters")
            present = {c["name"] for c in r.json()["items"]}
        missing = [n for n in written if n not in present]
        assert not missing, f"{len(missing)} acknowledged writes lost, e.g. {missing[:5]}"
    finally:
        restarted.stop()


KILLS = 20


@pytest.mark.parametrize("backend", ["sqlite", "etcd"])
def test_sigkill_loop_keeps_acknowledged_writes_whole_and_audited(tmp_path: Path, backend: str,
                                                                  request: pytest.FixtureRequest) -> None:
    """Twenty SIGKILLs during concurrent writes: after each restart every acknowledged write is there,
    no object is torn, and the audit log agrees with the store (acknowledged ⊆ audited ⊆ stored)."""
    args: list[str] = []
    if backend == "etcd":
        endpoint = request.getfixturevalue("etcd_endpoint")
        args = ["--store", f"etcd://{endpoint}"]
        wipe(endpoint)  # the session's etcd is shared: other tests' objects, sealed with their keyrings
    acked: list[str] = []
    port = None
    token = None
    for kill in range(KILLS):
        server = ServerProcess(tmp_path / "data", args=args, port=port).start()
        port = server.port
        token = token or server.token("admin")  # the data dir's key: a token outlives the restarts
        per: list[list[str]] = [[] for _ in range(3)]
        stop = threading.Event()
        threads = [threading.Thread(target=_writer, args=(server, token, f"k{kill}-w{k}", per[k], stop))
                   for k in range(3)]
        for t in threads:
            t.start()
        wait_until(lambda: sum(map(len, per)) >= 10, 60, "10 acknowledged writes")  # noqa: B023
        server.kill()
        stop.set()
        for t in threads:
            t.join(10)
        acked += [n for p in per for n in p]

    with ServerProcess(tmp_path / "data", args=args, port=port) as server, server.client() as c:
        items = c.get("/api/v1/clusters").json()["items"]
        stored = {i["name"] for i in items}
        for i in items:  # whole objects: the label written with the name is there
            assert i["region"] == "r" and i["labels"]["n"] == i["name"].rsplit("-", 1)[1], i
        audit = c.get("/api/v1/audit", params={"kind": "Cluster", "limit": 100_000}).json()["items"]
        # this test's writes only: the session's etcd (and its audit log) holds other tests' too
        audited = {ch["name"] for e in audit if e["result"] == 201 for ch in e["changes"]
                   if re.fullmatch(r"k\d+-w\d+-\d+", ch["name"])}
    missing = [n for n in acked if n not in stored]
    assert not missing, f"{len(missing)} acknowledged writes lost, e.g. {missing[:5]}"
    assert set(acked) <= audited, sorted(set(acked) - audited)[:5]
    assert audited <= stored, sorted(audited - stored)[:5]
    assert len(acked) >= KILLS * 10
