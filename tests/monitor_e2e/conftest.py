"""A real HTTP control plane with monitoring components, a controllable monitoring clock, helpers."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, TypeVar

import httpx
import pytest
import uvicorn

from drods.api.auth import Role
from drods.api.serving import serving_config
from drods.assembly import APISERVER, Component, ComponentSettings
from drods.model.reschedule import RescheduleHook, RescheduleRequest, RescheduleResult
from drods.monitor.collectors import Collector
from drods.monitor.service import MonitorService, MonitorSettings
from drods.server import ServerConfig, build_app
from drods.store import Store
from drods.transport import async_transport

T = TypeVar("T")


@dataclass
class Clock:
    """The monitoring clock: tests move it instead of sleeping (``live``: wall time + offset)."""

    t: float = field(default_factory=time.time)
    live: bool = False

    def __post_init__(self) -> None:
        if self.live:
            self.t = 0.0

    def __call__(self) -> float:
        return time.time() + self.t if self.live else self.t

    def advance(self, seconds: float) -> float:
        self.t += seconds
        return self.t


@dataclass
class Hook:
    """Stands in for the rescheduler: a test sets ``target`` to see the descheduler's requests."""

    target: RescheduleHook | None = None

    async def __call__(self, request: RescheduleRequest) -> RescheduleResult:
        if self.target is None:
            return RescheduleResult(False, 0, "no rescheduler in this test")
        return await self.target(request)


@dataclass
class Mon:
    client: httpx.AsyncClient
    tokens: dict[str, str]
    app: Any
    clock: Clock
    url: str
    hook: Hook | None = None

    @property
    def ctx(self) -> Any:
        return self.app.state.ctx

    @property
    def store(self) -> Store:
        return self.ctx.store  # type: ignore[no-any-return]

    @property
    def svc(self) -> MonitorService:
        return self.ctx.monitor  # type: ignore[no-any-return]

    def auth(self, role: str = "admin") -> dict[str, str]:
        return {"Authorization": f"Bearer {self.tokens[role]}"}

    async def call(self, method: str, url: str, role: str = "admin", **kw: Any) -> httpx.Response:
        headers = dict(kw.pop("headers", {}) or {})
        headers.update(self.auth(role))
        return await self.client.request(method, url, headers=headers, **kw)

    async def register(self, name: str, **spec: Any) -> None:
        r = await self.call("POST", "/api/v1/clusters", json={"name": name, **spec})
        assert r.status_code == 201, r.text

    async def report(self, cluster: str, role: str = "admin", at: float | None = None,
                     **fields: Any) -> httpx.Response:
        ts = self.clock() if at is None else at
        body = {"cluster": cluster, "timestamp": datetime.fromtimestamp(ts, UTC).isoformat(), **fields}
        return await self.call("PUT", "/api/v1/metrics", role=role, json=body)


async def eventually(check: Callable[[], Awaitable[T | None]], within_s: float = 10.0, what: str = "") -> T:
    """Poll ``check`` until it returns something truthy, or fail at the deadline (no bare sleeps)."""
    deadline = time.monotonic() + within_s
    delay = 0.01
    while True:
        got = await check()
        if got:
            return got
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {within_s}s waiting for {what or check}")
        await asyncio.sleep(delay)
        delay = min(delay * 2, 0.2)


def node_report(cpu_pct: float, *, cores: float = 64, mem_gib: float = 256, mem_used_frac: float = 0.25,
                pods: int = 100, net_in: float = 100.0, net_out: float = 50.0) -> dict[str, Any]:
    return {"cpuCapacity": cores, "cpuUsage": cpu_pct, "memoryCapacity": mem_gib,
            "memoryAvailable": mem_gib * (1 - mem_used_frac), "pods": pods, "networkIn": net_in,
            "networkOut": net_out}


@contextlib.asynccontextmanager
async def serve(store: Store, data_dir: Path, settings: MonitorSettings, clock: Clock,
                components: frozenset[Component] = frozenset(), *, collectors: list[Collector] | None = None,
                reschedule_hook: RescheduleHook | None = None) -> AsyncIterator[Mon]:
    """The API server (with monitoring) plus ``components``, monitoring on ``clock``."""
    config = ServerConfig(store_url="unused://", data_dir=data_dir, components=APISERVER | components,
                          settings=ComponentSettings(monitoring=settings, clock=clock, collectors=collectors or [],
                                                     reschedule_hook=reschedule_hook))
    app = build_app(config, store=store)
    ctx = app.state.ctx
    tokens = {r.value: ctx.tokens.issue(r, subject=f"test-{r.value}") for r in Role if r is not Role.CLUSTER_AGENT}
    tokens["agent-a"] = ctx.tokens.issue(Role.CLUSTER_AGENT, subject="agent-a", cluster="a")
    server = uvicorn.Server(serving_config(app, "127.0.0.1", 0, log_level="warning", lifespan="on"))
    task = asyncio.create_task(server.serve())
    async with asyncio.timeout(15):
        while not server.started:
            if task.done():
                task.result()
            await asyncio.sleep(0.01)
    port = server.servers[0].sockets[0].getsockname()[1]
    url = f"http://127.0.0.1:{port}"
    try:
        async with httpx.AsyncClient(base_url=url, timeout=30, transport=async_transport()) as client:
            yield Mon(client, tokens, app, clock, url,
                      reschedule_hook if isinstance(reschedule_hook, Hook) else None)
    finally:
        server.should_exit = True
        await asyncio.wait_for(task, 15)


def fast_settings(**kw: Any) -> MonitorSettings:
    base: dict[str, Any] = {"staleCheckIntervalSeconds": 0.05, "flushIntervalSeconds": 0.05,
                            "realtimeMinIntervalSeconds": 0.0, "collectIntervalSeconds": 0.5}
    return MonitorSettings.model_validate(base | kw)


@pytest.fixture
async def mon(store_factory: Callable[[], Store], tmp_path: Path) -> AsyncIterator[Mon]:
    """Monitoring over each store backend (sqlite, etcd), maintenance component running."""
    store = store_factory()
    await store.delete_prefix("/")  # the etcd of the session is shared between tests
    async with serve(store, tmp_path / "data", fast_settings(sustainedSeconds=60), Clock(),
                     frozenset({Component.DESCHEDULER}), reschedule_hook=Hook()) as m:
        yield m


@pytest.fixture
async def mon_sqlite(tmp_path: Path) -> AsyncIterator[Mon]:
    from drods.store.sqlite import SqliteStore

    async with serve(SqliteStore(str(tmp_path / "drods.db")), tmp_path / "data", fast_settings(), Clock()) as m:
        yield m


__all__ = ["Clock", "Hook", "Mon", "eventually", "fast_settings", "node_report", "serve"]
