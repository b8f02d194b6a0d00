"""SIGTERM with watches open (kubectl -w, pull-mode agents, the realtime view): the streams end at
once and the server stops cleanly, without waiting out the graceful period or cancelling requests."""

from __future__ import annotations

import threading
from pathlib import Path

import httpx

from tests.server_process import ServerProcess


def test_open_watches_end_when_the_server_stops(tmp_path: Path) -> None:
    server = ServerProcess(tmp_path / "data").start()
    headers = {"Authorization": f"Bearer {server.token('admin')}"}
    paths = ["/apis/multicluster.io/v1alpha1/clusters?watch=true",
             "/api/v1/monitor/realtime?watch=true&timeoutSeconds=600"]
    ended: dict[str, str] = {}
    opened = threading.Barrier(len(paths) + 1, timeout=30)

    def follow(path: str) -> None:
        try:
            with httpx.stream("GET", server.url + path, headers=headers, timeout=60, verify=server.verify) as r:
                opened.wait()
                for _ in r.iter_bytes():
                    pass
            ended[path] = "ended"
        except Exception as e:  # noqa: BLE001 - recorded for the assertion below
            ended[path] = f"{type(e).__name__}: {e}"

    threads = [threading.Thread(target=follow, args=(p,), daemon=True) for p in paths]
    for t in threads:
        t.start()
    opened.wait()  # both streams are open
    assert server.stop() == 0
    for t in threads:
        t.join(30)
    assert ended == {p: "ended" for p in paths}
    log = server.log_path.read_text(errors="replace")
    assert "graceful shutdown exceeded" not in log and "Traceback" not in log, server.log_tail()
    assert "Finished server process" in log  # the process ends at once after its stop, its log written out
