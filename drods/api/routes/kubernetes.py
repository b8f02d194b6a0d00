"""The Kubernetes-shaped resource paths (``/apis/{group}/{version}/…``, ``/api/v1/namespaces/…``).

kubectl and the official clients speak this dialect; the flat ``/api/v1/…`` façade and these
paths are two views of one registry.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator, Callable
from typing import Any

from fastapi import APIRouter, Depends, Request
from fastapi.responses import Response, StreamingResponse
from starlette.routing import Match

from drods.api.auth import Action, Principal, cluster_removed
from drods.api.body import read_body
from drods.api.context import ApiContext, context
from drods.api.dryrun import is_dry_run
from drods.api.field_ownership import with_ownership
from drods.api.fields import COMMON_FIELDS, EVENT_FIELDS, WORK_FIELDS, FieldSelector, parse_field_selector
from drods.api.json_response import JSONResponse
from drods.api.kind_access import require_on_kind
from drods.api.list_pages import PageRequest, read_list
from drods.api.list_response import list_response
from drods.api.scale import serve_scale
from drods.api.secret_view import hides_data, metadata_only
from drods.api.status import error_response
from drods.api.strategic_merge import strategic_merge
from drods.api.streaming import until_stopped
from drods.api.table import bindings_of, to_table, wants_table
from drods.errors import AlreadyExists, ApiError, BadRequest, Conflict, Invalid, NotFound, not_found
from drods.model import jsondoc
from drods.model.kinds import CLUSTER, CUSTOM_RESOURCE_DEFINITION, WORK, Kind, custom_resources_prefix
from drods.model.namespaces import FINALIZE, NAMESPACE
from drods.model.policy_warnings import policy_warnings
from drods.model.selector import LabelSelector, parse_selector
from drods.registry.catalog import established
from drods.registry.patch import STRATEGIC_MERGE_PATCH, sets_resource_version
from drods.store import Compacted
from drods.store.cas import read_modify_write

# Three routers, so the API can try each where it belongs in its table (`drods.api.app`): the group
# paths and the namespaced core paths name no route of the façade and go before it; the cluster-scoped
# core paths (``/api/v1/{plural}``) would answer for the façade's own and go after it.
groups = APIRouter(include_in_schema=False)  # /apis/{group}/{version}/…
namespaced_core = APIRouter(include_in_schema=False)  # /api/v1/namespaces…
cluster_core = APIRouter(include_in_schema=False)  # /api/v1/{plural}…

APPLY_PATCH = "application/apply-patch+yaml"


def resolve(request: Request, group: str, version: str, plural: str) -> Kind:
    k = context(request).catalog.resolve(group, version, plural)
    if k is not None:
        return k
    raise NotFound(f"the server could not find the requested resource {plural}.{group or 'core'}/{version}",
                   {"group": group, "kind": plural},
                   code="RESOURCE_TYPE_NOT_FOUND")


def selector_of(request: Request) -> LabelSelector | None:
    text = request.query_params.get("labelSelector")
    if not text:
        return None
    try:
        return parse_selector(text)
    except ValueError as e:
        raise BadRequest(f"invalid labelSelector: {e}", {"labelSelector": text}) from e


_KIND_FIELDS = {("", "Event"): EVENT_FIELDS, (WORK.group, WORK.kind): WORK_FIELDS}


def fields_of(request: Request, kind: Kind) -> FieldSelector | None:
    text = request.query_params.get("fieldSelector")
    if not text:
        return None
    return parse_field_selector(text, _KIND_FIELDS.get((kind.group, kind.kind), COMMON_FIELDS))


async def list_or_watch(ctx: ApiContext, request: Request, kind: Kind, namespace: str | None,
                        hide_data: bool = False) -> Response:
    """``namespace=None`` on a namespaced kind is every namespace (``kubectl get -A``)."""
    selector = selector_of(request)
    fields = fields_of(request, kind)
    if request.query_params.get("watch") in ("true", "1"):
        timeout = request.query_params.get("timeoutSeconds")
        return StreamingResponse(
            watch_stream(ctx, kind, namespace, watch_revision(request), selector, fields,
                          float(timeout) if timeout and timeout.isdigit() else None, wants_table(request),
                          view=(lambda o: metadata_only(kind, o)) if hide_data else None,
                          alive=watch_alive(ctx, request)),
            media_type="application/json",
        )
    page = await read_list(ctx.registry, kind, namespace, selector, fields, PageRequest.of(request))

    def view(o: dict[str, Any]) -> dict[str, Any]:
        return metadata_only(kind, o) if hide_data else o

    meta: dict[str, Any] = {"resourceVersion": str(page.revision)}
    if page.following:
        meta["continue"] = page.following
    if wants_table(request):
        items = [view(o) for o in page]
        table = to_table(kind, items, page.revision, request.query_params.get("includeObject"),
                         await bindings_of(ctx.registry, kind, items))
        table["metadata"] = meta
        return JSONResponse(table)
    return list_response({"kind": f"{kind.kind}List", "apiVersion": kind.api_version, "metadata": meta}, page, view)


MAX_REVISION = 2**63 - 1  # the stores' revisions are signed 64-bit integers (SQLite's INTEGER, etcd's int64)


def watch_revision(request: Request) -> int:
    """The ``resourceVersion`` a watch starts from (0: now); 400 unless it is a revision a store can hold
    (a 23-digit one overflowed SQLite's INTEGER: a 500 and an empty 200 to the client)."""
    text = request.query_params.get("resourceVersion") or "0"
    if not text.isdigit():
        raise BadRequest("resourceVersion must be an integer", {"resourceVersion": text})
    if int(text) > MAX_REVISION:
        raise BadRequest(f"Too large resource version: {text}", {"resourceVersion": text})
    return int(text)


def watch_alive(ctx: ApiContext, request: Request) -> Callable[[], bool] | None:
    """Whether the token that opened a watch is still good (None: no token was asked for)."""
    principal = getattr(request.state, "principal", None)
    return None if principal is None else (lambda: ctx.tokens.still_valid(principal))


def expired_event(message: str) -> bytes:
    """The watch event that ends a stream whose resourceVersion is no longer kept (410): the client lists again."""
    return jsondoc.dumps({"type": "ERROR", "object": {"kind": "Status", "apiVersion": "v1", "metadata": {},
                                                       "status": "Failure", "message": message,
                                                       "reason": "Expired", "code": 410}})


async def watch_stream(ctx: ApiContext, kind: Kind, namespace: str | None, rv: int,
                        selector: LabelSelector | None, fields: FieldSelector | None,
                        timeout_s: float | None, as_table: bool = False,
                        accept: Callable[[dict[str, Any]], bool] | None = None,
                        view: Callable[[dict[str, Any]], dict[str, Any]] | None = None,
                        events: AsyncIterator[tuple[str, dict[str, Any]]] | None = None,
                        alive: Callable[[], bool] | None = None) -> AsyncIterator[bytes]:
    """Kubernetes watch events, one JSON object a line; ``accept`` drops objects a caller may not see,
    ``view`` trims what it may not read; ``events``: where they come from, if not a watch of the store
    of its own (`drods.api.work_watches`); ``alive``: the caller's token still good (`watch_alive`).

    A resourceVersion older than the store's history ends the stream with a 410 ``Expired`` event,
    as the Kubernetes API server does, so the client relists."""
    ctx.metrics.watches.inc()
    if events is None:
        events = ctx.registry.watch(kind, namespace, rv or None, selector)
    try:
        async with asyncio.timeout(timeout_s):
            async for event_type, obj in until_stopped(ctx.stopping, events, alive):
                if fields is not None and not fields.matches(obj):
                    continue
                if accept is not None and not accept(obj):
                    continue
                if view is not None:
                    obj = view(obj)
                if as_table:  # kubectl get -w asks for rows, so events print in the same columns
                    obj = to_table(kind, [obj], int(obj["metadata"]["resourceVersion"]),
                                   bindings=await bindings_of(ctx.registry, kind, [obj]))
                yield jsondoc.dumps({"type": event_type, "object": obj}) + b"\n"
    except TimeoutError:
        return
    except ApiError as e:
        status = {"kind": "Status", "code": e.status, "message": e.message}
        yield jsondoc.dumps({"type": "ERROR", "object": status})
    except Compacted as e:
        yield expired_event(str(e))
    finally:
        ctx.metrics.watches.dec()
        await events.aclose()  # type: ignore[attr-defined]


def refuse_unknown_fields(request: Request, kind: Kind, body: Any) -> None:
    """``fieldValidation=Strict`` (kubectl's default): a custom resource's field its schema does not name
    is refused, as kube-apiserver's strict decoding refuses it, not pruned in silence (a merge or apply
    patch is checked as the object it writes into; built-in kinds are checked in the registry)."""
    if kind.custom is None or request.query_params.get("fieldValidation") != "Strict" or not isinstance(body, dict):
        return
    unknown = kind.custom.unknown_fields(body)
    if unknown:
        raise BadRequest(f'{kind.kind} in version "{kind.version}" cannot be handled as a {kind.kind}: strict '
                         "decoding error: " + ", ".join(f'unknown field "{f}"' for f in unknown),
                         {"unknownFields": unknown})


async def create(ctx: ApiContext, request: Request, kind: Kind, namespace: str | None) -> JSONResponse:
    body = await read_body(request)
    refuse_unknown_fields(request, kind, body)
    obj = await ctx.registry.create(kind, body, namespace, dry_run=is_dry_run(request))
    return written(kind, obj, 201)


async def get_one(ctx: ApiContext, request: Request, kind: Kind, name: str, namespace: str | None,
                  hide_data: bool = False) -> JSONResponse:
    obj = await ctx.registry.get(kind, name, namespace)
    if hide_data:
        obj = metadata_only(kind, obj)
    if wants_table(request):
        return JSONResponse(to_table(kind, [obj], int(obj["metadata"]["resourceVersion"]),
                                     request.query_params.get("includeObject"),
                                     await bindings_of(ctx.registry, kind, [obj])))
    return JSONResponse(obj)


async def replace(ctx: ApiContext, request: Request, kind: Kind, name: str, namespace: str | None,
                  subresource: str | None = None) -> JSONResponse:
    body = await read_body(request)
    if not isinstance(body, dict):
        raise Invalid("object must be a mapping")
    refuse_unknown_fields(request, kind, body)
    meta = body.get("metadata")
    if isinstance(meta, dict) and meta.get("name") not in (None, name):
        raise BadRequest("metadata.name does not match the name in the path", {"name": name})
    obj = await ctx.registry.update(kind, body, namespace, subresource=subresource, dry_run=is_dry_run(request))
    return written(kind, obj)


async def patch(ctx: ApiContext, request: Request, kind: Kind, name: str, namespace: str | None,
                subresource: str | None = None) -> JSONResponse:
    content_type = request.headers.get("content-type", "")
    body = await read_body(request)
    dry_run = is_dry_run(request)
    if not content_type.startswith("application/json-patch"):
        refuse_unknown_fields(request, kind, body)
    if content_type.startswith(APPLY_PATCH):
        manager = request.query_params.get("fieldManager")
        if not manager:
            raise Invalid("fieldManager is required for apply patch", {"fields": [
                {"field": "fieldManager", "message": "Required value: is required for apply patch"}]})
        force = request.query_params.get("force", "").lower() in ("true", "1")
        return await _server_side_apply(ctx, kind, name, body, namespace, subresource, dry_run, manager, force)
    if content_type.startswith(STRATEGIC_MERGE_PATCH):
        # kubectl sends these for built-in kinds; list fields merge by key, so apply them as such.
        if not isinstance(body, dict):
            raise BadRequest("a strategic merge patch must be a JSON object")
        return written(kind, await _strategic_patch(ctx, kind, name, body, namespace, subresource, dry_run))
    obj = await ctx.registry.patch(kind, name, body, content_type, namespace, subresource=subresource,
                                   dry_run=dry_run)
    return written(kind, obj)


async def _server_side_apply(ctx: ApiContext, kind: Kind, name: str, body: Any, namespace: str | None,
                             subresource: str | None, dry_run: bool, manager: str, force: bool) -> JSONResponse:
    """Create if missing, else merge what the applier owns — worked out on the object as it is when
    written: a concurrent writer (another apply, a create) makes it worked out again over the winner,
    as the Kubernetes API server's guaranteed update does. A 409 only for a field another manager
    applied with another value (`drods.api.field_ownership`), unless forced."""
    named = sets_resource_version(body, APPLY_PATCH)

    async def attempt(_: int) -> tuple[dict[str, Any], int]:
        existing = await ctx.registry.try_get(kind, name, namespace)
        applied = with_ownership(body, existing, manager, force=force) \
            if isinstance(body, dict) and subresource is None else body
        if existing is None:
            if isinstance(applied, dict):
                applied.setdefault("metadata", {}).setdefault("name", name)
            try:
                return await ctx.registry.create(kind, applied, namespace, dry_run=dry_run), 201
            except AlreadyExists as e:
                raise Conflict(f"{kind.kind} {name} was created meanwhile") from e
        if isinstance(applied, dict) and not named:  # computed from this version: written over it only
            meta = {**(applied.get("metadata") or {}), "resourceVersion": existing["metadata"]["resourceVersion"]}
            applied = {**applied, "metadata": meta}
        return await ctx.registry.patch(kind, name, applied, "application/merge-patch+json", namespace,
                                        subresource=subresource, dry_run=dry_run), 200

    obj, status = await read_modify_write(attempt, retry=not named)
    return written(kind, obj, status)


def written(kind: Kind, obj: dict[str, Any], status: int = 200) -> JSONResponse:
    """A write's answer, with a ``Warning`` header (kubectl prints it) for each thing the object asks
    for and will not get (`drods.model.policy_warnings`)."""
    out = JSONResponse(obj, status_code=status)
    for text in policy_warnings(kind, obj):  # a header is latin-1, its text quoted: the names in it may be neither
        safe = text.replace('"', "'").encode("ascii", "replace").decode()
        out.headers.append("Warning", f'299 - "{safe}"')
    return out


async def _strategic_patch(ctx: ApiContext, kind: Kind, name: str, body: dict[str, Any], namespace: str | None,
                           subresource: str | None, dry_run: bool) -> dict[str, Any]:
    """Re-applied to the newer object when a concurrent writer wins, unless the patch names a
    resourceVersion (then that is a precondition)."""

    async def attempt(_: int) -> dict[str, Any]:
        current = await ctx.registry.get(kind, name, namespace)
        merged = strategic_merge(current, body)
        merged.setdefault("metadata", {}).setdefault("resourceVersion", current["metadata"]["resourceVersion"])
        return await ctx.registry.update(kind, merged, namespace, subresource=subresource, dry_run=dry_run)

    return await read_modify_write(attempt, retry=not sets_resource_version(body, STRATEGIC_MERGE_PATCH))


async def delete(ctx: ApiContext, request: Request, kind: Kind, name: str, namespace: str | None) -> JSONResponse:
    rv, uid, dry_in_body = None, None, None
    if int(request.headers.get("content-length") or 0) > 0:
        opts = await read_body(request)
        if isinstance(opts, dict):
            rv = (opts.get("preconditions") or {}).get("resourceVersion")
            uid = (opts.get("preconditions") or {}).get("uid")
            dry_in_body = opts.get("dryRun")  # kubectl delete --dry-run=server says it in DeleteOptions
    if uid:  # checked on the version deleted: that one, or a 409 when it changed meanwhile
        current = await ctx.registry.get(kind, name, namespace)
        if current["metadata"].get("uid") != uid:
            raise Conflict(f"Precondition failed: UID in precondition: {uid}, UID in object meta: "
                           f"{current['metadata'].get('uid')}", {"name": name, "kind": kind.plural})
        rv = rv or current["metadata"].get("resourceVersion")
    dry_run = is_dry_run(request, dry_in_body)
    obj, gone = await ctx.registry.delete(kind, name, namespace, resource_version=rv, dry_run=dry_run)
    if kind is CLUSTER and not dry_run:
        await cluster_removed(ctx.tokens, ctx.store, name)  # its agents' tokens go with it
    if gone:
        return JSONResponse({
            "kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success",
            "details": {"name": name, "group": kind.group, "kind": kind.plural, "uid": obj["metadata"].get("uid")},
        })
    # a Namespace answers 200 with itself, Terminating (as kube-apiserver does): its deletion has begun
    return JSONResponse(obj, status_code=200 if kind is NAMESPACE else 202)


async def dispatch(request: Request, principal: Principal, kind: Kind, namespace: str | None,
                   name: str | None, subresource: str | None) -> Response:
    ctx = context(request)
    method = request.method
    require_on_kind(principal, kind, method != "GET", namespace)
    if method != "GET":
        is_dry_run(request)  # a bad dryRun value is refused before anything is read or written
    if subresource == "scale" and name is not None and kind.scale_paths is not None:
        return await serve_scale(ctx, request, kind, name, namespace)
    if subresource == FINALIZE and kind is NAMESPACE and name is not None:
        if method != "PUT":  # kube-apiserver serves the finalize subresource for update alone
            raise ApiError(405, "METHOD_NOT_ALLOWED", f"{method} is not supported on namespaces/finalize: PUT it",
                           {"kind": "namespaces", "name": name, "subresource": FINALIZE, "allowed": ["PUT"]})
        return await _dispatch(ctx, request, principal, kind, namespace, name, subresource)
    if subresource not in (None, "status") or (subresource == "status" and kind.custom is not None
                                               and not kind.has_status):
        raise not_found(kind.kind, f"{name}/{subresource}")
    if kind is CUSTOM_RESOURCE_DEFINITION and method != "GET" and not is_dry_run(request):
        response = await _dispatch(ctx, request, principal, kind, namespace, name, subresource)
        if name is None and response.status_code == 201:
            name = str(json.loads(bytes(response.body))["metadata"]["name"])
        if name is not None:
            await _definition_written(ctx, name)
        return response
    return await _dispatch(ctx, request, principal, kind, namespace, name, subresource)


async def _definition_written(ctx: ApiContext, name: str) -> None:
    """This replica serves (or stops serving) a definition's kinds as soon as it is written; the others
    learn it from their watch. A deleted definition takes its resources with it, as in Kubernetes."""
    current = await ctx.registry.try_get(CUSTOM_RESOURCE_DEFINITION, name)
    if current is not None:
        ctx.catalog.learn_object(current)
        status = established(current)
        if status is not None and status != current.get("status"):
            with contextlib.suppress(ApiError):  # changed meanwhile: that write is answered the same way
                await ctx.registry.update_status(CUSTOM_RESOURCE_DEFINITION, name, status,
                                                 resource_version=int(current["metadata"]["resourceVersion"]))
        return
    ctx.catalog.forget(name)
    plural, _, group = name.partition(".")
    if plural and group:
        await ctx.store.delete_prefix(custom_resources_prefix(group, plural))


async def _dispatch(ctx: ApiContext, request: Request, principal: Principal, kind: Kind, namespace: str | None,
                    name: str | None, subresource: str | None) -> Response:
    method = request.method
    hide_data = hides_data(kind) and not principal.may(Action.READ_SECRETS)
    if name is None:
        if method == "GET":
            return await list_or_watch(ctx, request, kind, namespace, hide_data)
        if method == "POST":
            return await create(ctx, request, kind, namespace)
    else:
        if method == "GET":
            return await get_one(ctx, request, kind, name, namespace, hide_data)
        if method == "PUT":
            return await replace(ctx, request, kind, name, namespace, subresource)
        if method == "PATCH":
            return await patch(ctx, request, kind, name, namespace, subresource)
        if method == "DELETE" and subresource is None:
            return await delete(ctx, request, kind, name, namespace)
    allowed = ["GET", "POST"] if name is None else ["GET", "PUT", "PATCH"] + (["DELETE"] if subresource is None else [])
    raise ApiError(405, "METHOD_NOT_ALLOWED", f"{method} is not allowed here", {"method": method, "allowed": allowed})


def _namespaced(kind: Kind, namespace: str | None) -> None:
    if namespace is not None and not kind.namespaced:
        raise NotFound(f"{kind.plural} are not namespaced", {"kind": kind.kind}, code="RESOURCE_TYPE_NOT_FOUND")


_COLLECTION_METHODS = ["GET", "POST"]
_ITEM_METHODS = ["GET", "PUT", "PATCH", "DELETE"]
_STATUS_METHODS = ["GET", "PUT", "PATCH"]


async def _principal(request: Request) -> Principal:
    from drods.api.context import authenticate

    return await authenticate(request)


@groups.api_route("/apis/{group}/{version}/{plural}", methods=_COLLECTION_METHODS)
async def group_collection(request: Request, group: str, version: str, plural: str,
                           p: Principal = Depends(_principal)) -> Response:
    return await dispatch(request, p, resolve(request, group, version, plural), None, None, None)


@groups.api_route("/apis/{group}/{version}/{plural}/{name}", methods=_ITEM_METHODS)
async def group_item(request: Request, group: str, version: str, plural: str, name: str,
                     p: Principal = Depends(_principal)) -> Response:
    if plural == "namespaces":  # /apis/g/v/namespaces/{ns} is not a resource
        raise NotFound("not found")
    return await dispatch(request, p, resolve(request, group, version, plural), None, name, None)


@groups.api_route("/apis/{group}/{version}/{plural}/{name}/{sub}", methods=["POST", *_STATUS_METHODS])
async def group_item_sub(request: Request, group: str, version: str, plural: str, name: str, sub: str,
                         p: Principal = Depends(_principal)) -> Response:
    """Also serves ``/apis/{g}/{v}/namespaces/{ns}/{plural}``: both shapes have six segments."""
    if plural == "namespaces":
        kind = resolve(request, group, version, sub)
        _namespaced(kind, name)
        return await dispatch(request, p, kind, name, None, None)
    if request.method == "POST":
        raise ApiError(405, "METHOD_NOT_ALLOWED", "POST is not allowed here",
                       {"method": "POST", "allowed": ["GET", "PUT", "PATCH"]})  # a subresource
    return await dispatch(request, p, resolve(request, group, version, plural), None, name, sub)


@groups.api_route("/apis/{group}/{version}/namespaces/{ns}/{plural}/{name}", methods=_ITEM_METHODS)
async def ns_item(request: Request, group: str, version: str, ns: str, plural: str, name: str,
                  p: Principal = Depends(_principal)) -> Response:
    kind = resolve(request, group, version, plural)
    _namespaced(kind, ns)
    return await dispatch(request, p, kind, ns, name, None)


@groups.api_route("/apis/{group}/{version}/namespaces/{ns}/{plural}/{name}/{sub}", methods=_STATUS_METHODS)
async def ns_item_sub(request: Request, group: str, version: str, ns: str, plural: str, name: str, sub: str,
                      p: Principal = Depends(_principal)) -> Response:
    kind = resolve(request, group, version, plural)
    _namespaced(kind, ns)
    return await dispatch(request, p, kind, ns, name, sub)


# ---- core group (/api/v1) ---------------------------------------------------------------------


@namespaced_core.api_route("/api/v1/namespaces", methods=_COLLECTION_METHODS)
async def core_namespaces(request: Request, p: Principal = Depends(_principal)) -> Response:
    return await dispatch(request, p, resolve(request, "", "v1", "namespaces"), None, None, None)


@namespaced_core.api_route("/api/v1/namespaces/{name}", methods=_ITEM_METHODS)
async def core_namespace(request: Request, name: str, p: Principal = Depends(_principal)) -> Response:
    kind = resolve(request, "", "v1", "namespaces")
    if request.method in ("GET", "HEAD") and p.namespaces is not None:
        # a namespaced token reads the Namespace it is limited to (a Role granting namespaces does)
        p.require(Action.READ, namespace=name)
        return await _dispatch(context(request), request, p, kind, None, name, None)
    return await dispatch(request, p, kind, None, name, None)


# a Namespace's own subresources share their path's shape with a namespaced collection
_NAMESPACE_SUBRESOURCES = frozenset({"status", FINALIZE})


@namespaced_core.api_route("/api/v1/namespaces/{ns}/{plural}", methods=_COLLECTION_METHODS)
async def core_ns_collection(request: Request, ns: str, plural: str, p: Principal = Depends(_principal)) -> Response:
    if plural in _NAMESPACE_SUBRESOURCES:
        return await dispatch(request, p, resolve(request, "", "v1", "namespaces"), None, ns, plural)
    kind = resolve(request, "", "v1", plural)
    _namespaced(kind, ns)
    return await dispatch(request, p, kind, ns, None, None)


@namespaced_core.api_route("/api/v1/namespaces/{name}/{sub}", methods=["PUT", "PATCH"])
async def core_namespace_sub(request: Request, name: str, sub: str, p: Principal = Depends(_principal)) -> Response:
    if sub not in _NAMESPACE_SUBRESOURCES:
        raise ApiError(405, "METHOD_NOT_ALLOWED", f"{request.method} is not allowed on a collection",
                       {"method": request.method, "allowed": ["GET", "POST"]})
    return await dispatch(request, p, resolve(request, "", "v1", "namespaces"), None, name, sub)


@namespaced_core.api_route("/api/v1/namespaces/{ns}/{plural}/{name}", methods=_ITEM_METHODS)
async def core_ns_item(request: Request, ns: str, plural: str, name: str,
                       p: Principal = Depends(_principal)) -> Response:
    kind = resolve(request, "", "v1", plural)
    _namespaced(kind, ns)
    return await dispatch(request, p, kind, ns, name, None)


@namespaced_core.api_route("/api/v1/namespaces/{ns}/{plural}/{name}/{sub}", methods=_STATUS_METHODS)
async def core_ns_item_sub(request: Request, ns: str, plural: str, name: str, sub: str,
                           p: Principal = Depends(_principal)) -> Response:
    kind = resolve(request, "", "v1", plural)
    _namespaced(kind, ns)
    return await dispatch(request, p, kind, ns, name, sub)


@cluster_core.get("/api/v1/{plural}")
async def core_collection(request: Request, plural: str, p: Principal = Depends(_principal)) -> Response:
    """Kubernetes' own list paths across namespaces (``/api/v1/services``: ``kubectl get svc -A``).
    Routed after the façade, so ``/api/v1/clusters`` and the other façade paths keep their meaning."""
    for kind in context(request).kinds:
        if kind.group == "" and kind.version == "v1" and kind.plural == plural:
            return await dispatch(request, p, kind, None, None, None)
    return _not_served(request)


@cluster_core.post("/api/v1/{plural}")
async def core_cluster_create(request: Request, plural: str, p: Principal = Depends(_principal)) -> Response:
    """Creating a cluster-scoped core kind (``kubectl create -f pv.yaml``)."""
    kind = _core_cluster_kind(request, plural)
    if kind is not None:
        return await dispatch(request, p, kind, None, None, None)
    listed = any(k.group == "" and k.version == "v1" and k.plural == plural for k in context(request).kinds)
    return _not_served(request, ["GET"] if listed else [])  # a namespaced kind is created in its namespace


@cluster_core.api_route("/api/v1/{plural}/{name}", methods=_ITEM_METHODS)
async def core_cluster_item(request: Request, plural: str, name: str, p: Principal = Depends(_principal)) -> Response:
    kind = _core_cluster_kind(request, plural)
    return await dispatch(request, p, kind, None, name, None) if kind is not None else _not_served(request)


@cluster_core.api_route("/api/v1/{plural}/{name}/{sub}", methods=_STATUS_METHODS)
async def core_cluster_item_sub(request: Request, plural: str, name: str, sub: str,
                                p: Principal = Depends(_principal)) -> Response:
    kind = _core_cluster_kind(request, plural)
    return await dispatch(request, p, kind, None, name, sub) if kind is not None else _not_served(request)


_CORE_FALLBACKS = (core_collection, core_cluster_create, core_cluster_item, core_cluster_item_sub)


def _core_cluster_kind(request: Request, plural: str) -> Kind | None:
    """A cluster-scoped core kind this server serves (PersistentVolume, Node…); the façade's own
    ``/api/v1/…`` paths are routed before these, so they keep their meaning."""
    for kind in context(request).kinds:
        if kind.group == "" and kind.version == "v1" and kind.plural == plural and not kind.namespaced:
            return kind
    return None


def _not_served(request: Request, also: list[str] | None = None) -> Response:
    """No core kind here: a path served only with other methods (``also``, or the façade's) is a 405,
    anything else a 404."""
    others = [*(also or []), *_methods_elsewhere(request)]
    if others:
        response = error_response(request.url.path, ApiError(
            405, "METHOD_NOT_ALLOWED", f"{request.method} is not allowed on {request.url.path}",
            {"path": request.url.path, "method": request.method}))
        response.headers["Allow"] = ", ".join(others)
        return response
    raise NotFound(f"no such path {request.url.path}", {"path": request.url.path, "method": request.method})


def _methods_elsewhere(request: Request) -> list[str]:
    """The methods other routes (not these core fallbacks) serve on this path."""
    routes = _routes(request.app.routes)
    methods = []
    for method in ("GET", "POST", "PUT", "PATCH", "DELETE"):
        if method == request.method:
            continue
        scope = {**request.scope, "method": method}
        if any(getattr(route, "endpoint", None) not in _CORE_FALLBACKS and route.matches(scope)[0] is Match.FULL
               for route in routes):
            methods.append(method)
    return methods


def _routes(routes: list[Any]) -> list[Any]:
    """Every route, those of included routers too (FastAPI may keep an included router as one entry)."""
    out: list[Any] = []
    for route in routes:
        inner = getattr(route, "original_router", None)
        out += _routes(list(inner.routes)) if inner is not None else [route]
    return out
