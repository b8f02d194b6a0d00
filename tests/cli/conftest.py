"""A real ``drods serve`` for the client commands, and a runner for the real ``drods`` entry point."""

from __future__ import annotations

import subprocess
from collections.abc import Callable, Iterator

import pytest

from tests.server_process import ServerProcess

Drods = Callable[..., subprocess.CompletedProcess[str]]


@pytest.fixture(scope="session")
def cli_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    with ServerProcess(tmp_path_factory.mktemp("drods-cli")) as server:
        yield server


@pytest.fixture
def drods(cli_server: ServerProcess) -> Drods:
    """``drods(*args, role="admin", input=None)``: run the CLI against the test server (env config)."""

    def run(*args: str, role: str | None = "admin", input: str | None = None,
            env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
        environment = {"DRODS_SERVER": cli_server.url, "DRODS_TOKEN": cli_server.token(role) if role else "",
                       "COLUMNS": "250", **(env or {})}
        return cli_server.run_cli(*args, input=input, env=environment)

    return run
