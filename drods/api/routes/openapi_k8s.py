"""The OpenAPI documents kubectl reads (``/openapi/v3``, ``/openapi/v3/apis/<g>/<v>``, ``/openapi/v2``).

kubectl fetches them before ``apply`` to learn whether the server validates fields itself (the
``fieldValidation`` query parameter on a kind's PATCH operation, found by its
``x-kubernetes-group-version-kind``); when it does, kubectl skips client-side validation and lets the
server — always strict — answer. ``kubectl explain`` reads the component schemas, which are generated
from the same pydantic models the registry validates with, so documentation and validation agree.
"""

from __future__ import annotations

import copy
import functools
import hashlib
import json
from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import Response
from pydantic import BaseModel
from pydantic.json_schema import models_json_schema

from drods import __version__
from drods.api.context import authenticate, context
from drods.api.json_response import JSONResponse
from drods.api.status import kubernetes_error_response
from drods.errors import ApiError, NotFound
from drods.model.kinds import Kind
from drods.model.meta import ObjectMeta

router = APIRouter(include_in_schema=False)

Schema = dict[str, Any]

META_PREFIX = "io.k8s.apimachinery.pkg.apis.meta.v1"
OBJECT_META = f"{META_PREFIX}.ObjectMeta"
LIST_META = f"{META_PREFIX}.ListMeta"
STATUS = f"{META_PREFIX}.Status"
# What client-go asks for; the answer is labelled without the "@", which Go cannot parse in a Content-Type.
V2_PROTOBUF = "application/com.github.proto-openapi.spec.v2.v1.0+protobuf"
_REF = "#/components/schemas/"


def schema_prefix(group: str, version: str) -> str:
    """Kubernetes' naming: ``io.k8s.api.apps.v1`` for built-in groups, reversed domain for others."""
    if "." in group:
        return ".".join(reversed(group.split("."))) + f".{version}"
    return f"io.k8s.api.{group or 'core'}.{version}"


def gv_path(group: str, version: str) -> str:
    """Index key of a group-version, as client-go computes it."""
    return f"apis/{group}/{version}" if group else f"api/{version}"


def _ref(name: str) -> Schema:
    return {"$ref": f"{_REF}{name}"}


def _to_openapi30(node: Any) -> Any:
    """Rewrite pydantic's JSON Schema 2020-12 into the OpenAPI 3.0 dialect Go's kube-openapi parses
    (``nullable`` instead of a null branch, boolean ``exclusiveMinimum``, ``allOf`` around a
    ``$ref`` that has siblings, no ``const``/``title``)."""
    if isinstance(node, list):
        return [_to_openapi30(n) for n in node]
    if not isinstance(node, dict):
        return node
    out: Schema = {}
    for key, value in node.items():
        if key == "title":
            continue
        if key == "const":
            out["enum"] = [value]
        elif key in ("exclusiveMinimum", "exclusiveMaximum") and not isinstance(value, bool):
            out[key.replace("exclusive", "").lower()] = value
            out[key] = True
        elif key in ("properties", "$defs", "patternProperties"):
            out[key] = {k: _to_openapi30(v) for k, v in value.items()}
        else:
            out[key] = _to_openapi30(value)
    branches = out.get("anyOf")
    if isinstance(branches, list) and any(b == {"type": "null"} for b in branches):
        rest = [b for b in branches if b != {"type": "null"}]
        del out["anyOf"]
        out["nullable"] = True
        if len(rest) == 1:
            only = rest[0]
            if "$ref" in only:
                out["allOf"] = [only]
            else:
                out = {**only, **out}
        elif rest:
            out["anyOf"] = rest
    if "$ref" in out and len(out) > 1:
        ref = out.pop("$ref")
        out["allOf"] = [{"$ref": ref}]
    if not out or set(out) <= {"default", "description", "nullable"}:
        out["x-kubernetes-preserve-unknown-fields"] = True
    return out


def _model_schemas(models: list[type[BaseModel]], prefix: str) -> dict[str, Schema]:
    """Component schemas for ``models`` and every model they reference, named ``<prefix>.<Class>``."""
    _, defs = models_json_schema([(m, "validation") for m in models], ref_template="#/$defs/{model}")
    raw_defs: dict[str, Schema] = defs.get("$defs", {})

    def rename(node: Any) -> Any:
        if isinstance(node, list):
            return [rename(n) for n in node]
        if isinstance(node, dict):
            out = {k: rename(v) for k, v in node.items()}
            ref = out.get("$ref")
            if isinstance(ref, str) and ref.startswith("#/$defs/"):
                out["$ref"] = f"{_REF}{prefix}.{ref.removeprefix('#/$defs/')}"
            return out
        return node

    return {f"{prefix}.{name}": _to_openapi30(rename(s)) for name, s in raw_defs.items()}


