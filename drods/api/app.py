"""The API server (A1): one FastAPI app, every error in one shape, every change audited."""

from __future__ import annotations

import importlib
import time
import uuid
from collections.abc import Callable
from contextlib import AbstractAsyncContextManager
from dataclasses import replace
from typing import Any

from fastapi import Depends, FastAPI, Request
from fastapi.exceptions import RequestValidationError
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from drods import __version__
from drods.api import reference_page
from drods.api.access import enforce
from drods.api.audit import AuditEntry, utc_now_iso
from drods.api.auth import Principal, bearer_token
from drods.api.body import BodyLimit, depth_checked
from drods.api.body import too_deep as body_too_deep
from drods.api.context import ApiContext
from drods.api.dryrun import marked_dry_run, query_is_dry_run
from drods.api.json_response import JSONResponse
from drods.api.status import error_response
from drods.errors import ApiError, BadRequest, Invalid, field_errors_of
from drods.registry import changes
from drods.store import Unavailable

MUTATING = frozenset({"POST", "PUT", "PATCH", "DELETE"})
# High-rate data-plane reports (metrics, network status) are not changes to objects: they go to
# history and the status keys, not to the audit log; domain events (POST /api/v1/metrics/events) are.
NOT_AUDITED = (("PUT", "/api/v1/metrics"), ("PUT", "/api/v1/network/status"))

Lifespan = Callable[[FastAPI], AbstractAsyncContextManager[None]]

# Route modules are named here and imported only by an app that installs them: the façade's
# modules pull in the scheduler, the monitor and numpy, which a server of only the Kubernetes
# paths (`drods sim`, one process per simulated member) must not pay for.
#
# Order is routing order, and FastAPI matches its table route by route (with the façade first, 210-340 µs
# to reach a Kubernetes path, 65-80 µs now), so what is called most comes first where no pattern before it
# could take it: the agents' façade (their Works and reports), then Kubernetes' exceptions, group paths and
# namespaced core paths — none shares a path with the rest of the façade, which follows; last the
# cluster-scoped core patterns (``/api/v1/{plural}``), which would take the façade's paths.
# `tests/api/test_route_order.py` checks that no route is hidden by one before it.
COMMON_ROUTERS = ("drods.api.routes.admin:router",)
MEMBER_FACADE_ROUTERS = (
    "drods.api.routes.agent:router", "drods.api.routes.metrics:router",
    "drods.api.routes.search:router",  # before the group paths, whose patterns its paths match
)
KUBERNETES_ROUTERS = ("drods.api.routes.openapi_k8s:router", "drods.api.routes.discovery:router",
                      "drods.api.routes.component_status:router", "drods.api.routes.pod_binding:router",
                      "drods.api.routes.access_review:router",
                      "drods.api.routes.kubernetes:groups", "drods.api.routes.kubernetes:namespaced_core")
FACADE_ROUTERS = (
    "drods.api.routes.clusters:clusters", "drods.api.routes.clusters:drain",
    "drods.api.routes.clusters:propagation_policies",
    "drods.api.routes.monitor:router", "drods.api.routes.history:router",
    "drods.api.routes.sync:router", "drods.api.routes.bindings:router", "drods.api.routes.schedules:router",
    "drods.api.routes.whatif:router",
    "drods.api.routes.autoscaling:router", "drods.api.routes.decisions:router",
    "drods.api.routes.steering:network", "drods.api.routes.steering:router",
    "drods.api.routes.traffic:router", "drods.api.routes.dataset_access:router",
)
KUBERNETES_CLUSTER_ROUTERS = ("drods.api.routes.kubernetes:cluster_core",)


def load(ref: str) -> Any:
    """``"package.module:attribute"`` → the attribute, importing the module on first use."""
    module, _, attribute = ref.partition(":")
    return getattr(importlib.import_module(module), attribute)


def create_app(ctx: ApiContext, *, lifespan: Lifespan | None = None,
               extra_routers: list[Any] | None = None, flat_api: bool = True, audited: bool = True) -> FastAPI:
    """``flat_api=False`` leaves out the ``/api/v1/…`` control-plane façade and ``audited=False``
    the audit log: a simulated member cluster serves only the Kubernetes paths, as a Kubernetes API
    server without an audit policy does."""
    app = FastAPI(
        title="DRO-DS API",
        version=__version__,
        description="Cross-domain resource orchestration and dynamic scheduling. "
        "Every call needs `Authorization: Bearer <token>` (make one with `drods token create`).",
        lifespan=lifespan,
        default_response_class=JSONResponse,
        docs_url=None,  # `drods.api.reference_page` serves it, with no CDN
    )
    app.state.ctx = ctx
    member_facade = [load(r) for r in MEMBER_FACADE_ROUTERS] if flat_api else []
    facade = [load(r) for r in FACADE_ROUTERS] if flat_api else []
    # The product's routes answer to one table (`drods.api.access`); a simulated member's own routes
    # (``extra_routers``) keep their own checks, as a member cluster's API server would.
    ruled = [Depends(enforce)]
    reference_page.mount(app)
    # a typed body (the flat routes') is held to the depth limit the Kubernetes paths' `read_body` applies
    for r in [load(r) for r in COMMON_ROUTERS] + member_facade:
        app.include_router(depth_checked(r), dependencies=ruled)
    for r in extra_routers or []:
        app.include_router(r)
    for r in [load(r) for r in KUBERNETES_ROUTERS] + facade + [load(r) for r in KUBERNETES_CLUSTER_ROUTERS]:
        app.include_router(depth_checked(r), dependencies=ruled)
    if flat_api:
        from drods.ui import mount

        mount(app)  # the dashboard (UI1): static pages that call this API with the user's token
    _install_error_handlers(app)
    app.add_middleware(BodyLimit, limit=ctx.api.maxBodyBytes)  # every route, a typed body's too
    app.add_middleware(AuditAndMetrics, ctx=ctx, audited=audited)
    return app


