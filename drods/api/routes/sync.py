"""API7: domain configuration and bulk object sync.

``PUT /api/v1/sync/configs`` stores a domain's configuration (``configs``, any JSON object) as an
opaque document — no DRO-DS component interprets it; it is where operators and a domain's tooling
(agents, site automation) keep and share settings of that domain through the control plane, with
a revision. ``GET /api/v1/sync/configs?cluster=NAME`` reads it back (no ``cluster``: the fleet-wide
document); 404 when nothing was stored.

Such a document may hold credentials, so it is treated as Secret data is (SEC2): sealed at rest
whatever ``encryption.resources`` lists (`drods.security.at_rest.ALWAYS_SEALED`), and a reader
without ``read-secrets`` (a viewer) sees its keys with every value redacted (``"***"``,
``redacted: true``), never the values.
"""

from __future__ import annotations

import copy
import json
from typing import Any

from fastapi import APIRouter, Body, Depends, Query, Request
from pydantic import BaseModel, ConfigDict, Field

from drods.api.auth import Action, Principal
from drods.api.body import read_body
from drods.api.context import authenticate, context
from drods.api.dryrun import dry_run_param
from drods.api.json_response import JSONResponse
from drods.api.schemas import ERROR_RESPONSES
from drods.errors import ApiError, Invalid, NotFound
from drods.model.keys import FLEET_CONFIG, SYNC_CONFIGS_PREFIX
from drods.store.cas import read_modify_write

router = APIRouter(prefix="/api/v1/sync", tags=["sync"], responses=ERROR_RESPONSES)

MAX_BATCH = 1000
REDACTED = "***"  # as the audit log writes a secret value
DOMAIN_NAME = r"^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$"  # a cluster name (RFC 1123)


class DomainConfig(BaseModel):
    model_config = ConfigDict(extra="forbid")

    cluster: str | None = Field(default=None, max_length=253, pattern=DOMAIN_NAME,
                                description="the domain; omit for fleet-wide configuration")
    configs: dict[str, Any] = Field(default_factory=dict)


class BatchObject(BaseModel):
    model_config = ConfigDict(extra="allow")

    apiVersion: str = Field(examples=["multicluster.io/v1alpha1"])
    kind: str = Field(examples=["PropagationPolicy"])
    metadata: dict[str, Any]


class SyncBatch(BaseModel):
    objects: list[BatchObject] = Field(max_length=MAX_BATCH)


@router.put("/configs", summary="Store domain configuration (an opaque document per domain)")
async def put_configs(request: Request, body: DomainConfig = Body(...),
                      _: Principal = Depends(authenticate),
                      dry_run: bool = Depends(dry_run_param)) -> JSONResponse:
    ctx = context(request)
    key = f"{SYNC_CONFIGS_PREFIX}{body.cluster or FLEET_CONFIG}"
    if dry_run:
        return JSONResponse({"cluster": body.cluster, "configs": body.configs, "dryRun": True})
    rev = await ctx.store.put(key, json.dumps(body.configs).encode())
    return JSONResponse({"cluster": body.cluster, "configs": body.configs, "resourceVersion": str(rev)})


@router.get("/configs", summary="Read a domain's stored configuration")
async def get_configs(request: Request,
                      cluster: str | None = Query(default=None, max_length=253, pattern=DOMAIN_NAME,
                                                  description="the domain; omit for the fleet-wide document"),
                      principal: Principal = Depends(authenticate)) -> JSONResponse:
    ctx = context(request)
    kv = await ctx.store.get(f"{SYNC_CONFIGS_PREFIX}{cluster or FLEET_CONFIG}")
    if kv is None:
        raise NotFound(f"no configuration stored for {cluster or 'the fleet'}",
                       {"cluster": cluster},
                       code="CONFIG_NOT_FOUND")
    configs = json.loads(kv.value)
    if not principal.may(Action.READ_SECRETS):  # a viewer: which settings there are, not their values
        redacted = {k: REDACTED for k in configs} if isinstance(configs, dict) else {}
        return JSONResponse({"cluster": cluster, "configs": redacted, "redacted": True,
                             "resourceVersion": str(kv.mod_revision)})
    return JSONResponse({"cluster": cluster, "configs": configs, "resourceVersion": str(kv.mod_revision)})


@router.post("/batch", summary="Create or update up to 1000 objects at once, all or nothing",
             openapi_extra={"requestBody": {"required": True, "content": {"application/json": {
                 "schema": SyncBatch.model_json_schema()}}}})
async def post_batch(request: Request, _: Principal = Depends(authenticate),
                     dry_run: bool = Depends(dry_run_param)) -> JSONResponse:
    ctx = context(request)
    body = await read_body(request, limit=ctx.api.maxBatchBodyBytes)
    if not isinstance(body, dict) or not isinstance(body.get("objects"), list):
        raise Invalid("body must be {\"objects\": [...]}",
                      {"fields": [{"field": "objects", "message": "a list is required"}]})
    objects = body["objects"]
    if len(objects) > MAX_BATCH:
        raise ApiError(413, "BATCH_TOO_LARGE", f"{len(objects)} objects in one batch; at most {MAX_BATCH}",
                       {"count": len(objects), "limit": MAX_BATCH})
    items = []
    for i, obj in enumerate(objects):
        if not isinstance(obj, dict):
            raise Invalid(f"objects[{i}] is not an object", {"index": i})
        kind = ctx.catalog.by_kind(str(obj.get("apiVersion")), str(obj.get("kind")))  # custom kinds too
        if kind is None:
            raise Invalid(f"objects[{i}]: unknown apiVersion/kind {obj.get('apiVersion')}/{obj.get('kind')}",
                          {"index": i, "apiVersion": obj.get("apiVersion"), "kind": obj.get("kind")})
        items.append((kind, obj))
    # An upsert names no resourceVersion: a write that lost a race with a controller (a status
    # update between read and write) is planned again over what is stored now, as kube-apiserver does.
    results = await read_modify_write(lambda _: ctx.registry.batch_upsert(
        [(kind, copy.deepcopy(obj)) for kind, obj in items], dry_run=dry_run))
    return JSONResponse({"count": len(results), "dryRun": dry_run, "items": [
        {"kind": o["kind"], "name": o["metadata"]["name"], "namespace": o["metadata"].get("namespace"),
         "resourceVersion": o["metadata"].get("resourceVersion"), "created": created} for o, created in results]})