def _gvk(kind: Kind, kind_name: str | None = None) -> list[dict[str, str]]:
    return [{"group": kind.group, "version": kind.version, "kind": kind_name or kind.kind}]


def _object_schema(kind: Kind, prefix: str) -> Schema:
    properties: dict[str, Schema] = {
        "apiVersion": {"type": "string", "description": f"always {kind.api_version}"},
        "kind": {"type": "string", "description": f"always {kind.kind}"},
        "metadata": {"allOf": [_ref(OBJECT_META)], "description": "standard object metadata"},
    }
    schema: Schema = {"type": "object", "properties": properties,
                      "x-kubernetes-group-version-kind": _gvk(kind)}
    if kind.custom is not None:  # a CRD's kind: its own schema, with Kubernetes' identity fields
        custom = _to_openapi30(copy.deepcopy(kind.custom.schema))
        custom["properties"] = {**(custom.get("properties") or {}), **properties}
        custom["x-kubernetes-group-version-kind"] = _gvk(kind)
        custom.setdefault("description", f"{kind.kind} ({kind.api_version}), defined by a CustomResourceDefinition.")
        return dict(custom)
    if kind.spec_model is None:
        # Workload templates are kept as given: any field is accepted and passed on to members.
        schema["description"] = f"{kind.kind} template, stored as submitted and propagated to member clusters."
        schema["x-kubernetes-preserve-unknown-fields"] = True
        return schema
    doc = (kind.spec_model.__doc__ or "").strip()
    schema["description"] = doc.splitlines()[0] if doc else f"DRO-DS {kind.kind}."
    schema["additionalProperties"] = False
    properties["spec"] = {"allOf": [_ref(f"{prefix}.{kind.spec_model.__name__}")], "description": "desired state"}
    properties["status"] = {"type": "object", "description": "observed state, written by DRO-DS controllers",
                            "x-kubernetes-preserve-unknown-fields": True}
    return schema


def _list_schema(kind: Kind, prefix: str) -> Schema:
    return {
        "type": "object", "description": f"A list of {kind.plural}.", "required": ["items"],
        "properties": {
            "apiVersion": {"type": "string"}, "kind": {"type": "string"},
            "metadata": {"allOf": [_ref(LIST_META)]},
            "items": {"type": "array", "items": _ref(f"{prefix}.{kind.kind}")},
        },
        "x-kubernetes-group-version-kind": _gvk(kind, f"{kind.kind}List"),
    }


_COMMON_SCHEMAS: dict[str, Schema] = {
    LIST_META: {"type": "object", "properties": {"resourceVersion": {"type": "string"},
                                                 "continue": {"type": "string"}}},
    STATUS: {"type": "object", "description": "Result of a failed call (and of a completed delete).",
             "properties": {"apiVersion": {"type": "string"}, "kind": {"type": "string"},
                            "status": {"type": "string"}, "message": {"type": "string"},
                            "reason": {"type": "string"}, "code": {"type": "integer"},
                            "details": {"type": "object", "x-kubernetes-preserve-unknown-fields": True}},
             "x-kubernetes-group-version-kind": [{"group": "", "version": "v1", "kind": "Status"}]},
}


def _param(name: str, description: str, *, location: str = "query", required: bool = False,
           kind: str = "string") -> Schema:
    return {"name": name, "in": location, "description": description, "required": required,
            "schema": {"type": kind}, "uniqueItems": True}