def _refusal(request: Request, err: ApiError) -> JSONResponse:
    """The error's answer, its reason kept for the request's audit record (`AuditAndMetrics`)."""
    request.state.refusal = f"{err.code}: {err.message}"
    return error_response(request.url.path, err)


def _install_error_handlers(app: FastAPI) -> None:
    @app.exception_handler(ApiError)
    async def api_error(request: Request, exc: ApiError) -> JSONResponse:
        return _refusal(request, exc)

    @app.exception_handler(RequestValidationError)
    async def invalid(request: Request, exc: RequestValidationError) -> JSONResponse:
        errors = exc.errors()
        if any(e.get("type") == "json_invalid" for e in errors):
            err = BadRequest("request body is not valid JSON",
                             {"errors": [str(e.get("ctx", {}).get("error", "")) for e in errors]},
                             code="MALFORMED_BODY")
            return _refusal(request, err)
        fields = field_errors_of(errors)
        return _refusal(request, Invalid("request validation failed", {"fields": fields}))

    @app.exception_handler(StarletteHTTPException)
    async def http_error(request: Request, exc: StarletteHTTPException) -> JSONResponse:
        codes = {404: "NOT_FOUND", 405: "METHOD_NOT_ALLOWED", 413: "PAYLOAD_TOO_LARGE"}
        code = codes.get(exc.status_code, "HTTP_ERROR")
        message = {404: f"no such path {request.url.path}",
                   405: f"{request.method} is not allowed on {request.url.path}"}.get(exc.status_code, str(exc.detail))
        response = _refusal(request, ApiError(exc.status_code, code, message,
                                                             {"path": request.url.path, "method": request.method}))
        response.headers.update(exc.headers or {})
        if exc.status_code == 405:
            response.headers["Allow"] = ", ".join(_allowed_methods(request))
        return response

    @app.exception_handler(Unavailable)
    async def store_away(request: Request, exc: Unavailable) -> JSONResponse:
        # the store did not answer (within its own deadline across its endpoints): nothing was
        # changed that the client was told of, and the same request may succeed once it is back
        return _refusal(request, ApiError(  # with Retry-After (`drods.api.status`)
            503, "STORE_UNAVAILABLE", f"the store is unavailable, try again: {exc}", {}))

    @app.exception_handler(RecursionError)
    async def too_deep(request: Request, exc: RecursionError) -> JSONResponse:
        # A body nested deeper than the parser or validator can follow (e.g. FastAPI's own JSON
        # parsing of a model body): refused before anything was changed.
        return _refusal(request, body_too_deep())

    @app.exception_handler(Exception)
    async def internal(request: Request, exc: Exception) -> JSONResponse:
        return _refusal(request, ApiError(500, "INTERNAL", f"internal error: {type(exc).__name__}",
                                                         {}))


