"""Property-based fuzzing of every operation of the OpenAPI document (schemathesis), bounded so the
suite stays fast: no input, however malformed, gets a 5xx; every refusal (4xx) is in the one error
shape — ``{code, message, details}``, or a Kubernetes ``Status`` on Kubernetes paths — and the server
is healthy afterwards. (The Kubernetes paths the document leaves out are fuzzed by
``tests/api/test_campaign.py`` and ``bench/fuzz.py``.)"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
import schemathesis
import uvicorn
from hypothesis import HealthCheck, settings
from schemathesis.checks import positive_data_acceptance

from drods.api.auth import Role
from drods.api.serving import serving_config
from drods.server import ServerConfig, build_app
from drods.store.sqlite import SqliteStore
from tests.api.test_campaign import _shape_ok

EXAMPLES = 15  # per operation: ~45 s of CPU for all of them


class _ServerThread:
    def __init__(self, data_dir: Path) -> None:
        self.app = build_app(ServerConfig(store_url="unused://", data_dir=data_dir),
                             store=SqliteStore(str(data_dir / "drods.db")))
        self.server = uvicorn.Server(serving_config(self.app, "127.0.0.1", 0, log_level="warning"))
        self.thread = threading.Thread(target=lambda: asyncio.run(self.server.serve()), daemon=True)

    def __enter__(self) -> str:
        self.thread.start()
        deadline = 10.0
        while not self.server.started and deadline > 0:
            self.thread.join(0.05)
            deadline -= 0.05
        assert self.server.started, "API server did not start"
        port = self.server.servers[0].sockets[0].getsockname()[1]
        return f"http://127.0.0.1:{port}"

    def __exit__(self, *exc: object) -> None:
        self.server.should_exit = True
        self.thread.join(10)


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, str]]:
    srv = _ServerThread(tmp_path_factory.mktemp("schemathesis"))
    with srv as url:
        token = srv.app.state.ctx.tokens.issue(Role.ADMIN, subject="fuzzer")
        yield url, token


schema = schemathesis.pytest.from_fixture("openapi_schema")


@pytest.fixture(scope="module")
def openapi_schema(served: tuple[str, str]) -> schemathesis.BaseSchema:
    url, _ = served
    return schemathesis.openapi.from_url(f"{url}/openapi.json")


@schema.parametrize()
@settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=list(HealthCheck))
def test_no_server_errors(case: schemathesis.Case, served: tuple[str, str]) -> None:
    _, token = served
    # Every check but positive-data acceptance: the schema cannot say that a cluster must exist
    # before it reports, or that label keys follow Kubernetes' syntax, so schema-valid input may
    # rightly get a 404/422 — those answers are still checked for shape below.
    if case.query and str(case.query.get("watch")).lower() in ("true", "1"):
        case.query["timeoutSeconds"] = 1  # a watch streams until its timeout, by design
    response = case.call(headers={"Authorization": f"Bearer {token}"})
    case.validate_response(response, excluded_checks=[positive_data_acceptance])
    assert response.status_code < 500, response.text[:500]
    media = response.headers.get("content-type") or [""]  # schemathesis: each header a list of values
    if response.status_code >= 400 and media[0].startswith("application/json"):
        assert _shape_ok(response.json()), f"{response.status_code} not in the error shape: {response.text[:500]}"


def test_every_operation_is_fuzzed(openapi_schema: schemathesis.BaseSchema) -> None:
    """The parametrised test above covers the whole document: no operation fails to load."""
    ops = [op.ok() for op in openapi_schema.get_all_operations()]
    assert len(ops) >= 50, len(ops)


def test_healthy_after(served: tuple[str, str]) -> None:
    """Runs after the fuzzing (same module-scoped server): it still answers, ready."""
    url, token = served
    for path in ("/healthz", "/readyz", "/api/v1/clusters"):
        assert httpx.get(url + path, headers={"Authorization": f"Bearer {token}"}, timeout=5).status_code == 200
