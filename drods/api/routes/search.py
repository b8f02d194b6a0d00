"""Karmada's search API (``search.karmada.io/v1alpha1``), read-only over the search cache
(`drods.members.search_cache`):

* ``/apis/search.karmada.io/v1alpha1/search/cache/<Kubernetes resource path>`` — a list (or one
  object) of what the members hold, each object annotated with the member it came from;
* ``/apis/search.karmada.io/v1alpha1/proxying/karmada/proxy/<Kubernetes resource path>`` — the same
  reads with the control plane's discovery in front, so ``kubectl --server=<that URL> get …`` works.

A read is authorised as a read of that kind on the Kubernetes paths (a namespaced token: its
namespaces only; Secret data only for ``read-secrets``). Label and field selectors are honoured; ``?watch=true``
streams the cache's changes from a list's ``resourceVersion`` (`drods.members.search_cache`). Every
API replica keeps its own cache; until its controller runs (start-up) it answers 503
``SEARCH_CACHE_NOT_READY``.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from typing import Any

from fastapi import APIRouter, Depends, Request
from fastapi.responses import Response, StreamingResponse

from drods.api.auth import Action, Principal
from drods.api.context import authenticate, context
from drods.api.fields import parse_field_selector
from drods.api.json_response import JSONResponse
from drods.api.routes import discovery
from drods.api.routes.kubernetes import expired_event, selector_of, watch_alive, watch_revision
from drods.api.secret_view import hides_data, metadata_only
from drods.api.streaming import until_stopped
from drods.api.table import to_table, wants_table
from drods.errors import ApiError, NotFound
from drods.members.search_cache import Expired, Query, SearchCache
from drods.model import jsondoc
from drods.model.kinds import Kind
from drods.model.search import SEARCH_GROUP, SEARCH_VERSION

router = APIRouter(include_in_schema=False)

SEARCH_CACHE = f"/apis/{SEARCH_GROUP}/{SEARCH_VERSION}/search/cache"
PROXY = f"/apis/{SEARCH_GROUP}/{SEARCH_VERSION}/proxying/karmada/proxy"


@dataclass(frozen=True)
class ResourcePath:
    """A Kubernetes resource path: ``api/v1/…`` or ``apis/GROUP/VERSION/…``, then
    ``[namespaces/NS/]PLURAL[/NAME]``."""

    group: str
    version: str
    plural: str
    namespace: str | None = None
    name: str | None = None

    @classmethod
    def parse(cls, path: str) -> ResourcePath:
        parts = [p for p in path.split("/") if p]
        if parts[:1] == ["api"] and len(parts) >= 3:
            group, version, rest = "", parts[1], parts[2:]
        elif parts[:1] == ["apis"] and len(parts) >= 4:
            group, version, rest = parts[1], parts[2], parts[3:]
        else:
            raise NotFound(f"{path!r} is not a Kubernetes resource path (api/v1/… or apis/GROUP/VERSION/…)",
                           {"path": path}, code="RESOURCE_TYPE_NOT_FOUND")
        namespace = None
        if len(rest) >= 3 and rest[0] == "namespaces":
            namespace, rest = rest[1], rest[2:]
        if len(rest) > 2:
            raise NotFound(f"subresources are not cached: {path!r}", {"path": path}, code="RESOURCE_TYPE_NOT_FOUND")
        return cls(group, version, rest[0], namespace, rest[1] if len(rest) == 2 else None)


def _kind(request: Request, rp: ResourcePath) -> Kind:
    """The kind as the control plane knows it, else as the member that served it reported it."""
    ctx = context(request)
    known = ctx.catalog.resolve(rp.group, rp.version, rp.plural)
    if known is not None:
        return known
    cached = ctx.search.serves(rp.group, rp.version, rp.plural)
    if cached is None:
        raise NotFound(f"the search cache holds no {rp.plural}.{rp.group or 'core'}/{rp.version}",
                       {"group": rp.group, "version": rp.version, "resource": rp.plural},
                       code="RESOURCE_TYPE_NOT_FOUND")
    return Kind(rp.group, rp.version, cached.kind, rp.plural, cached.namespaced)


async def serve_cached(request: Request, principal: Principal, path: str) -> Response:
    ctx = context(request)
    rp = ResourcePath.parse(path)  # a path that names no resource is a 404 wherever it is asked
    if not ctx.search.active:
        raise ApiError(503, "SEARCH_CACHE_NOT_READY", "this API replica's search cache has not started yet; "
                       "retry in a few seconds", {"component": "search-cache"})
    kind = _kind(request, rp)
    principal.require(Action.READ, namespace=rp.namespace if kind.namespaced else None)
    query = Query(rp.group, rp.version, rp.plural, rp.namespace, rp.name, selector_of(request))
    hide = hides_data(kind) and not principal.may(Action.READ_SECRETS)
    text = request.query_params.get("fieldSelector")
    fields = parse_field_selector(text, allowed=None) if text else None  # any dotted path, as a member's cache

    def view(obj: dict[str, Any]) -> dict[str, Any] | None:
        if fields is not None and not fields.matches(obj):
            return None
        return metadata_only(kind, obj) if hide else obj

    if request.query_params.get("watch") in ("true", "1"):
        timeout = request.query_params.get("timeoutSeconds") or ""
        return StreamingResponse(_watch(ctx.search, ctx.stopping, query, _since(request), kind, view,
                                        float(timeout) if timeout.isdigit() else None, wants_table(request),
                                        watch_alive(ctx, request)),
                                 media_type="application/json")
    items = [v for o in ctx.search.find(query) if (v := view(o)) is not None]
    if rp.name is not None:
        if not items:
            raise NotFound(f'{rp.plural} "{rp.name}" not found in the search cache',
                           {"kind": kind.kind, "name": rp.name, "namespace": rp.namespace})
        return JSONResponse(items[0])
    if wants_table(request):
        return JSONResponse(to_table(kind, items, 0, request.query_params.get("includeObject")))
    return JSONResponse({"kind": f"{kind.kind}List", "apiVersion": kind.api_version,
                         "metadata": {"resourceVersion": str(ctx.search.revision)}, "items": items})


def _since(request: Request) -> int | None:
    return watch_revision(request) or None


async def _watch(cache: SearchCache, stopping: asyncio.Event, query: Query, since: int | None, kind: Kind,
                 view: Callable[[dict[str, Any]], dict[str, Any] | None], timeout_s: float | None,
                 as_table: bool, alive: Callable[[], bool] | None) -> AsyncIterator[bytes]:
    """Kubernetes watch events of the cache, one JSON object a line; a version no longer kept (or a
    watcher too far behind) ends with a 410 ``Expired`` event, so the client lists again."""
    try:
        sub = cache.subscribe(since)
    except Expired as e:
        yield expired_event(str(e))
        return

    async def events() -> AsyncIterator[tuple[str, dict[str, Any]]]:
        while True:
            event = await sub.next()
            seen = view(event.object) if query.matches(event.kind, event.object) else None
            if seen is not None:
                yield event.type, seen

    try:
        async with asyncio.timeout(timeout_s):
            async for type_, obj in until_stopped(stopping, events(), alive):
                if as_table:  # kubectl get -w asks for rows
                    obj = to_table(kind, [obj], int(obj["metadata"]["resourceVersion"]))
                yield jsondoc.dumps({"type": type_, "object": obj}) + b"\n"
    except TimeoutError:
        return
    except Expired as e:
        yield expired_event(str(e))
    finally:
        sub.close()


@router.get(f"{SEARCH_CACHE}/{{path:path}}")
async def search_cache(request: Request, path: str, p: Principal = Depends(authenticate)) -> Response:
    return await serve_cached(request, p, path)


@router.get(f"{PROXY}/{{path:path}}")
async def proxy(request: Request, path: str, p: Principal = Depends(authenticate)) -> Response:
    """Discovery is the control plane's (kubectl finds the kinds by it); every other read is the cache's."""
    parts = [s for s in path.split("/") if s]
    if parts == ["api"]:
        return await discovery.core_versions(p)
    if parts == ["api", "v1"]:
        return await discovery.core_resources(request, p)
    if parts == ["apis"]:
        return await discovery.groups(request, p)
    if len(parts) == 2 and parts[0] == "apis":
        return await discovery.group(request, parts[1], p)
    if len(parts) == 3 and parts[0] == "apis":
        return await discovery.group_version(request, parts[1], parts[2], p)
    if parts == ["version"]:
        return await discovery.version()
    return await serve_cached(request, p, path)
