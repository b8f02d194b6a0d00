"""The HTTP transport every DRO-DS client uses (CLI, agents, sims' clients, benchmarks, tests).

A request that meets a connection the server had already closed (a reset, or a disconnect before
any response) is sent again on a fresh connection when it is idempotent (GET, HEAD, OPTIONS, PUT,
DELETE): nothing was lost by trying twice. A POST is retried only when the connection could not be
made at all (nothing was sent). The servers' keep-alive (`drods.api.serving`) removes the usual
cause; this covers what remains (a server restarting, a proxy in between).
"""

from __future__ import annotations

import asyncio
import ssl
import time

import httpx

IDEMPOTENT = frozenset({"GET", "HEAD", "OPTIONS", "PUT", "DELETE"})
ATTEMPTS = 3
BACKOFF_SECONDS = (0.0, 0.05, 0.25)
# Raised before or while sending on a connection the peer closed: the request did not take effect
# when the method is idempotent (or may be repeated without harm).
_RESET = (httpx.ReadError, httpx.WriteError, httpx.RemoteProtocolError)
DEFAULT_LIMITS = httpx.Limits(max_connections=100, max_keepalive_connections=20)  # httpx's own defaults


def _retryable(request: httpx.Request, error: Exception) -> bool:
    if isinstance(error, httpx.ConnectError):
        return True
    return isinstance(error, _RESET) and request.method in IDEMPOTENT


class RetryingTransport(httpx.BaseTransport):
    """Synchronous clients (the CLI)."""

    def __init__(self, inner: httpx.BaseTransport) -> None:
        self.inner = inner

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        for attempt in range(ATTEMPTS):
            try:
                return self.inner.handle_request(request)
            except httpx.TransportError as e:
                if attempt + 1 == ATTEMPTS or not _retryable(request, e):
                    raise
                time.sleep(BACKOFF_SECONDS[attempt + 1])
        raise AssertionError("unreachable")

    def close(self) -> None:
        self.inner.close()


class AsyncRetryingTransport(httpx.AsyncBaseTransport):
    """Asynchronous clients (agents, benchmarks, test harnesses)."""

    def __init__(self, inner: httpx.AsyncBaseTransport) -> None:
        self.inner = inner

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        for attempt in range(ATTEMPTS):
            try:
                return await self.inner.handle_async_request(request)
            except httpx.TransportError as e:
                if attempt + 1 == ATTEMPTS or not _retryable(request, e):
                    raise
                await asyncio.sleep(BACKOFF_SECONDS[attempt + 1])
        raise AssertionError("unreachable")

    async def aclose(self) -> None:
        await self.inner.aclose()


def transport(verify: ssl.SSLContext | bool = True, limits: httpx.Limits = DEFAULT_LIMITS) -> RetryingTransport:
    """``httpx.Client(transport=transport(verify))`` (a transport takes ``verify`` and ``limits``)."""
    return RetryingTransport(httpx.HTTPTransport(verify=verify, limits=limits))


def async_transport(verify: ssl.SSLContext | bool = True,
                    limits: httpx.Limits = DEFAULT_LIMITS) -> AsyncRetryingTransport:
    """``httpx.AsyncClient(transport=async_transport(verify))``."""
    return AsyncRetryingTransport(httpx.AsyncHTTPTransport(verify=verify, limits=limits))