class AuditAndMetrics:
    """Pure ASGI middleware (no per-request task overhead): request metrics for every call, an
    audit entry for every mutating call, with who made it and what came of it."""

    def __init__(self, app: ASGIApp, ctx: ApiContext, audited: bool = True) -> None:
        self.app = app
        self.ctx = ctx
        self.audited = audited

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = time.perf_counter()
        responded = False
        method, path = scope["method"], scope["path"]
        # A dry run (?dryRun=All) changes nothing, so it is no change to audit.
        audited = self.audited and method in MUTATING and (method, path.rstrip("/")) not in NOT_AUDITED \
            and not query_is_dry_run(scope.get("query_string", b""))
        audit_id = uuid.uuid4().hex if audited else ""
        # a report refused (another cluster's, a bad token) changes nothing, yet someone tried: recorded;
        # so is a dry run refused to its caller (a viewer trying what a write would do)
        refusals_only = self.audited and ((method, path.rstrip("/")) in NOT_AUDITED
                                          or (method in MUTATING and not audited))
        principal = await self._principal(scope) if audited else None
        if principal is not None:
            # Write-ahead: no record, no change.
            try:
                await self.ctx.audit.append(self._entry(audit_id, "request", method, path, principal, None,
                                                        scope=scope))
            except Exception as e:  # noqa: BLE001 - whatever broke the audit write, the request must not run
                self.ctx.metrics.requests.labels("audit-write-failed", method, "0").inc()
                err = _audit_refusal(e)
                responded = True
                self._measure(scope, 503, started)
                await error_response(path, err)(scope, receive, send)
                return
        recorder = changes.Recorder()
        token = changes.CURRENT.set(recorder) if audited else None

        async def send_wrapper(message: Message) -> None:
            # Account before the client sees the answer: an acknowledged change is already audited.
            nonlocal responded
            if message["type"] == "http.response.start":
                responded = True
                await self._account(scope, message["status"], started, audit_id, recorder)
                if refusals_only and message["status"] in (401, 403):
                    await self._refused(scope, message["status"])
            await send(message)

        try:
            await self.app(scope, receive, send_wrapper)
        finally:
            if token is not None:
                changes.CURRENT.reset(token)
            if not responded:
                await self._account(scope, 500, started, audit_id, recorder)

    async def _principal(self, scope: Scope) -> Principal | None:
        """The caller, verified once here (the route reuses it); None when the token is missing or bad
        (the route refuses the request, which changes nothing)."""
        state = scope.setdefault("state", {})
        if state.get("principal") is not None:
            return state["principal"]  # type: ignore[no-any-return]
        header = next((v for k, v in scope.get("headers", ()) if k == b"authorization"), None)
        try:
            principal = await self.ctx.tokens.verify_async(bearer_token(header.decode("latin-1") if header else None))
        except ApiError:
            return None
        state["principal"] = principal
        return principal

    def _measure(self, scope: Scope, status: int, started: float) -> None:
        route = scope.get("route")
        template = getattr(route, "path", "unmatched")
        method = scope["method"]
        self.ctx.metrics.requests.labels(template, method, str(status)).inc()
        self.ctx.metrics.latency.labels(template, method).observe(time.perf_counter() - started)

    async def _account(self, scope: Scope, status: int, started: float, audit_id: str,
                       recorder: changes.Recorder) -> None:
        self._measure(scope, status, started)
        if audit_id:
            state: dict[str, Any] = scope.get("state") or {}
            entry = self._entry(audit_id, "response", scope["method"], scope["path"], state.get("principal"), status,
                                [c.to_dict() for c in recorder.changes], scope=scope)
            if marked_dry_run(state):
                entry = replace(entry, dryRun=True, changes=[])
            try:
                await self.ctx.audit.append(entry)
            except Exception:  # noqa: BLE001 - the request record is written; the outcome shows as unknown
                self.ctx.metrics.requests.labels("audit-write-failed", scope["method"], "0").inc()

    async def _refused(self, scope: Scope, status: int) -> None:
        """A refused report's one record (its outcome: nothing was changed, nothing written ahead)."""
        entry = self._entry(uuid.uuid4().hex, "response", scope["method"], scope["path"], await self._principal(scope),
                            status, scope=scope)
        try:
            await self.ctx.audit.append(entry)
        except Exception:  # noqa: BLE001 - the refusal stands whether or not its record is written
            self.ctx.metrics.requests.labels("audit-write-failed", scope["method"], "0").inc()

    @staticmethod
    def _entry(audit_id: str, stage: str, method: str, path: str, principal: Principal | None, status: int | None,
               changed: list[dict[str, Any]] | None = None, scope: Scope | None = None) -> AuditEntry:
        client = (scope or {}).get("client")
        agent = next((v for k, v in (scope or {}).get("headers", ()) if k == b"user-agent"), None)
        return AuditEntry(
            time=utc_now_iso(), id=audit_id, stage=stage,
            subject=principal.subject if principal else "anonymous",
            role=principal.role.value if principal else "",
            namespaces=sorted(principal.namespaces) if principal and principal.namespaces else None,
            verb=method, path=path, object=_object_of(path), result=status, changes=changed or [],
            sourceIPs=[str(client[0])] if client else None,
            userAgent=agent.decode("latin-1")[:256] if agent else None,
            # a refused dry run reads as one, not as the change it would have tried
            dryRun=query_is_dry_run((scope or {}).get("query_string", b"")),
            message=_refusal_of(scope) if status and status >= 400 else "",
        )


def _refusal_of(scope: Scope | None) -> str:
    """Why the request was refused (its error's code and message), as the error handler noted it."""
    return str(((scope or {}).get("state") or {}).get("refusal", ""))[:1024]


def _audit_refusal(e: Exception) -> ApiError:
    """Why a request whose audit record could not be written ahead was refused: the store itself away
    (where the audit log is) is what an operator must look at, said as a read says it."""
    if isinstance(e, Unavailable | TimeoutError):
        return ApiError(503, "STORE_UNAVAILABLE", f"the store is unavailable, try again: {e or type(e).__name__}; "
                        "nothing was changed (its audit record could not be written ahead)", {})
    return ApiError(503, "AUDIT_UNAVAILABLE", "the audit log cannot be written: nothing was changed; retry", {})


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


