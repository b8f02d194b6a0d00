"""Serves a process's API server with its components (`drods.assembly`)."""

from __future__ import annotations

import contextlib
import logging
import os
import socket
import sys
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path

import uvicorn
from fastapi import FastAPI

from drods.api.app import create_app
from drods.api.serving import serving_config
from drods.assembly import APISERVER, Component, ComponentSettings, assemble
from drods.machinery.eventloop import favour_event_loop
from drods.machinery.memory import tune_for_serving
from drods.security.files import make_private
from drods.security.tls import ensure_certs
from drods.security.trust import SERVER_TLS_DIR
from drods.store import Store, open_store, record_served_store

log = logging.getLogger("drods")


@dataclass
class ServerConfig:
    store_url: str
    data_dir: Path
    host: str = "127.0.0.1"
    port: int = 8080
    tls_cert: str | None = None
    tls_key: str | None = None
    insecure_http: bool = False
    tls_sans: tuple[str, ...] = ()
    components: frozenset[Component] = APISERVER
    settings: ComponentSettings = field(default_factory=ComponentSettings)
    jwks_url: str | None = None
    rs256_public_key: str | None = None


def build_app(config: ServerConfig, store: Store | None = None) -> FastAPI:
    """The API server of a process assembled from ``config.components`` (its plane is
    ``app.state.plane``); the components start and stop with the app."""
    config.data_dir.mkdir(parents=True, exist_ok=True)
    plane = assemble(store or open_store(config.store_url), config.data_dir, config.components,
                     settings=config.settings, jwks_url=config.jwks_url,
                     rs256_public_key=config.rs256_public_key)

    @contextlib.asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        async with plane.running():
            yield

    app = create_app(plane.context, lifespan=lifespan)
    app.state.plane = plane
    return app


class _Server(uvicorn.Server):
    """Exit status 0 after a graceful stop on SIGTERM/SIGINT (uvicorn re-raises the signal instead),
    open watches ended at once on stop; memory management tuned for serving (`tune_for_serving`) and the
    event loop's thread favoured for the interpreter lock (`favour_event_loop`).

    Once stopped — the components ended, the store closed, every acknowledged write on disk — the
    process ends at once instead of letting the interpreter take its heap apart object by object:
    with 30,000 workloads' caches (~1.1 GiB) that took longer than the 15 s a supervisor waits after
    SIGTERM (a Kubernetes pod's grace period is 30 s), with nothing left to do."""

    def run(self, sockets: list[socket.socket] | None = None) -> None:
        tune_for_serving()
        favour_event_loop()
        super().run(sockets)
        if self.started:  # a start that failed ends as the interpreter ends: its error is reported
            logging.shutdown()
            for stream in (sys.stdout, sys.stderr):
                with contextlib.suppress(Exception):
                    stream.flush()
            os._exit(0)

    def handle_exit(self, sig: int, frame: object) -> None:
        super().handle_exit(sig, frame)  # type: ignore[arg-type]
        self._captured_signals.clear()

    async def shutdown(self, sockets: list[socket.socket] | None = None) -> None:
        # Watches (kubectl -w, agents, realtime views) end now, so the graceful period is not spent
        # waiting for streams that never end on their own.
        ctx = getattr(getattr(self.config.app, "state", None), "ctx", None)
        if ctx is not None:
            ctx.stopping.set()
        await super().shutdown(sockets)


def serving_certs(config: ServerConfig) -> tuple[str, str] | None:
    """(certificate, key) to serve with: the ones given, else the data dir's own CA-signed pair
    (made on first start, re-issued when ``--host`` or ``--tls-san`` add a name); None for plain HTTP."""
    if config.insecure_http:
        return None
    if config.tls_cert and config.tls_key:
        return config.tls_cert, config.tls_key
    certs = ensure_certs(config.data_dir / SERVER_TLS_DIR, "drods", config.host, config.tls_sans)
    return str(certs.cert), str(certs.key)


def run(config: ServerConfig) -> None:
    """Serve in the foreground until SIGTERM/SIGINT, then stop cleanly."""
    # one line shape for every process (`drods scheduler`, `controllers`, `agent`, `sim` log so): a time and a
    # level on each line, uvicorn's own among them, so an API server's log lines up with the others'
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    make_private(config.data_dir)
    record_served_store(config.data_dir, config.store_url)  # `drods token …` with this data dir writes there
    tls = serving_certs(config)
    app = build_app(config)
    server = _Server(serving_config(app, config.host, config.port,
                                    ssl_certfile=tls[0] if tls else None, ssl_keyfile=tls[1] if tls else None,
                                    log_level="info", log_config=None, timeout_graceful_shutdown=5))
    server.run()
