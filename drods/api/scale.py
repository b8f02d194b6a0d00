"""The ``/scale`` subresource (``autoscaling/v1`` Scale), so ``kubectl scale`` works on Deployments,
StatefulSets, ReplicaSets, ReplicationControllers and on custom resources whose definition declares
``subresources.scale``: a read answers the replicas (spec and status) and the selector where the
kind keeps them; a write (PUT of a Scale, or any patch of one) changes only the spec replicas of
the object, through the registry like any other write (``dryRun`` honoured, resourceVersion kept).
"""

from __future__ import annotations

from typing import Any

import jsonpatch
from fastapi import Request

from drods.api.body import read_body
from drods.api.context import ApiContext
from drods.api.dryrun import is_dry_run
from drods.api.json_response import JSONResponse
from drods.errors import ApiError, BadRequest, Conflict, Invalid
from drods.model.kinds import Kind
from drods.model.selector import LabelSelector
from drods.registry.patch import merge_patch

Obj = dict[str, Any]


def _at(obj: Obj, path: str) -> Any:
    cur: Any = obj
    for part in path.strip(".").split("."):
        if not isinstance(cur, dict):
            return None
        cur = cur.get(part)
    return cur


def _selector_text(value: Any) -> str:
    """A selector as Scale's ``status.selector`` string (a LabelSelector, a plain map, or text)."""
    if isinstance(value, str):
        return value
    if not isinstance(value, dict):
        return ""
    if "matchLabels" not in value and "matchExpressions" not in value:
        return ",".join(f"{k}={v}" for k, v in sorted(value.items()))  # a ReplicationController's map
    sel = LabelSelector.model_validate(value)
    parts = [f"{k}={v}" for k, v in sorted(sel.matchLabels.items())]
    for e in sel.matchExpressions:
        values = ",".join(e.values)
        parts.append({"In": f"{e.key} in ({values})", "NotIn": f"{e.key} notin ({values})",
                      "Exists": e.key, "DoesNotExist": f"!{e.key}"}[e.operator])
    return ",".join(parts)


def scale_of(kind: Kind, obj: Obj) -> Obj:
    spec_path, status_path, selector_path = kind.scale_paths or ("", "", "")
    meta = obj.get("metadata") or {}
    status: Obj = {"replicas": int(_at(obj, status_path) or 0)}
    selector = _selector_text(_at(obj, selector_path)) if selector_path else ""
    if selector:
        status["selector"] = selector
    return {"apiVersion": "autoscaling/v1", "kind": "Scale",
            "metadata": {k: meta[k] for k in ("name", "namespace", "uid", "resourceVersion", "creationTimestamp")
                         if k in meta},
            "spec": {"replicas": int(_at(obj, spec_path) or 0)}, "status": status}


def _wanted(current: Obj, body: Any, method: str, content_type: str) -> Obj:
    """The Scale a PUT or PATCH asks for."""
    if method == "PUT":
        return body if isinstance(body, dict) else {}
    if content_type.startswith("application/json-patch+json"):
        try:
            return dict(jsonpatch.apply_patch(current, body))
        except (jsonpatch.JsonPatchException, jsonpatch.JsonPointerException, TypeError) as e:
            raise BadRequest(f"the JSON patch does not apply to the Scale: {e}") from e
    return dict(merge_patch(current, body))  # merge, strategic merge and apply all mean the same here


async def serve_scale(ctx: ApiContext, request: Request, kind: Kind, name: str, namespace: str | None) -> JSONResponse:
    obj = await ctx.registry.get(kind, name, namespace)
    current = scale_of(kind, obj)
    if request.method == "GET":
        return JSONResponse(current)
    if request.method not in ("PUT", "PATCH"):
        raise ApiError(405, "METHOD_NOT_ALLOWED", f"{request.method} is not allowed on /scale",
                       {"method": request.method, "allowed": ["GET", "PUT", "PATCH"]})
    wanted = _wanted(current, await read_body(request), request.method, request.headers.get("content-type", ""))
    replicas = (wanted.get("spec") or {}).get("replicas")
    if not isinstance(replicas, int) or isinstance(replicas, bool) or replicas < 0:
        raise Invalid("spec.replicas must be a non-negative integer",
                      {"fields": [{"field": "spec.replicas", "message": "must be a non-negative integer"}]})
    rv = (wanted.get("metadata") or {}).get("resourceVersion")
    if rv and str(rv) != str(obj["metadata"]["resourceVersion"]):
        raise Conflict(f"the {kind.kind} {name} changed since resourceVersion {rv}", {"name": name})
    spec_path = (kind.scale_paths or (".spec.replicas",))[0]
    patch: Obj = {}
    cur = patch
    parts = spec_path.strip(".").split(".")
    for part in parts[:-1]:
        cur = cur.setdefault(part, {})
    cur[parts[-1]] = replicas
    patch["metadata"] = {"resourceVersion": obj["metadata"]["resourceVersion"]}
    updated = await ctx.registry.patch(kind, name, patch, "application/merge-patch+json", namespace,
                                       dry_run=is_dry_run(request))
    return JSONResponse(scale_of(kind, updated))
