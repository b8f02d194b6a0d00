"""API5 ``/api/v1/bindings``: scheduling tasks as a flat JSON façade over the ``Binding`` kind.

* ``POST`` — the body is a binding spec (``replicas``, ``priority``, per-replica ``resources`` in
  cores / GiB / GPUs, ``placement`` with Karmada's fields, ``targetClusters``, ``regions`` /
  ``providers`` / ``zones`` / ``cities``, ``network``, ``capabilities``, optional ``resource``
  reference) plus an optional ``name`` and ``labels``. It is validated (422 with field paths),
  stored as a Binding with phase Pending, and answered ``202 {"id", "phase": "Pending", …}``. The
  ID is the Binding's name: the given ``name``, or a generated unique one (S1).
* ``GET /{id}/status`` — phase, placement ``[{cluster, replicas}]``, a kube-style ``message``,
  ``reasons`` per cluster when Unschedulable or partial (a sample: at most 20 clusters, 5 per verdict),
  ``reasonCounts`` (every dropped cluster counted by verdict), ``reasonsOmitted`` (how many the sample
  leaves out), requested / placed / partial,
  ``scheduledTime`` and the generation the decision is for.
* ``GET`` (list, ``labelSelector``), ``GET /{id}``, ``PATCH /{id}`` (RFC 7386 merge patch of the flat
  form; a changed ``replicas`` is re-divided stably), ``DELETE /{id}``.

The same objects are at ``/apis/multicluster.io/v1alpha1/bindings`` (Kubernetes shape).
"""

from __future__ import annotations

import uuid
from typing import Any

from fastapi import APIRouter, Body, Depends, Query, Request
from fastapi.responses import StreamingResponse
from pydantic import Field

from drods.api.auth import Principal
from drods.api.context import authenticate, context
from drods.api.dryrun import dry_run_param
from drods.api.json_response import JSONResponse
from drods.api.list_pages import PageRequest, read_list
from drods.api.list_response import list_response
from drods.api.routes.flat import _flat_errors, to_flat
from drods.api.schemas import ERROR_RESPONSES
from drods.errors import ApiError, BadRequest, Conflict, Invalid, NotFound
from drods.model.binding import BindingSpec
from drods.model.kinds import BINDING
from drods.registry.patch import MERGE_PATCH

router = APIRouter(prefix="/api/v1/bindings", tags=["bindings"], responses=ERROR_RESPONSES)

_NAME = r"^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$"


class BindingRequest(BindingSpec):
    """API5 body: a binding spec plus an optional ``name`` (the ID) and ``labels``."""

    name: str | None = Field(default=None, min_length=1, max_length=253, pattern=_NAME, examples=["web"])
    labels: dict[str, str] = Field(default_factory=dict)


def status_view(obj: dict[str, Any]) -> dict[str, Any]:
    """What ``GET /{id}/status`` answers."""
    meta = obj["metadata"]
    spec = obj.get("spec") or {}
    st = obj.get("status") or {}
    requested = int(spec.get("replicas", 1))
    placement = [p for p in st.get("placement") or [] if isinstance(p, dict)]
    rs = (spec.get("placement") or {}).get("replicaScheduling") or {}
    if rs.get("replicaSchedulingType") == "Duplicated":
        placed = requested if placement else 0
    else:
        placed = sum(int(p.get("replicas") or 0) for p in placement)
    phase = st.get("phase") or "Pending"
    out: dict[str, Any] = {
        "id": meta["name"],
        "uid": meta.get("uid"),
        "phase": phase,
        "placement": placement,
        "message": st.get("message") or ("waiting for the scheduler" if phase == "Pending" else ""),
        "reasons": st.get("reasons") or {},
        "reasonCounts": st.get("reasonCounts") or {},
        "reasonsOmitted": int(st.get("reasonsOmitted") or 0),
        "requested": requested,
        "placed": placed,
        "partial": bool(st.get("scheduledGeneration")) and phase != "Unschedulable" and placed < requested,
        "scheduledTime": st.get("scheduledTime"),
        "scheduledGeneration": st.get("scheduledGeneration"),
        "generation": meta.get("generation"),
    }
    if meta.get("deletionTimestamp"):
        out["deletionTimestamp"] = meta["deletionTimestamp"]
    if spec.get("resource"):
        out["resource"] = spec["resource"]  # the workload it places (a Binding made from a template)
    for k in ("clusters", "conditions", "estimatedHourlyCost", "users"):
        if k in st:
            out[k] = st[k]
    return out


def flat_view(obj: dict[str, Any]) -> dict[str, Any]:
    out = to_flat(obj)
    out["id"] = out["name"]
    return out


