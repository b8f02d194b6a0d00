"""Request bodies: JSON or YAML by Content-Type, with a size cap; anything malformed is a clear 4xx."""

from __future__ import annotations

import json
from collections.abc import Callable, Coroutine
from typing import Any

import yaml
from fastapi import APIRouter, Request
from fastapi.routing import APIRoute
from starlette.datastructures import Headers
from starlette.exceptions import HTTPException
from starlette.responses import Response
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from drods.api.settings import ApiSettings
from drods.api.status import error_response
from drods.errors import ApiError, BadRequest

_DEFAULTS = ApiSettings()
# Deeper than any Kubernetes object (a CRD schema nests ~30): refused before anything recursive
# (validation, copying, encoding) meets it.
MAX_DEPTH = 100


class _NoAliasLoader(yaml.SafeLoader):
    """YAML without anchors and aliases: a few lines of them expand to billions of nodes ("billion
    laughs") once anything walks the document; no Kubernetes object needs them."""

    def compose_node(self, parent: Any, index: Any) -> Any:
        if self.check_event(yaml.AliasEvent):
            event = self.peek_event()
            raise yaml.composer.ComposerError(None, None, "aliases (*name) are not accepted", event.start_mark)
        return super().compose_node(parent, index)


def too_deep(limit: int = MAX_DEPTH) -> ApiError:
    return BadRequest(f"request body nests deeper than {limit} levels", {"maxDepth": limit}, code="BODY_TOO_DEEP")


def check_depth(doc: Any, limit: int = MAX_DEPTH) -> None:
    """Iteratively (no recursion to exhaust): raise `too_deep` when ``doc`` nests beyond ``limit``."""
    stack: list[tuple[Any, int]] = [(doc, 1)]
    while stack:
        node, depth = stack.pop()
        if depth > limit:
            raise too_deep(limit)
        if isinstance(node, dict):
            stack.extend((v, depth + 1) for v in node.values())
        elif isinstance(node, list):
            stack.extend((v, depth + 1) for v in node)


def _yaml_or_json(raw: bytes) -> Any:
    """A YAML body; one that is JSON (what Kubernetes clients send for server-side apply) is read as
    JSON, as Kubernetes reads it — and at the JSON parser's speed, not the pure-Python YAML one's."""
    if raw.lstrip()[:1] in (b"{", b"["):
        try:
            return json.loads(raw)
        except ValueError:
            pass  # flow-style YAML that is not JSON
    return yaml.load(raw, Loader=_NoAliasLoader)  # noqa: S506 - a SafeLoader subclass


async def read_body(request: Request, *, limit: int | None = None) -> Any:
    """The parsed body, at most ``limit`` bytes (default: the server's ``api.maxBodyBytes``)."""
    if limit is None:
        settings = getattr(getattr(request.app.state, "ctx", None), "api", None)
        limit = (settings if isinstance(settings, ApiSettings) else _DEFAULTS).maxBodyBytes
    declared = request.headers.get("content-length")
    if declared and declared.isdigit() and int(declared) > limit:
        raise too_large(int(declared), limit)
    raw = bytearray()
    async for chunk in request.stream():
        raw += chunk
        if len(raw) > limit:
            raise too_large(len(raw), limit)
    if not raw.strip():
        raise BadRequest("request body is required", code="EMPTY_BODY")
    media = request.headers.get("content-type", "application/json").split(";")[0].strip().lower() or \
        "application/json"
    yaml_media = media in ("application/yaml", "application/x-yaml", "text/yaml", "application/apply-patch+yaml")
    if not yaml_media and not (media == "application/json" or media.endswith("+json")):
        # as kube-apiserver answers a body it cannot decode (text/plain, protobuf, a form)
        raise ApiError(415, "UNSUPPORTED_MEDIA_TYPE",
                       f"the body's content type {media!r} is not supported: send application/json or application/yaml",
                       {"contentType": media})
    try:
        doc = _yaml_or_json(bytes(raw)) if yaml_media else json.loads(bytes(raw))
    except RecursionError as e:
        raise too_deep() from e
    except (ValueError, yaml.YAMLError) as e:
        kind = "YAML" if "yaml" in media else "JSON"
        raise BadRequest(f"request body is not valid {kind}: {e}", {"contentType": media}, code="MALFORMED_BODY") from e
    check_depth(doc)
    return doc


async def check_typed_body(request: Request) -> None:
    """The depth limit for a body FastAPI parses itself (a route's typed body: the flat ``/api/v1``
    routes): the JSON is parsed here, where it nests too deep to parse answering 400 ``BODY_TOO_DEEP``
    as `read_body` does, and FastAPI takes the parsed document from the request (Starlette keeps it),
    so a body is parsed once. A body that is not JSON is left to FastAPI (its errors as before)."""
    media = request.headers.get("content-type")
    if media is not None:
        main = media.split(";")[0].strip().lower()
        if not (main == "application/json" or (main.startswith("application/") and main.endswith("+json"))):
            return
    if not await request.body():
        return
    try:
        doc = await request.json()
    except RecursionError as e:
        raise too_deep() from e
    except ValueError:
        return  # not JSON: FastAPI parses it again and answers MALFORMED_BODY
    check_depth(doc)


class DepthCheckedRoute(APIRoute):
    """A route whose typed body is held to `MAX_DEPTH` before FastAPI reads it (`check_typed_body`)."""

    def get_route_handler(self) -> Callable[[Request], Coroutine[Any, Any, Response]]:
        handler = super().get_route_handler()
        if self.body_field is None:
            return handler

        async def checked(request: Request) -> Response:
            await check_typed_body(request)
            return await handler(request)

        return checked


def depth_checked(router: APIRouter) -> APIRouter:
    """``router`` with its routes that take a typed body made `DepthCheckedRoute` (before it is
    included in an app: inclusion builds each route's handler)."""
    for route in router.routes:
        if type(route) is APIRoute:
            route.__class__ = DepthCheckedRoute
    return router


def too_large(size: int, limit: int) -> ApiError:
    return ApiError(413, "PAYLOAD_TOO_LARGE", f"request body of {size} bytes exceeds {limit}", {"limit": limit})


class BodyLimit:
    """Pure ASGI middleware: no request body beyond ``limit`` bytes reaches a handler — one that says
    so in ``Content-Length`` is refused before it is read, a longer stream when it passes the limit —
    whatever reads it (`read_body`, or FastAPI for a typed body). The 413 is the path's error shape."""

    def __init__(self, app: ASGIApp, limit: int) -> None:
        self.app = app
        self.limit = limit

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        declared = Headers(scope=scope).get("content-length")
        if declared and declared.isdigit() and int(declared) > self.limit:
            await error_response(scope["path"], too_large(int(declared), self.limit))(scope, receive, send)
            return
        seen = 0

        async def limited() -> Message:
            nonlocal seen
            message = await receive()
            if message["type"] == "http.request":
                seen += len(message.get("body", b""))
                if seen > self.limit:  # an HTTPException: FastAPI lets it through the reading of a typed body
                    raise HTTPException(413, too_large(seen, self.limit).message)
            return message

        await self.app(scope, limited, send)
