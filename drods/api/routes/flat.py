"""The draft's flat JSON façade (API1, API2) over Kubernetes-style objects.

A flat resource is ``{"name", "labels", **spec}``; reads add ``status`` and identity fields. The
same object is reachable at ``/apis/multicluster.io/v1alpha1/<plural>/<name>``.
"""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Body, Depends, Query, Request
from pydantic import BaseModel, ValidationError

from drods.api.auth import Principal, cluster_removed
from drods.api.context import ApiContext, authenticate, context
from drods.api.dryrun import dry_run_param
from drods.api.json_response import JSONResponse
from drods.api.list_pages import PageRequest, read_list
from drods.api.schemas import ERROR_RESPONSES, ObjectList
from drods.errors import ApiError, BadRequest, Conflict, Invalid
from drods.model.kinds import CLUSTER, Kind
from drods.registry.objects import field_errors
from drods.registry.patch import MERGE_PATCH


def to_object(kind: Kind, flat: dict[str, Any]) -> dict[str, Any]:
    spec = {k: v for k, v in flat.items() if k not in ("name", "labels")}
    return {"apiVersion": kind.api_version, "kind": kind.kind,
            "metadata": {"name": flat.get("name"), "labels": flat.get("labels") or {}}, "spec": spec}


def to_flat(obj: dict[str, Any]) -> dict[str, Any]:
    meta = obj["metadata"]
    out: dict[str, Any] = {"name": meta["name"], "labels": meta.get("labels", {})}
    out.update(obj.get("spec") or {})
    out["status"] = obj.get("status") or {}
    out["uid"] = meta.get("uid")
    out["resourceVersion"] = meta.get("resourceVersion")
    out["generation"] = meta.get("generation")
    out["creationTimestamp"] = meta.get("creationTimestamp")
    if meta.get("deletionTimestamp"):
        out["deletionTimestamp"] = meta["deletionTimestamp"]
    return out


def _flat_errors(err: ApiError) -> ApiError:
    """Field paths in the flat form have no ``spec.`` prefix."""
    fields = err.details.get("fields")
    if fields:
        for f in fields:
            f["field"] = str(f.get("field", "")).removeprefix("spec.").replace("metadata.name", "name")
    return err


async def _merge_patch_of(request: Request, name: str) -> dict[str, Any]:
    """The request's merge patch for the flat view of ``name``."""
    from drods.api.body import read_body

    media = request.headers.get("content-type", "application/json").split(";")[0].strip()
    if media not in (MERGE_PATCH, "application/json"):
        raise ApiError(415, "UNSUPPORTED_MEDIA_TYPE", f"use {MERGE_PATCH}", {"contentType": media})
    patch_doc = await read_body(request)
    if not isinstance(patch_doc, dict):
        raise BadRequest("a merge patch must be a JSON object")
    if "name" in patch_doc and patch_doc["name"] != name:
        raise Invalid("name cannot be changed", {"fields": [{"field": "name", "message": "immutable"}]})
    return patch_doc


async def _merge_patched(patch_doc: dict[str, Any], ctx: ApiContext, kind: Kind, name: str,
                         body_model: type[BaseModel]) -> dict[str, Any]:
    """The stored object with the merge patch applied to its flat view, validated as the flat
    body model, carrying the revision it was read at."""
    from drods.registry.patch import merge_patch

    current = await ctx.registry.get(kind, name)
    flat = {k: v for k, v in to_flat(current).items()
            if k in ("name", "labels") or k in (current.get("spec") or {})}
    merged = merge_patch(flat, patch_doc)
    try:
        body_model.model_validate(merged)
    except ValidationError as e:
        raise Invalid(f"invalid {kind.kind}", {"fields": field_errors(e)}) from e
    obj = to_object(kind, merged)
    obj["metadata"]["resourceVersion"] = current["metadata"]["resourceVersion"]
    return obj


