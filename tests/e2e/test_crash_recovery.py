"""A SIGKILL at any moment loses no acknowledged write; the restarted server serves them all."""

from __future__ import annotations

import threading
from pathlib import Path

import httpx
import pytest

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
        args = ["--store", f"etcd://{request.getfixturevalue('etcd_endpoint')}"]
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