@router.post("", status_code=202, summary="Submit a scheduling task (API5)")
async def create_binding(request: Request, body: BindingRequest = Body(...),
                         _: Principal = Depends(authenticate),
                         dry_run: bool = Depends(dry_run_param)) -> JSONResponse:
    ctx = context(request)
    spec = body.model_dump(mode="json", exclude_unset=True)
    name = spec.pop("name", None) or f"binding-{uuid.uuid4().hex[:12]}"
    labels = spec.pop("labels", None) or {}
    obj = {"apiVersion": BINDING.api_version, "kind": BINDING.kind,
           "metadata": {"name": name, "labels": labels}, "spec": spec, "status": {"phase": "Pending"}}
    try:
        created = await ctx.registry.create(BINDING, obj, dry_run=dry_run)
    except ApiError as e:
        if e.code == "ALREADY_EXISTS":
            raise Conflict(f"binding {name!r} already exists", {"bindingId": name}, code="BINDING_CONFLICT") from e
        raise _flat_errors(e) from e
    body_out = status_view(created)
    body_out["resourceVersion"] = created["metadata"].get("resourceVersion")
    body_out["statusUrl"] = f"/api/v1/bindings/{name}/status"
    return JSONResponse(body_out, status_code=202, headers={"Location": f"/api/v1/bindings/{name}"})


@router.get("", summary="List scheduling tasks")
async def list_bindings(request: Request, labelSelector: str | None = None,
                        limit: int = Query(default=0, ge=0, description="at most this many (0: all)"),
                        continue_: str | None = Query(default=None, alias="continue",
                                                      description="the token of the page before"),
                        _: Principal = Depends(authenticate)) -> StreamingResponse:
    from drods.api.routes.kubernetes import selector_of

    ctx = context(request)
    page = await read_list(ctx.registry, BINDING, None, selector_of(request), None, PageRequest.of(request))
    return list_response({"resourceVersion": str(page.revision), **({"continue": page.following} if page.following
                                                                     else {})}, page, flat_view)


@router.get("/{binding_id}", summary="One scheduling task (spec and status)")
async def get_binding(request: Request, binding_id: str, _: Principal = Depends(authenticate)) -> JSONResponse:
    return JSONResponse(flat_view(await _get(request, binding_id)))


@router.get("/{binding_id}/status", summary="State and placement of a scheduling task (API5)")
async def binding_status(request: Request, binding_id: str,
                         _: Principal = Depends(authenticate)) -> JSONResponse:
    return JSONResponse(status_view(await _get(request, binding_id)))


async def _get(request: Request, binding_id: str) -> dict[str, Any]:
    ctx = context(request)
    obj = await ctx.registry.try_get(BINDING, binding_id)
    if obj is None:
        raise NotFound(f"binding {binding_id!r} not found", {"bindingId": binding_id}, code="BINDING_NOT_FOUND")
    return obj


_ANY = {"schema": {"type": "object"}}


@router.patch("/{binding_id}", summary="Merge-patch a scheduling task (RFC 7386): scale, placement edits",
              openapi_extra={"requestBody": {"required": True,
                                             "content": {MERGE_PATCH: _ANY, "application/json": _ANY}}})
async def patch_binding(request: Request, binding_id: str,
                        _: Principal = Depends(authenticate),
                        dry_run: bool = Depends(dry_run_param)) -> JSONResponse:
    from drods.api.body import read_body

    ctx = context(request)
    media = request.headers.get("content-type", "application/json").split(";")[0].strip()
    if media not in (MERGE_PATCH, "application/json"):
        raise ApiError(415, "UNSUPPORTED_MEDIA_TYPE", f"use {MERGE_PATCH}", {"contentType": media})
    doc = await read_body(request)
    if not isinstance(doc, dict):
        raise BadRequest("a merge patch must be a JSON object")
    if "name" in doc and doc["name"] != binding_id:
        raise Invalid("name cannot be changed", {"fields": [{"field": "name", "message": "immutable"}]})
    await _get(request, binding_id)
    patch: dict[str, Any] = {"spec": {k: v for k, v in doc.items() if k not in ("name", "labels")}}
    if "labels" in doc:
        patch["metadata"] = {"labels": doc["labels"]}
    try:  # the registry re-applies the patch when the scheduler's status write wins the race
        updated = await ctx.registry.patch(BINDING, binding_id, patch, MERGE_PATCH, dry_run=dry_run)
    except NotFound as e:
        raise NotFound(f"binding {binding_id!r} not found", {"bindingId": binding_id},
                       code="BINDING_NOT_FOUND") from e
    except ApiError as e:
        raise _flat_errors(e) from e
    return JSONResponse(flat_view(updated))


@router.delete("/{binding_id}", summary="Delete a scheduling task")
async def delete_binding(request: Request, binding_id: str,
                         _: Principal = Depends(authenticate),
                         dry_run: bool = Depends(dry_run_param)) -> JSONResponse:
    ctx = context(request)
    await _get(request, binding_id)
    try:
        obj, gone = await ctx.registry.delete(BINDING, binding_id, dry_run=dry_run)
    except ApiError as e:
        if e.status == 404:
            raise NotFound(f"binding {binding_id!r} not found",
                           {"bindingId": binding_id},
                           code="BINDING_NOT_FOUND") from e
        raise
    return JSONResponse(flat_view(obj), status_code=200 if gone else 202)