def flat_router(kind: Kind, path: str, body_model: type[BaseModel], *, conflict_code: str,
                conflict_detail: str, conflict_message: str | None = None, decorate: Any = None) -> APIRouter:
    """CRUD + merge-patch for one kind at ``path``; ``decorate(ctx, flat)`` may add live fields on read.
    A create of a name taken answers 409 ``conflict_code`` with ``{conflict_detail: name}`` and
    ``conflict_message`` (else the store's message)."""
    router = APIRouter(prefix=path, tags=[kind.plural], responses=ERROR_RESPONSES)

    async def render(ctx: ApiContext, obj: dict[str, Any]) -> dict[str, Any]:
        flat = to_flat(obj)
        if decorate is not None:
            await decorate(ctx, flat)
        return flat

    @router.get("", response_model=ObjectList, summary=f"List {kind.plural}")
    async def list_all(request: Request, labelSelector: str | None = None,
                       limit: int = Query(default=0, ge=0, description="at most this many (0: all)"),
                       continue_: str | None = Query(default=None, alias="continue",
                                                     description="the token of the page before"),
                       _: Principal = Depends(authenticate)) -> JSONResponse:
        from drods.api.routes.kubernetes import selector_of

        ctx = context(request)
        page = await read_list(ctx.registry, kind, None, selector_of(request), None, PageRequest.of(request))
        return JSONResponse({"items": [await render(ctx, o) for o in page], "resourceVersion": str(page.revision),
                             **({"continue": page.following} if page.following else {})})

    async def create(request: Request, body: BaseModel = Body(...),
                     _: Principal = Depends(authenticate),
                     dry_run: bool = Depends(dry_run_param)) -> JSONResponse:
        ctx = context(request)
        flat = body.model_dump(mode="json", exclude_unset=True)
        try:
            obj = await ctx.registry.create(kind, to_object(kind, flat), dry_run=dry_run)
        except ApiError as e:
            if e.code == "ALREADY_EXISTS":
                raise Conflict(conflict_message or e.message, {conflict_detail: flat["name"]},
                               code=conflict_code) from e
            raise _flat_errors(e) from e
        return JSONResponse(await render(ctx, obj), status_code=201)

    # The body type is only known at runtime; FastAPI reads it from the annotations.
    create.__annotations__["body"] = body_model
    router.post("", status_code=201, summary=f"Create a {kind.kind}")(create)

    @router.get("/{name}", summary=f"Get one {kind.kind}")
    async def get_one(request: Request, name: str, _: Principal = Depends(authenticate)) -> JSONResponse:
        ctx = context(request)
        return JSONResponse(await render(ctx, await ctx.registry.get(kind, name)))

    any_object = {"schema": {"type": "object"}}
    patch_body = {"requestBody": {"required": True, "content": {MERGE_PATCH: any_object,
                                                                "application/json": any_object}}}

    @router.patch("/{name}", summary=f"Merge-patch a {kind.kind} (RFC 7386)", openapi_extra=patch_body)
    async def patch(request: Request, name: str, _: Principal = Depends(authenticate),
                    dry_run: bool = Depends(dry_run_param)) -> JSONResponse:
        from drods.store.cas import read_modify_write

        ctx = context(request)
        patch_doc = await _merge_patch_of(request, name)

        # The flat form has no resourceVersion: a concurrent status write is no reason to refuse
        # the patch, it is re-applied to the newer object (as the Kubernetes API server does).
        async def attempt(_: int) -> dict[str, Any]:
            obj = await _merge_patched(patch_doc, ctx, kind, name, body_model)
            try:
                return await ctx.registry.update(kind, obj, dry_run=dry_run)
            except ApiError as e:
                raise _flat_errors(e) from e

        return JSONResponse(await render(ctx, await read_modify_write(attempt)))

    @router.delete("/{name}", summary=f"Delete a {kind.kind}")
    async def delete(request: Request, name: str, _: Principal = Depends(authenticate),
                    dry_run: bool = Depends(dry_run_param)) -> JSONResponse:
        ctx = context(request)
        obj, gone = await ctx.registry.delete(kind, name, dry_run=dry_run)
        if kind is CLUSTER and not dry_run:
            await cluster_removed(ctx.tokens, ctx.store, name)  # its agents' tokens go with it
        flat = await render(ctx, obj)
        return JSONResponse(flat, status_code=200 if gone else 202)

    return router
