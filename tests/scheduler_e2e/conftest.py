"""A real HTTP control plane with the scheduler component, over each store backend, and helpers.

Clusters are registered in pull mode and fed through ``PUT /api/v1/metrics``, as an agent (or a
user without member access) would; every wait is a deadline poll, never a bare sleep.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, TypeVar

import httpx
import pytest
import uvicorn

from drods.api.auth import Role
from drods.api.serving import serving_config
from drods.assembly import APISERVER, Component, ComponentSettings
from drods.autoscaling.controller import AutoscalerSettings
from drods.controllers.cache_planner import CachePlannerSettings
from drods.monitor.autoops import AutoOpsPolicy
from drods.monitor.service import MonitorSettings
from drods.scheduler.profile import Profile
from drods.schedulerd.service import SchedulerService, SchedulerSettings
from drods.server import ServerConfig, build_app
from drods.steering.settings import SteeringSettings
from drods.store import Store
from drods.transport import async_transport
from tests.monitor_e2e.conftest import eventually

T = TypeVar("T")


def fast_settings(**kw: Any) -> SchedulerSettings:
    base: dict[str, Any] = {"lease_ttl": 3, "sweep_seconds": 0.2, "initial_backoff": 0.05, "max_backoff": 1.0,
                            "rng_seed": 7, "assume_ttl": 3600.0}
    return SchedulerSettings(**(base | kw))


@dataclass
class Plane:
    client: httpx.AsyncClient
    tokens: dict[str, str]
    app: Any
    url: str

    @property
    def ctx(self) -> Any:
        return self.app.state.ctx

    @property
    def store(self) -> Store:
        return self.ctx.store  # type: ignore[no-any-return]

    @property
    def scheduler(self) -> SchedulerService:
        return self.ctx.scheduler  # type: ignore[no-any-return]

    async def call(self, method: str, url: str, role: str = "admin", **kw: Any) -> httpx.Response:
        headers = dict(kw.pop("headers", {}) or {})
        headers["Authorization"] = f"Bearer {self.tokens[role]}"
        return await self.client.request(method, url, headers=headers, **kw)

    async def register(self, name: str, labels: dict[str, str] | None = None, **spec: Any) -> None:
        body = {"name": name, "labels": labels or {}, "syncMode": "Pull", **spec}
        r = await self.call("POST", "/api/v1/clusters", json=body)
        assert r.status_code == 201, r.text

    async def report(self, cluster: str, cpu_pct: float, *, cores: float = 64, mem_gib: float = 256,
                     mem_pct: float = 25.0, **extra: Any) -> None:
        body = {"cluster": cluster, "timestamp": datetime.now(UTC).isoformat(), "cpuCapacity": cores,
                "cpuUsage": cpu_pct, "memoryCapacity": mem_gib, "memoryAvailable": mem_gib * (1 - mem_pct / 100),
                **extra}
        r = await self.call("PUT", "/api/v1/metrics", json=body)
        assert r.status_code == 200 and r.json()["published"], r.text

    async def cluster(self, name: str, cpu_pct: float, labels: dict[str, str] | None = None, *,
                      report: dict[str, Any] | None = None, **spec: Any) -> None:
        await self.register(name, labels, **spec)
        await self.report(name, cpu_pct, **(report or {}))

    async def seen(self, *clusters: str) -> None:
        """Wait until the (in-process) scheduler's snapshot has these clusters with their status."""
        snap = self.scheduler.cache.snap

        async def ok() -> bool:
            return all(c in snap and bool(snap.has_status[snap.index[c]]) for c in clusters)

        await eventually(ok, what=f"scheduler to see {clusters}")

    async def bind(self, body: dict[str, Any], expect: int = 202) -> dict[str, Any]:
        r = await self.call("POST", "/api/v1/bindings", json=body)
        assert r.status_code == expect, r.text
        return r.json()  # type: ignore[no-any-return]

    async def place(self, body: dict[str, Any], within_s: float = 15.0) -> dict[str, Any]:
        """Submit a binding and return its status once decided."""
        return await self.decided((await self.bind(body))["id"], within_s)

    async def status(self, binding_id: str) -> dict[str, Any]:
        r = await self.call("GET", f"/api/v1/bindings/{binding_id}/status")
        assert r.status_code == 200, r.text
        return r.json()  # type: ignore[no-any-return]

    async def try_status(self, binding_id: str) -> dict[str, Any] | None:
        """The status, or None while the binding does not exist (yet)."""
        r = await self.call("GET", f"/api/v1/bindings/{binding_id}/status")
        if r.status_code == 404:
            return None
        assert r.status_code == 200, r.text
        return r.json()  # type: ignore[no-any-return]

    async def decided(self, binding_id: str, within_s: float = 15.0) -> dict[str, Any]:
        """The status once the scheduler has decided the binding's current generation."""

        async def done() -> dict[str, Any] | None:
            st = await self.try_status(binding_id)
            current = st is not None and st["scheduledGeneration"] == st["generation"] and st["phase"] != "Pending"
            return st if current else None

        return await eventually(done, within_s, f"a decision for {binding_id}")


def placement(st: dict[str, Any]) -> dict[str, int]:
    return {p["cluster"]: p["replicas"] for p in st["placement"]}


@contextlib.asynccontextmanager
async def serve(store: Store, data_dir: Path, *, settings: SchedulerSettings | None = None,
                profile: Profile | None = None, scheduler: bool = True,
                components: frozenset[Component] = frozenset(),
                monitoring: MonitorSettings | None = None, autoops: AutoOpsPolicy | None = None,
                steering: SteeringSettings | None = None, autoscaling: AutoscalerSettings | None = None,
                datasets: CachePlannerSettings | None = None,
                clock: Callable[[], float] = time.time) -> AsyncIterator[Plane]:
    """The API server, with the scheduler and the resource detector unless ``scheduler=False`` (then
    they run elsewhere), plus ``components``."""
    run = APISERVER | components | (frozenset({Component.SCHEDULER, Component.DETECTOR}) if scheduler else frozenset())
    sched = settings or fast_settings()
    config = ServerConfig(store_url="unused://", data_dir=data_dir, components=run,
                          settings=ComponentSettings(scheduler=sched, profile=profile, monitoring=monitoring,
                                                     autoops=autoops, steering=steering, clock=clock,
                                                     lease_ttl=sched.lease_ttl,
                                                     autoscaling=autoscaling or AutoscalerSettings(),
                                                     datasets=datasets or CachePlannerSettings()))
    app = build_app(config, store=store)
    ctx = app.state.ctx
    tokens = {r.value: ctx.tokens.issue(r, subject=f"test-{r.value}") for r in Role if r is not Role.CLUSTER_AGENT}
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
            plane = Plane(client, tokens, app, url)
            if scheduler:
                await eventually(lambda: _ready(plane), what="the scheduler to sync and lead")
            yield plane
    finally:
        server.should_exit = True
        await asyncio.wait_for(task, 15)


async def _ready(plane: Plane) -> bool:
    svc = plane.ctx.scheduler
    detector = plane.app.state.plane.manager.fence("resource-detector")
    return svc is not None and svc.ready.is_set() and svc.is_leader and detector is not None


@pytest.fixture
async def plane(store_factory: Callable[[], Store], tmp_path: Path) -> AsyncIterator[Plane]:
    """The control plane with its scheduler over each backend (sqlite, etcd)."""
    store = store_factory()
    await store.delete_prefix("/")  # the etcd of the session is shared between tests
    async with serve(store, tmp_path / "data") as p:
        yield p


__all__ = ["Plane", "eventually", "fast_settings", "placement", "serve"]
