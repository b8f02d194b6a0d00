"""The test harness's own promise: a port taken between ``free_port()`` and the server's bind (by
another test server, or an outgoing connection's ephemeral port) costs a retry, not a failed run."""

from __future__ import annotations

import socket
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests import server_process
from tests.server_process import PortTaken, ServerProcess


@pytest.fixture
def taken_port() -> Iterator[int]:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        yield int(s.getsockname()[1])


def test_a_port_taken_before_the_bind_is_replaced_by_another(tmp_path: Path, taken_port: int,
                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    ports = iter([taken_port])
    real = server_process.free_port
    monkeypatch.setattr(server_process, "free_port", lambda: next(ports, None) or real())
    with ServerProcess(tmp_path, tls=False) as server:
        assert server.port != taken_port
        assert httpx.get(f"{server.url}/readyz", timeout=5).status_code == 200
    assert f", {taken_port}): address already in use" in server.log_path.read_text()


def test_a_port_the_caller_chose_is_not_replaced(tmp_path: Path, taken_port: int) -> None:
    server = ServerProcess(tmp_path, tls=False, port=taken_port)
    with pytest.raises(PortTaken):
        server.start()
    assert server.port == taken_port