FIELD_VALIDATION = _param(
    "fieldValidation",
    "Strict, Warn or Ignore. DRO-DS always validates strictly: unknown or duplicate fields and bad "
    "values are refused with a 422 naming each field.",
)
FIELD_MANAGER = _param("fieldManager", "Name of the actor making the change (recorded, not enforced).")
FORCE = _param("force", "Server-side apply: take over conflicting fields.", kind="boolean")
DRY_RUN = _param("dryRun", "All: validate and default the object and answer as if written; nothing is stored.")
_LIST_PARAMS = [
    _param("labelSelector", "Only objects whose labels match, e.g. env=prod,tier in (a,b)."),
    _param("fieldSelector", "Only objects whose fields match: metadata.name and metadata.namespace on every kind "
           "(a Work also by spec.binding and spec.cluster, an Event by involvedObject.*), e.g. metadata.name=web."),
    _param("watch", "Stream ADDED/MODIFIED/DELETED events instead of a list.", kind="boolean"),
    _param("resourceVersion", "Watch from this revision (exclusive)."),
    _param("timeoutSeconds", "End a watch after this many seconds.", kind="integer"),
]
_PATCH_TYPES = ("application/merge-patch+json", "application/json-patch+json", "application/apply-patch+yaml")


def _response(name: str, description: str = "OK") -> Schema:
    return {"description": description, "content": {"application/json": {"schema": _ref(name)}}}


def _operation(kind: Kind, action: str, op_id: str, schema_name: str, *, params: list[Schema] | None = None,
               body: tuple[str, ...] = (), created: bool = False, gvk_kind: str | None = None) -> Schema:
    op: Schema = {
        "operationId": op_id, "tags": [kind.api_version],
        "description": f"{action} {kind.plural}",
        "parameters": params or [],
        "responses": {"200": _response(schema_name), "401": {"description": "Unauthorized"},
                      "default": _response(STATUS, "Error (a Kubernetes Status)")},
        "x-kubernetes-action": action,
        "x-kubernetes-group-version-kind": _gvk(kind, gvk_kind)[0],
    }
    if created:
        op["responses"]["201"] = _response(schema_name, "Created")
    if body:
        content_schema = {"type": "object"} if body == _PATCH_TYPES else _ref(schema_name)
        op["requestBody"] = {"required": True, "content": {t: {"schema": content_schema} for t in body}}
    return op


def _paths(kind: Kind, prefix: str) -> dict[str, Schema]:
    base = f"/apis/{kind.group}/{kind.version}" if kind.group else f"/api/{kind.version}"
    obj, lst = f"{prefix}.{kind.kind}", f"{prefix}.{kind.kind}List"
    op_kind = kind.kind
    name_param = _param("name", f"name of the {kind.kind}", location="path", required=True)
    ns_param = _param("namespace", "object name and auth scope", location="path", required=True)
    scope = [ns_param] if kind.namespaced else []
    collection = f"{base}/namespaces/{{namespace}}/{kind.plural}" if kind.namespaced else f"{base}/{kind.plural}"
    item = f"{collection}/{{name}}"
    writes = [FIELD_VALIDATION, FIELD_MANAGER, DRY_RUN]
    paths: dict[str, Schema] = {
        collection: {
            "parameters": scope,
            "get": _operation(kind, "list", f"list{op_kind}", lst, params=_LIST_PARAMS, gvk_kind=None),
            "post": _operation(kind, "post", f"create{op_kind}", obj, params=writes,
                               body=("application/json", "application/yaml"), created=True),
        },
        item: {
            "parameters": [name_param, *scope],
            "get": _operation(kind, "get", f"read{op_kind}", obj),
            "put": _operation(kind, "put", f"replace{op_kind}", obj, params=writes,
                              body=("application/json", "application/yaml"), created=True),
            "patch": _operation(kind, "patch", f"patch{op_kind}", obj, params=[*writes, FORCE],
                                body=_PATCH_TYPES, created=True),
            "delete": _operation(kind, "delete", f"delete{op_kind}", STATUS, params=[DRY_RUN]),
        },
    }
    if kind.namespaced:
        paths[f"{base}/{kind.plural}"] = {
            "get": _operation(kind, "list", f"list{op_kind}ForAllNamespaces", lst, params=_LIST_PARAMS),
        }
    if kind.spec_model is not None or (kind.custom is not None and kind.has_status):
        paths[f"{item}/status"] = {
            "parameters": [name_param, *scope],
            "get": _operation(kind, "get", f"read{op_kind}Status", obj),
            "put": _operation(kind, "put", f"replace{op_kind}Status", obj, params=writes,
                              body=("application/json",)),
            "patch": _operation(kind, "patch", f"patch{op_kind}Status", obj, params=[*writes, FORCE],
                                body=_PATCH_TYPES),
        }
    return paths


