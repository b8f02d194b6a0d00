"""``drods scheduler``: the scheduler (and resource detector) as its own process (A2, A6).

Several may run against one store: they elect a leader on the store lease ``/leases/scheduler``
and only the leader decides (its status writes are fenced on the lease), the others keep a warm
snapshot and take over within the lease TTL when the leader dies. The process also serves
``/healthz``, ``/readyz``, ``/metrics`` (Karmada-named scheduler metrics) and
``/api/v1/scheduler`` on ``--host``/``--port`` (``--port 0`` serves nothing).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
from collections.abc import AsyncIterator
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

if TYPE_CHECKING:
    from drods.scheduler.profile import Profile
    from drods.scheduler.service import SchedulerSettings

DEFAULT_DATA_DIR = Path(os.environ.get("DRODS_DATA_DIR", str(Path.home() / ".drods")))


def scheduler(
    store: Annotated[str | None, typer.Option("--store", help="sqlite:///PATH or etcd://HOST:PORT[,HOST:PORT…]")]
    = None,
    data_dir: Annotated[Path, typer.Option("--data-dir", help="Keys (shared with the API servers), default store.")]
    = DEFAULT_DATA_DIR,
    profile: Annotated[Path | None, typer.Option(
        "--profile", help="Scheduler profile YAML (default: $DRODS_SCHEDULER_PROFILE, else "
                          "DATA_DIR/scheduler-profile.yaml, else built-in defaults).")] = None,
    identity: Annotated[str | None, typer.Option("--id", help="Name in the leader election (default host-pid-random).")]
    = None,
    host: Annotated[str, typer.Option("--host", help="Address of /healthz, /readyz, /metrics.")] = "127.0.0.1",
    port: Annotated[int, typer.Option("--port", help="Port of /healthz, /readyz, /metrics (0: none).")] = 10351,
    lease_ttl: Annotated[int, typer.Option("--lease-ttl", help="Leader lease TTL in seconds: how fast a standby "
                                                               "takes over.")] = 10,
    tls_cert: Annotated[str | None, typer.Option("--tls-cert")] = None,
    tls_key: Annotated[str | None, typer.Option("--tls-key")] = None,
    log_level: Annotated[str, typer.Option("--log-level")] = "info",
) -> None:
    """Run only the scheduler, with leader election on a store lease."""
    from drods.scheduler.profile import ProfileError
    from drods.scheduler.service import SchedulerSettings, default_identity, load_profile
    from drods.server import default_store_url

    logging.basicConfig(level=log_level.upper(), format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    data_dir.mkdir(parents=True, exist_ok=True)
    try:
        prof = load_profile(data_dir, profile)
    except (ProfileError, OSError) as e:
        raise typer.BadParameter(str(e), param_hint="--profile") from e
    if bool(tls_cert) != bool(tls_key):
        raise typer.BadParameter("--tls-cert and --tls-key go together")
    settings = SchedulerSettings(identity=identity or default_identity(), lease_ttl=lease_ttl)
    run_scheduler(store or default_store_url(data_dir), data_dir, prof, settings, host=host, port=port,
                  tls_cert=tls_cert, tls_key=tls_key, log_level=log_level)


def run_scheduler(store_url: str, data_dir: Path, profile: Profile, settings: SchedulerSettings, *, host: str,
                  port: int,
                  tls_cert: str | None = None, tls_key: str | None = None, log_level: str = "info") -> None:
    import uvicorn
    from fastapi import FastAPI, Request
    from fastapi.responses import JSONResponse

    from drods.api.context import ApiContext
    from drods.api.routes import admin
    from drods.api.routes.schedules import router as schedules_router
    from drods.api.status import error_response
    from drods.errors import ApiError
    from drods.scheduler.reschedule import install_reschedule
    from drods.scheduler.service import SchedulerService
    from drods.server import _Server
    from drods.store import open_store

    ctx = ApiContext.build(open_store(store_url), data_dir)
    svc = SchedulerService(ctx.store, profile=profile, settings=settings, registry=ctx.registry)
    ctx.services["scheduler"] = svc
    ctx.services.setdefault("prometheus_registries", []).append(svc.metrics.registry)
    install_reschedule(ctx)
    log = logging.getLogger("drods.scheduler")

    async def supervise() -> None:
        delay = 0.5
        while True:
            try:
                await svc.run()
                return
            except asyncio.CancelledError:
                raise
            except Exception:
                log.exception("scheduler crashed; restarting in %.1fs", delay)
                await asyncio.sleep(delay)
                delay = min(delay * 2, 30.0)

    @contextlib.asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        task = asyncio.create_task(supervise(), name="scheduler")
        log.info("scheduler %s started (profile %s, lease TTL %ss)", settings.identity, profile.name,
                 settings.lease_ttl)
        try:
            yield
        finally:
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)
            await ctx.store.close()

    app = FastAPI(title="DRO-DS scheduler", lifespan=lifespan)
    app.state.ctx = ctx
    app.include_router(admin.router)
    app.include_router(schedules_router)

    @app.exception_handler(ApiError)
    async def api_error(request: Request, exc: ApiError) -> JSONResponse:
        return error_response(request.url.path, exc)

    if port == 0:
        async def headless() -> None:
            import signal

            stop = asyncio.Event()
            for sig in (signal.SIGTERM, signal.SIGINT):
                asyncio.get_running_loop().add_signal_handler(sig, stop.set)
            async with lifespan(app):
                await stop.wait()

        asyncio.run(headless())
        return
    server = _Server(uvicorn.Config(app, host=host, port=port, ssl_certfile=tls_cert, ssl_keyfile=tls_key,
                                    log_level=log_level.lower(), access_log=False, timeout_graceful_shutdown=5))
    server.run()


def register(app: typer.Typer) -> None:
    app.command("scheduler")(scheduler)
