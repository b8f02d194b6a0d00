"""An in-process API server over each store backend, and tokens of every role."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
import uvicorn

from drods.api.auth import Role
from drods.api.serving import serving_config
from drods.server import ServerConfig, build_app
from drods.store import Store
from drods.transport import async_transport


@dataclass
class Api:
    client: httpx.AsyncClient
    tokens: dict[str, str]
    app: object

    def auth(self, role: str = "admin") -> dict[str, str]:
        return {"Authorization": f"Bearer {self.tokens[role]}"}

    async def call(self, method: str, url: str, role: str = "admin", **kw: object) -> httpx.Response:
        headers = dict(kw.pop("headers", {}) or {})  # type: ignore[call-overload]
        headers.update(self.auth(role))
        return await self.client.request(method, url, headers=headers, **kw)  # type: ignore[arg-type]


@pytest.fixture
async def api(store_factory: Callable[[], Store], tmp_path: Path) -> AsyncIterator[Api]:
    store = store_factory()
    await store.delete_prefix("/")  # the etcd of the session is shared between tests
    app = build_app(ServerConfig(store_url="unused://", data_dir=tmp_path / "data"), store=store)
    ctx = app.state.ctx
    tokens = {r.value: ctx.tokens.issue(r, subject=f"test-{r.value}") for r in Role if r is not Role.CLUSTER_AGENT}
    tokens["agent-a"] = ctx.tokens.issue(Role.CLUSTER_AGENT, subject="agent-a", cluster="a")
    async with served(app, tokens) as api_:
        yield api_


@contextlib.asynccontextmanager
async def served(app: Any, tokens: dict[str, str]) -> AsyncIterator[Api]:
    """``app`` on a real HTTP server on loopback (streaming and the HTTP layer are part of what is
    tested), with a client calling it."""
    server = uvicorn.Server(serving_config(app, "127.0.0.1", 0, log_level="warning", lifespan="on"))
    task = asyncio.create_task(server.serve())
    async with asyncio.timeout(10):
        while not server.started:
            if task.done():
                task.result()
            await asyncio.sleep(0.01)
    port = server.servers[0].sockets[0].getsockname()[1]
    try:
        async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}", timeout=30,
                                     transport=async_transport()) as client:
            yield Api(client, tokens, app)
    finally:
        server.should_exit = True
        await asyncio.wait_for(task, 10)
