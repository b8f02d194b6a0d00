"""``drods scheduler`` and ``drods controllers``: subsets of the control plane as their own
processes (A2, A3, A6), against the store the API servers use (etcd for several processes).

Several of each may run: single-active components elect a leader per store lease and write only
while they lead (fenced writes), the others keep warm caches and take over within the lease TTL.
Each process serves ``/healthz``, ``/readyz`` and ``/metrics`` on ``--host``/``--port`` (``--port 0``
serves nothing); the scheduler also serves ``/api/v1/scheduler`` and the schedule history.
"""

from __future__ import annotations

import asyncio
import logging
import os
import signal
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from drods.api.serving import serving_config
from drods.cli.config import ConfigOpt, checked_serving_pair, checked_store_url, component_settings

if TYPE_CHECKING:
    from drods.assembly import Component, ComponentSettings

DEFAULT_DATA_DIR = Path(os.environ.get("DRODS_DATA_DIR", str(Path.home() / ".drods")))

StoreOpt = Annotated[str | None, typer.Option("--store", callback=checked_store_url, help="sqlite:///PATH or etcd://HOST:PORT[,HOST:PORT…]")]
DataDirOpt = Annotated[Path, typer.Option("--data-dir", envvar="DRODS_DATA_DIR",
                                          help="Keys (shared with the API servers), default store.")]
IdOpt = Annotated[str | None, typer.Option("--id", help="Name in the leader elections (default host-pid-random).")]
HostOpt = Annotated[str, typer.Option("--host", help="Address of /healthz, /readyz, /metrics.")]
LeaseOpt = Annotated[int, typer.Option("--lease-ttl", help="Leader lease TTL in seconds: how fast a standby "
                                                           "takes over.")]
CertOpt = Annotated[str | None, typer.Option("--tls-cert")]
KeyOpt = Annotated[str | None, typer.Option("--tls-key")]
LogOpt = Annotated[str, typer.Option("--log-level")]


def scheduler(
    store: StoreOpt = None,
    data_dir: DataDirOpt = DEFAULT_DATA_DIR,
    config_file: ConfigOpt = None,
    profile: Annotated[Path | None, typer.Option(
        "--profile", help="Deprecated: scheduler profile YAML, read as scheduler.profile of the configuration "
                          "file (which wins where both set a key).")] = None,
    identity: IdOpt = None,
    host: HostOpt = "127.0.0.1",
    port: Annotated[int, typer.Option("--port", help="Port of /healthz, /readyz, /metrics (0: none).")] = 10351,
    lease_ttl: LeaseOpt = 10,
    tls_cert: CertOpt = None,
    tls_key: KeyOpt = None,
    log_level: LogOpt = "info",
) -> None:
    """Run only the scheduler, with leader election on a store lease."""
    from drods.assembly import SCHEDULER

    settings = component_settings(config_file, data_dir, profile=profile, identity=identity, lease_ttl=lease_ttl)
    run_process("scheduler", SCHEDULER, store, data_dir, settings, host=host, port=port, tls_cert=tls_cert,
                tls_key=tls_key, log_level=log_level)


def controllers(
    store: StoreOpt = None,
    data_dir: DataDirOpt = DEFAULT_DATA_DIR,
    config_file: ConfigOpt = None,
    identity: IdOpt = None,
    host: HostOpt = "127.0.0.1",
    port: Annotated[int, typer.Option("--port", help="Port of /healthz, /readyz, /metrics (0: none).")] = 10352,
    lease_ttl: LeaseOpt = 10,
    tls_cert: CertOpt = None,
    tls_key: KeyOpt = None,
    log_level: LogOpt = "info",
    history_prometheus: Annotated[str | None, typer.Option(
        "--history-prometheus", help="Metric history in this Prometheus (as the API servers'); pulled reports "
                                     "are recorded there and forecasts read from it.")] = None,
) -> None:
    """Run the controller manager: resource detector, member controllers (propagation, status,
    health, failover, cleanup), monitoring collectors, descheduler, autoscaler, traffic steering,
    migration plans, store compactor."""
    from drods.assembly import CONTROLLERS

    settings = component_settings(config_file, data_dir, identity=identity, lease_ttl=lease_ttl,
                                  history_prometheus=history_prometheus)
    run_process("controllers", CONTROLLERS, store, data_dir, settings, host=host, port=port, tls_cert=tls_cert,
                tls_key=tls_key, log_level=log_level)


def run_process(name: str, components: frozenset[Component], store_url: str | None, data_dir: Path,
                settings: ComponentSettings, *, host: str, port: int, tls_cert: str | None = None,
                tls_key: str | None = None, log_level: str = "info") -> None:
    from fastapi import Depends, FastAPI, Request

    from drods.api.access import enforce
    from drods.api.json_response import JSONResponse
    from drods.api.routes import admin
    from drods.api.routes.schedules import router as schedules_router
    from drods.api.status import error_response
    from drods.assembly import Component, assemble
    from drods.errors import ApiError
    from drods.machinery import eventloop
    from drods.machinery.memory import tune_for_serving
    from drods.security.files import make_private
    from drods.server import _Server
    from drods.store import default_store_url, open_store, record_served_store

    checked_serving_pair(tls_cert, tls_key)
    logging.basicConfig(level=log_level.upper(), format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    make_private(data_dir)
    url = store_url or default_store_url(data_dir)
    record_served_store(data_dir, url)
    plane = assemble(open_store(url), data_dir, components, settings=settings)
    log = logging.getLogger(f"drods.{name}")

    def lifespan(_app: FastAPI):  # type: ignore[no-untyped-def]
        log.info("%s %s started (%s; lease TTL %ss)", name, plane.manager.identity,
                 ", ".join(sorted(c.value for c in components)), settings.lease_ttl)
        return plane.running()

    app = FastAPI(title=f"DRO-DS {name}", lifespan=lifespan, default_response_class=JSONResponse)
    app.state.ctx = plane.context
    app.state.plane = plane
    app.include_router(admin.router, dependencies=[Depends(enforce)])  # the access table decides
    if Component.SCHEDULER in components:
        app.include_router(schedules_router, dependencies=[Depends(enforce)])

    @app.exception_handler(ApiError)
    async def api_error(request: Request, exc: ApiError) -> JSONResponse:
        return error_response(request.url.path, exc)

    if port == 0:
        async def headless() -> None:
            tune_for_serving()
            eventloop.favour_event_loop()
            stop = asyncio.Event()
            for sig in (signal.SIGTERM, signal.SIGINT):
                asyncio.get_running_loop().add_signal_handler(sig, stop.set)
            async with plane.running():
                await stop.wait()

        eventloop.run(headless())
        return
    server = _Server(serving_config(app, host, port, ssl_certfile=tls_cert, ssl_keyfile=tls_key,
                                    log_level=log_level.lower(), timeout_graceful_shutdown=5))
    server.run()


def register(app: typer.Typer) -> None:
    app.command("scheduler")(scheduler)
    app.command("controllers")(controllers)
