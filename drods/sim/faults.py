"""Fault injection: what a sick member cluster looks like to a client.

* ``down`` — the process is there but nothing listens: new connections are refused and open ones
  (keep-alive, watches) are reset. That is what a client sees when an API server dies.
* ``partition`` — connections are accepted (the kernel completes the handshake) but no request is
  answered: clients hit their read timeouts, as with a network partition. Pods keep running.
* ``slow MS`` — every request is answered MS milliseconds late.
* ``up`` — normal service.

``down`` is done on the listening socket (a uvicorn server started and stopped on the sim's port);
``slow`` and ``partition`` by an ASGI middleware in front of the app.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import socket
from dataclasses import dataclass
from typing import Any, Literal

import uvicorn
from starlette.requests import ClientDisconnect
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from drods.api.serving import serving_config
from drods.security.tls import Certs

log = logging.getLogger("drods.sim")


class _CancelledByFault(logging.Filter):
    """A fault cancels the requests in flight (or cuts their clients off) on purpose: uvicorn's "Exception in
    ASGI application" with a CancelledError or ClientDisconnect traceback is then no error of the application
    (five of them per `sim fault down`)."""

    def filter(self, record: logging.LogRecord) -> bool:
        return not (record.exc_info is not None
                    and isinstance(record.exc_info[1], asyncio.CancelledError | ClientDisconnect))


_CANCELLED_BY_FAULT = _CancelledByFault()
Mode = Literal["up", "down", "slow", "partition"]
MODES: tuple[str, ...] = ("up", "down", "slow", "partition")


@dataclass
class FaultState:
    mode: Mode = "up"
    delay_ms: int = 0

    def __post_init__(self) -> None:
        self._healed = asyncio.Event()
        self._healed.set()

    def set(self, mode: Mode, delay_ms: int = 0) -> None:
        self.mode = mode
        self.delay_ms = delay_ms if mode == "slow" else 0
        if mode == "partition":
            self._healed.clear()
        else:
            self._healed.set()

    async def wait_healed(self) -> None:
        await self._healed.wait()

    def describe(self) -> dict[str, Any]:
        return {"mode": self.mode, "delayMs": self.delay_ms}


class FaultMiddleware:
    """Outermost ASGI layer: hold requests during a partition, delay them when slow. A partition holds
    what answers were already flowing too — a watch opened before it sends nothing more, and does not
    end, until it heals — as a cut network would: a client must not hear from a member it cannot reach."""

    def __init__(self, app: ASGIApp, fault: FaultState) -> None:
        self.app = app
        self.fault = fault

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        if self.fault.mode == "partition":
            await self.fault.wait_healed()
        if self.fault.delay_ms:
            await asyncio.sleep(self.fault.delay_ms / 1000)

        async def held(message: Message) -> None:
            if self.fault.mode == "partition":
                await self.fault.wait_healed()
            await send(message)

        await self.app(scope, receive, held)


class HttpListener:
    """Serves an ASGI app on one port and can stop and resume listening on that same port."""

    def __init__(self, app: ASGIApp, host: str, port: int, certs: Certs | None) -> None:
        self.host = host
        self.port = port
        self.config = serving_config(
            app, host, port, lifespan="off", log_level="warning",
            ssl_certfile=str(certs.cert) if certs else None, ssl_keyfile=str(certs.key) if certs else None,
            ws="none",  # nothing here speaks websockets; don't load a library for them
            http="httptools",  # a member's API server refuses what its parser cannot read in its own words
        )
        self.config.load()
        self._server: uvicorn.Server | None = None
        self._sock: socket.socket | None = None

    @property
    def listening(self) -> bool:
        return self._server is not None

    async def up(self) -> None:
        if self._server is not None:
            return
        family = socket.AF_INET6 if ":" in self.host else socket.AF_INET
        # proto IPPROTO_TCP (not 0): accepted connections inherit it, and asyncio sets TCP_NODELAY only on
        # sockets that say they are TCP; without it every response waits ~40 ms for a delayed ACK (Nagle).
        sock = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((self.host, self.port))
        except OSError:
            sock.close()
            raise
        sock.listen(self.config.backlog)
        sock.setblocking(False)
        self.port = sock.getsockname()[1]  # the real one when asked for port 0
        logging.getLogger("uvicorn.error").addFilter(_CANCELLED_BY_FAULT)  # once: a filter is added as a set
        server = uvicorn.Server(self.config)
        server.lifespan = self.config.lifespan_class(self.config)
        await server.startup(sockets=[sock])
        await server.on_tick(0)  # sets the default response headers uvicorn's main loop would
        self._server, self._sock = server, sock

    async def down(self, *, graceful: bool = False) -> None:
        """Stop listening. Not graceful (a fault): reset every open connection at once. Graceful
        (shutdown): let in-flight requests finish for a moment, then reset what is left."""
        server, sock = self._server, self._sock
        if server is None or sock is None:
            return
        self._server = self._sock = None
        for s in server.servers:
            s.close()
        sock.close()
        state = server.server_state
        if graceful:
            for conn in list(state.connections):
                conn.shutdown()
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(2.0):
                    while state.connections:  # noqa: ASYNC110 - uvicorn signals no "drained" event
                        await asyncio.sleep(0.05)
        for conn in list(state.connections):
            transport = getattr(conn, "transport", None)
            if transport is not None:
                transport.abort()
        for task in list(state.tasks):
            task.cancel()
        for s in server.servers:
            with contextlib.suppress(Exception):
                async with asyncio.timeout(1.0):
                    await s.wait_closed()