@functools.lru_cache(maxsize=16)
def group_version_documents(kinds: tuple[Kind, ...]) -> dict[str, Schema]:
    """One OpenAPI 3.0 document per served group-version, keyed by its index path (``apis/g/v``)."""
    by_gv: dict[tuple[str, str], list[Kind]] = {}
    for k in kinds:
        by_gv.setdefault((k.group, k.version), []).append(k)
    docs: dict[str, Schema] = {}
    for (group, version), gv_kinds in by_gv.items():
        prefix = schema_prefix(group, version)
        schemas = _model_schemas([ObjectMeta], META_PREFIX)
        schemas.update(_model_schemas([k.spec_model for k in gv_kinds if k.spec_model is not None], prefix))
        schemas.update(copy.deepcopy(_COMMON_SCHEMAS))
        paths: dict[str, Schema] = {}
        for k in gv_kinds:
            schemas[f"{prefix}.{k.kind}"] = _object_schema(k, prefix)
            schemas[f"{prefix}.{k.kind}List"] = _list_schema(k, prefix)
            paths.update(_paths(k, prefix))
        docs[gv_path(group, version)] = {
            "openapi": "3.0.0",
            "info": {"title": "DRO-DS", "version": __version__},
            "paths": paths,
            "components": {"schemas": dict(sorted(schemas.items())),
                           "securitySchemes": {"BearerToken": {"type": "apiKey", "name": "authorization",
                                                               "in": "header"}}},
            "security": [{"BearerToken": []}],
        }
    return docs


def _hash(doc: Schema) -> str:
    return hashlib.sha512(json.dumps(doc, sort_keys=True).encode()).hexdigest().upper()


def v2_document(kinds: tuple[Kind, ...]) -> Schema:
    """Swagger 2.0 for old clients and tools: the same schemas, refs rewritten to ``#/definitions``."""
    definitions: dict[str, Schema] = {}
    for doc in group_version_documents(kinds).values():
        definitions.update(doc["components"]["schemas"])
    text = json.dumps(definitions).replace(f'"{_REF}', '"#/definitions/')
    return {"swagger": "2.0", "info": {"title": "DRO-DS", "version": __version__}, "paths": {},
            "definitions": json.loads(text)}


def _protobuf_string(field: int, value: bytes) -> bytes:
    """One length-delimited protobuf field (wire type 2)."""
    out = bytearray([field << 3 | 2])
    n = len(value)
    while n >= 0x80:
        out.append(n & 0x7F | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out) + value


def v2_protobuf() -> bytes:
    """A gnostic ``openapi.v2.Document`` with only ``swagger`` and ``info``: client-go insists on
    protobuf here, and with no definitions kubectl skips client-side checks for our kinds and
    leaves validation to the (strict) server."""
    info = _protobuf_string(1, b"DRO-DS") + _protobuf_string(2, __version__.encode())
    return _protobuf_string(1, b"2.0") + _protobuf_string(2, info)


async def _authenticated(request: Request) -> JSONResponse | None:
    """Any valid token may read the schemas (as Kubernetes' ``system:discovery``); errors are Status."""
    try:
        await authenticate(request)
    except ApiError as e:
        return kubernetes_error_response(e)
    return None


@router.get("/openapi/v3")
async def openapi_v3_index(request: Request) -> Response:
    if (denied := await _authenticated(request)) is not None:
        return denied
    docs = group_version_documents(context(request).kinds)
    return JSONResponse({"paths": {path: {"serverRelativeURL": f"/openapi/v3/{path}?hash={_hash(doc)}"}
                                   for path, doc in docs.items()}})


@router.get("/openapi/v3/{gv:path}")
async def openapi_v3_group_version(request: Request, gv: str) -> Response:
    if (denied := await _authenticated(request)) is not None:
        return denied
    doc = group_version_documents(context(request).kinds).get(gv.strip("/"))
    if doc is None:
        return kubernetes_error_response(NotFound(f"no OpenAPI document for {gv!r}", {"name": gv}))
    headers = {"Cache-Control": "public, immutable"} if request.query_params.get("hash") else None
    return JSONResponse(doc, headers=headers)


@router.get("/openapi/v2")
async def openapi_v2(request: Request) -> Response:
    if (denied := await _authenticated(request)) is not None:
        return denied
    accept = request.headers.get("accept", "")
    if "protobuf" in accept and "json" not in accept:
        return Response(v2_protobuf(), media_type=V2_PROTOBUF)
    return JSONResponse(v2_document(context(request).kinds))
