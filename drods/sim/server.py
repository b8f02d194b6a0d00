"""`drods sim`: one simulated member cluster in one process.

Built from the control plane's own parts — the store, the object registry, the FastAPI app with
its generic Kubernetes CRUD / watch / patch / apply routes, discovery, OpenAPI and auth — with the
Kind table of a plain Kubernetes cluster, plus what only a member has: nodes, a controller loop
(`drods.sim.controller`), ``metrics.k8s.io``, Prometheus metrics and fault injection.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import logging
import os
import shutil
import time
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import yaml
from fastapi import FastAPI, Request
from starlette.exceptions import HTTPException as StarletteHTTPException

from drods.api.app import create_app
from drods.api.auth import Role, issue_recorded
from drods.api.context import ApiContext
from drods.api.json_response import JSONResponse
from drods.api.status import kubernetes_error_response, kubernetes_status
from drods.errors import ApiError
from drods.machinery.informer import Informer
from drods.model.keys import TOKENS_PREFIX
from drods.model.kinds import CUSTOM_RESOURCE_DEFINITION
from drods.registry.objects import decode_stored
from drods.security.files import make_private
from drods.security.tls import Certs, ensure_certs
from drods.security.tokens import decode_record
from drods.security.tokens import revocations as followed_revocations
from drods.sim.config import SimConfig
from drods.sim.control import ControlServer, state_path, write_state
from drods.sim.controller import SimController
from drods.sim.distance import DistanceMiddleware, DistanceTable, parse_latency_to
from drods.sim.faults import MODES, FaultMiddleware, FaultState, HttpListener
from drods.sim.kinds import SIM_KINDS
from drods.sim.prom import sim_registry
from drods.sim.registry import SimRegistry
from drods.sim.routes import sim_routers
from drods.sim.stats_summary import stats_summary_router
from drods.sim.stop_signals import ignore_stop_signals, on_stop_signal
from drods.sim.traffic import TrafficMeter
from drods.sim.usage import LoadTable
from drods.store import Store
from drods.store.sqlite import SqliteStore

log = logging.getLogger("drods.sim")
STORE_TICK = 0.5  # seconds between the sim store's looks for another process's writes (and lease sweeps)
# Each connection's page cache (SQLite's default: 2 MiB). A member's store has up to four connections
# and a fleet holds a hundred members (100 members, 10,000 workloads: the fleet peaked at 998 MiB with
# the default, 809 with 256 KiB; 30,000 workloads: 1,031 MiB with 256, 1,016.5 with 128); the pages stay
# in the OS's cache, so a miss here is a copy, not a read.
STORE_CACHE_KIB = 128


def last_port(kubeconfig_path: Path) -> int | None:
    """The port of the server a kubeconfig written by an earlier start names (None: none written)."""
    try:
        doc = yaml.safe_load(kubeconfig_path.read_text())
        return urlsplit(str(doc["clusters"][0]["cluster"]["server"])).port
    except (OSError, ValueError, yaml.YAMLError, KeyError, IndexError, TypeError):
        return None


def _kubernetes_errors(app: FastAPI) -> None:
    """Every error as a Kubernetes ``Status`` (a member speaks only the Kubernetes dialect)."""

    @app.exception_handler(ApiError)
    async def api_error(request: Request, exc: ApiError) -> JSONResponse:
        return kubernetes_error_response(exc, request.url.path)

    @app.exception_handler(StarletteHTTPException)
    async def http_error(request: Request, exc: StarletteHTTPException) -> JSONResponse:
        message = "the server could not find the requested resource" if exc.status_code == 404 else str(exc.detail)
        err = ApiError(exc.status_code, "NOT_FOUND" if exc.status_code == 404 else "HTTP_ERROR", message, {})
        return JSONResponse(kubernetes_status(err), status_code=exc.status_code)


def kubeconfig(name: str, server: str, token: str, ca_pem: bytes | None) -> dict[str, Any]:
    cluster: dict[str, Any] = {"server": server}
    if ca_pem is not None:
        cluster["certificate-authority-data"] = base64.b64encode(ca_pem).decode()
    return {
        "apiVersion": "v1", "kind": "Config", "current-context": name, "preferences": {},
        "clusters": [{"name": name, "cluster": cluster}],
        "users": [{"name": f"{name}-admin", "user": {"token": token}}],
        "contexts": [{"name": name, "context": {"cluster": name, "user": f"{name}-admin", "namespace": "default"}}],
    }


class SimServer:
    def __init__(self, cfg: SimConfig, *, fresh: bool = False) -> None:
        self.cfg = cfg
        self.fresh = fresh
        self.fault = FaultState()
        self.distance = DistanceTable(dict(cfg.latency_to))
        self.loads = LoadTable()
        self.traffic_demand = LoadTable()
        self.traffic = TrafficMeter()
        self.started_at = time.time()
        self.server_url = ""
        self.kubeconfig_path: Path | None = None
        self.token = ""
        self.controller: SimController
        self._store: Store | None = None
        self._listener: HttpListener | None = None
        self._control: ControlServer | None = None
        self._task: asyncio.Task[None] | None = None
        self._definitions: asyncio.Task[None] | None = None
        self._revocations: asyncio.Task[None] | None = None

    async def start(self) -> None:
        cfg = self.cfg
        data = cfg.data_path
        if self.fresh and (data / "sim.db").exists():
            for f in data.glob("sim.db*"):
                f.unlink()
        make_private(data)  # its store holds what was applied to it, Secrets included, and its keys
        # others write it only to revoke a token: noticed within a second, without a fleet of sims
        # waking a thousand times a second to look
        self._store = SqliteStore(str((data / "sim.db").resolve()), tick=STORE_TICK,
                                  cache_kib=STORE_CACHE_KIB)
        ctx = ApiContext.build(self._store, data, kinds=SIM_KINDS)
        ctx.registry = SimRegistry(ctx.store, ctx.registry.secrets, ctx.registry.admission)
        assert isinstance(ctx.registry, SimRegistry)
        self.controller = SimController(ctx.registry, ctx.store, cfg)
        definitions = Informer(self._store, CUSTOM_RESOURCE_DEFINITION.key_prefix(), decode_stored)
        definitions.on_change(ctx.catalog.learn)  # the custom kinds of the definitions it holds
        self._definitions = asyncio.create_task(definitions.run(), name=f"sim-{cfg.name}-definitions")
        await definitions.wait_synced()
        # The sim's tokens are its own (signed with its key, accepted by it alone): recorded in its
        # store, where `drods token list/revoke --store sqlite:///DATA/sim.db` reach them.
        revocations = Informer(self._store, TOKENS_PREFIX, decode_record)
        revocations.on_change(followed_revocations(ctx.tokens))
        self._revocations = asyncio.create_task(revocations.run(), name=f"sim-{cfg.name}-revocations")
        await revocations.wait_synced()
        await self.controller.bootstrap()
        await self.controller.start_informer()
        await self.controller.reconcile_once()
        ctx.prometheus_registries.append(sim_registry(self))
        app = create_app(ctx, extra_routers=[stats_summary_router(), *sim_routers(SIM_KINDS)], flat_api=False,
                         audited=False)
        app.state.sim = self
        _kubernetes_errors(app)
        app.add_middleware(DistanceMiddleware, table=self.distance)
        app.add_middleware(FaultMiddleware, fault=self.fault)
        certs = ensure_certs(data, f"drods-sim-{cfg.name}", cfg.host) if cfg.tls else None
        self._listener = await self._listen(app, certs)
        host = "127.0.0.1" if cfg.host in ("0.0.0.0", "") else ("[::1]" if cfg.host == "::" else cfg.host)
        self.server_url = f"{'https' if certs else 'http'}://{host}:{self._listener.port}"
        self.token = await issue_recorded(ctx.tokens, self._store, Role.ADMIN, subject=f"sim:{cfg.name}",
                                          ttl_seconds=None)
        self.kubeconfig_path = cfg.kubeconfig_out or data / "kubeconfig"
        doc = kubeconfig(cfg.name, self.server_url, self.token, certs.ca.read_bytes() if certs else None)
        self.kubeconfig_path.parent.mkdir(parents=True, exist_ok=True)
        tmp = self.kubeconfig_path.with_suffix(".tmp")
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w") as out:
            yaml.safe_dump(doc, out, sort_keys=False)
        os.replace(tmp, self.kubeconfig_path)
        self._task = asyncio.create_task(self.controller.run(), name=f"sim-{cfg.name}")
        self._control = ControlServer(self._command, self.cfg.control_port)
        await self._control.start()
        self._write_state()  # last: its presence means "ready"

    async def _listen(self, app: FastAPI, certs: Certs | None) -> HttpListener:
        """On the port asked for; asked for any (0), on the port of the last start over the same data
        when it is free, so that a member restarted keeps the endpoint the control plane registered."""
        cfg = self.cfg
        last = None if cfg.port or self.fresh else last_port(cfg.kubeconfig_out or cfg.data_path / "kubeconfig")
        if last:
            listener = HttpListener(app, cfg.host, last, certs)
            try:
                await listener.up()
                return listener
            except OSError as e:
                log.warning("sim %s: port %d of its last start is not free (%s); serving on another, "
                            "so its registration needs the new endpoint", cfg.name, last, e)
        listener = HttpListener(app, cfg.host, cfg.port, certs)
        await listener.up()
        return listener

    def _write_state(self) -> None:
        assert self._control is not None and self._listener is not None
        write_state(state_path(self.cfg.state_dir, self.cfg.name), {
            "name": self.cfg.name, "pid": os.getpid(), "server": self.server_url, "port": self._listener.port,
            "kubeconfig": str(self.kubeconfig_path), "dataDir": str(self.cfg.data_path),
            "controlPort": self._control.port, "controlToken": self._control.token,
            "nodes": self.cfg.node_count, "fault": self.fault.describe(), "startedAt": self.started_at,
        })

    async def set_fault(self, mode: str, delay_ms: int = 0) -> None:
        if mode not in MODES:
            raise ValueError(f"fault must be one of {', '.join(MODES)}")
        if mode == "slow" and delay_ms <= 0:
            raise ValueError("slow needs a positive delay in milliseconds")
        assert self._listener is not None
        if mode == "down":
            self.fault.set("down")  # also releases requests held by a partition: their connections reset
            await self._listener.down()
        else:
            await self._listener.up()
            self.fault.set(mode, delay_ms)  # type: ignore[arg-type]
        log.warning("sim %s: fault %s%s", self.cfg.name, mode, f" {delay_ms}ms" if mode == "slow" else "")
        self._write_state()

    async def _command(self, request: dict[str, Any]) -> dict[str, Any]:
        action = request.get("action")
        if action == "fault":
            await self.set_fault(str(request.get("mode")), int(request.get("ms") or 0))
        elif action in ("load", "traffic"):
            self._set_demand(request, "cpu" if action == "load" else "mbps")
        elif action == "latency":
            self._set_latency(request)
        elif action != "status":
            raise ValueError(f"unknown action {action!r}")
        return {"fault": self.fault.describe(), "server": self.server_url, "passes": self.controller.passes,
                "loads": self.loads.describe(), "traffic": self.traffic_demand.describe("mbps"),
                "latencyTo": self.distance.describe()}

    def _set_latency(self, request: dict[str, Any]) -> None:
        """``{"action": "latency", "spec": "DFW=70±3,loss=0.01"}`` sets a link; ``{"clear": "DFW"}`` removes it."""
        if isinstance(request.get("clear"), str):
            self.distance.set(request["clear"], None)
            return
        target, link = parse_latency_to(str(request.get("spec") or ""))
        self.distance.set(target, link)
        log.warning("sim %s: latency to %s %s", self.cfg.name, target, link.describe())

    def _set_demand(self, request: dict[str, Any], unit: str) -> None:
        """A workload's CPU demand (cores, ``load``) or network demand (Mbps, ``traffic``); null clears it."""
        value = request.get(unit)
        if value is not None and (isinstance(value, bool) or not isinstance(value, int | float)):
            raise ValueError(f"{unit} must be a number, or null to clear")
        if not all(isinstance(request.get(k), str) and request[k] for k in ("namespace", "kind", "name")):
            raise ValueError(f"{request.get('action')} needs namespace, kind and name")
        table = self.loads if unit == "cpu" else self.traffic_demand
        table.set(request["namespace"], request["kind"], request["name"], None if value is None else float(value))
        log.warning("sim %s: %s %s/%s/%s %s=%s", self.cfg.name, request.get("action"), request["kind"],
                    request["namespace"], request["name"], unit, value)

    async def stop(self) -> None:
        with contextlib.suppress(FileNotFoundError):
            state_path(self.cfg.state_dir, self.cfg.name).unlink()
        if self._control is not None:
            await self._control.close()
        self.fault.set("up")
        if self._listener is not None:
            await self._listener.down(graceful=True)
        for informer in (self._definitions, self._revocations):
            if informer is not None:
                informer.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await informer
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
        if self._store is not None:
            await self._store.close()


async def serve(cfg: SimConfig, *, fresh: bool = False, ready: asyncio.Event | None = None) -> None:
    """Run one sim in the foreground until SIGTERM/SIGINT, then stop cleanly.

    The handlers stay installed while it stops: a second signal (a process-group kill, then
    ``drods dev`` stopping its members) must not cut the stop short and leave the state file behind."""
    sim = SimServer(cfg, fresh=fresh)
    loop = asyncio.get_running_loop()
    stop = on_stop_signal(loop)
    try:
        await sim.start()
        log.info("sim %s serving %s (%d nodes); kubeconfig %s", cfg.name, sim.server_url, cfg.node_count,
                 sim.kubeconfig_path)
        if ready is not None:
            ready.set()
        await stop.wait()
    finally:
        try:
            await sim.stop()
        finally:
            ignore_stop_signals()


def remove_data(cfg: SimConfig) -> None:
    shutil.rmtree(cfg.data_path, ignore_errors=True)
