"""The API server (A1): one FastAPI app, every error in one shape, every change audited."""

from __future__ import annotations

import importlib
import time
from collections.abc import Callable
from contextlib import AbstractAsyncContextManager
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from drods import __version__
from drods.api.audit import AuditEntry, utc_now_iso
from drods.api.context import ApiContext
from drods.api.status import error_response
from drods.errors import ApiError

MUTATING = frozenset({"POST", "PUT", "PATCH", "DELETE"})
# High-rate data-plane reports are not configuration changes; they go to history instead.
NOT_AUDITED_PREFIXES = ("/api/v1/metrics",)

Lifespan = Callable[[FastAPI], AbstractAsyncContextManager[None]]

# Route modules are named here and imported only by an app that installs them: the façade's
# modules pull in the scheduler, the monitor and numpy, which a server of only the Kubernetes
# paths (`drods sim`, one process per simulated member) must not pay for. Order is routing order.
COMMON_ROUTERS = ("drods.api.routes.admin:router",)
FACADE_ROUTERS = (
    "drods.api.routes.clusters:clusters", "drods.api.routes.clusters:propagation_policies",
    "drods.api.routes.metrics:router", "drods.api.routes.monitor:router", "drods.api.routes.history:router",
    "drods.api.routes.sync:router", "drods.api.routes.bindings:router", "drods.api.routes.schedules:router",
    "drods.api.routes.agent:router",
    "drods.api.routes.whatif:router",
    "drods.api.routes.autoscaling:router",
)
KUBERNETES_ROUTERS = ("drods.api.routes.openapi_k8s:router", "drods.api.routes.discovery:router",
                      "drods.api.routes.kubernetes:router")


def load(ref: str) -> Any:
    """``"package.module:attribute"`` → the attribute, importing the module on first use."""
    module, _, attribute = ref.partition(":")
    return getattr(importlib.import_module(module), attribute)


def create_app(ctx: ApiContext, *, lifespan: Lifespan | None = None,
               extra_routers: list[Any] | None = None, flat_api: bool = True) -> FastAPI:
    """``flat_api=False`` leaves out the ``/api/v1/…`` control-plane façade (a simulated member
    cluster serves only the Kubernetes paths)."""
    app = FastAPI(
        title="DRO-DS API",
        version=__version__,
        description="Cross-domain resource orchestration and dynamic scheduling. "
        "Every call needs `Authorization: Bearer <token>` (make one with `drods token create`).",
        lifespan=lifespan,
    )
    app.state.ctx = ctx
    facade = [load(r) for r in FACADE_ROUTERS] if flat_api else []
    for r in ([load(r) for r in COMMON_ROUTERS] + facade + list(extra_routers or [])
              + [load(r) for r in KUBERNETES_ROUTERS]):
        app.include_router(r)
    _install_error_handlers(app)
    app.add_middleware(AuditAndMetrics, ctx=ctx)
    return app


def _install_error_handlers(app: FastAPI) -> None:
    @app.exception_handler(ApiError)
    async def api_error(request: Request, exc: ApiError) -> JSONResponse:
        return error_response(request.url.path, exc)

    @app.exception_handler(RequestValidationError)
    async def invalid(request: Request, exc: RequestValidationError) -> JSONResponse:
        errors = exc.errors()
        if any(e.get("type") == "json_invalid" for e in errors):
            err = ApiError(400, "MALFORMED_BODY", "request body is not valid JSON",
                           {"errors": [str(e.get("ctx", {}).get("error", "")) for e in errors]})
            return error_response(request.url.path, err)
        fields = []
        for e in errors:
            loc = [str(p) for p in e.get("loc", ()) if p != "body"]
            fields.append({"field": ".".join(loc), "message": e.get("msg", "invalid")})
        return error_response(request.url.path, ApiError(422, "VALIDATION_FAILED", "request validation failed",
                                                         {"fields": fields}))

    @app.exception_handler(StarletteHTTPException)
    async def http_error(request: Request, exc: StarletteHTTPException) -> JSONResponse:
        codes = {404: "NOT_FOUND", 405: "METHOD_NOT_ALLOWED"}
        code = codes.get(exc.status_code, "HTTP_ERROR")
        message = {404: f"no such path {request.url.path}",
                   405: f"{request.method} is not allowed on {request.url.path}"}.get(exc.status_code, str(exc.detail))
        response = error_response(request.url.path, ApiError(exc.status_code, code, message,
                                                             {"path": request.url.path, "method": request.method}))
        response.headers.update(exc.headers or {})
        if exc.status_code == 405:
            response.headers["Allow"] = ", ".join(_allowed_methods(request))
        return response

    @app.exception_handler(Exception)
    async def internal(request: Request, exc: Exception) -> JSONResponse:
        return error_response(request.url.path, ApiError(500, "INTERNAL", f"internal error: {type(exc).__name__}",
                                                         {}))


class AuditAndMetrics:
    """Pure ASGI middleware (no per-request task overhead): request metrics for every call, an
    audit entry for every mutating call, with who made it and what came of it."""

    def __init__(self, app: ASGIApp, ctx: ApiContext) -> None:
        self.app = app
        self.ctx = ctx

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = time.perf_counter()
        responded = False

        async def send_wrapper(message: Message) -> None:
            # Account before the client sees the answer: an acknowledged change is already audited.
            nonlocal responded
            if message["type"] == "http.response.start":
                responded = True
                await self._account(scope, message["status"], started)
            await send(message)

        try:
            await self.app(scope, receive, send_wrapper)
        finally:
            if not responded:
                await self._account(scope, 500, started)

    async def _account(self, scope: Scope, status: int, started: float) -> None:
        route = scope.get("route")
        template = getattr(route, "path", "unmatched")
        method = scope["method"]
        self.ctx.metrics.requests.labels(template, method, str(status)).inc()
        self.ctx.metrics.latency.labels(template, method).observe(time.perf_counter() - started)
        path: str = scope["path"]
        if method in MUTATING and not path.startswith(NOT_AUDITED_PREFIXES):
            await self._audit(scope, method, path, status)

    async def _audit(self, scope: Scope, method: str, path: str, status: int) -> None:
        state: dict[str, Any] = scope.get("state") or {}
        principal = state.get("principal")
        entry = AuditEntry(
            time=utc_now_iso(),
            subject=principal.subject if principal else "anonymous",
            role=principal.role.value if principal else "",
            verb=method,
            path=path,
            object=_object_of(path),
            result=status,
        )
        try:
            await self.ctx.audit.append(entry)
        except Exception:  # noqa: BLE001 - an audit write failure must not mask the response already sent
            self.ctx.metrics.requests.labels("audit-write-failed", method, "0").inc()


def _allowed_methods(request: Request) -> list[str]:
    """Every method any route serves on this path (Starlette names only the first partial match)."""
    from starlette.routing import Match, Route

    methods: set[str] = set()
    for route in request.app.routes:
        if isinstance(route, Route) and route.methods:
            match, _ = route.matches({**request.scope, "method": next(iter(route.methods))})
            if match is Match.FULL:
                methods |= route.methods
    return sorted(methods)


def _object_of(path: str) -> str:
    parts = [p for p in path.split("/") if p]
    return "/".join(parts[2:]) if parts[:1] == ["api"] else "/".join(parts[3:]) if parts[:1] == ["apis"] else path


