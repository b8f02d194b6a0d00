"""The pull-mode agent's side of the API (M2): its cluster's Works, and their status.

A ``cluster-agent`` token is bound to one cluster; these routes take the cluster from the token; a
``?cluster=`` naming another cluster is refused (403), so an agent started for the wrong cluster
stops at once, and an agent sees and reports only its own cluster's Works (SEC1). An admin names
the cluster with ``?cluster=`` (debugging). Status writes are audited like every
other write (the audit middleware).

* ``GET /api/v1/agent/works`` — a ``WorkList`` with ``metadata.resourceVersion``;
  ``?watch=true&resourceVersion=RV[&timeoutSeconds=N]`` streams Kubernetes-style watch events
  (one JSON object a line) after RV;
* ``PUT /api/v1/agent/works/{name}/status`` — a `WorkStatus`; 403 for another cluster's Work.
"""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse, Response, StreamingResponse

from drods.api.auth import Action, Principal
from drods.api.context import authenticate, context
from drods.api.routes.kubernetes import watch_stream
from drods.api.schemas import ERROR_RESPONSES
from drods.errors import ApiError
from drods.model.annotations import CLUSTER_LABEL
from drods.model.kinds import WORK
from drods.model.selector import parse_selector
from drods.model.work import WorkStatus, label_value

router = APIRouter(prefix="/api/v1/agent", tags=["agent"], responses=ERROR_RESPONSES)


def _cluster_of(request: Request) -> tuple[Principal, str]:
    principal = authenticate(request)
    principal.require(Action.WORK)
    cluster = request.query_params.get("cluster") or principal.cluster
    if not cluster:
        raise ApiError(422, "VALIDATION_FAILED", "name the cluster with ?cluster=",
                       {"fields": [{"field": "cluster", "message": "required"}]})
    principal.require(Action.WORK, cluster)
    return principal, cluster


def _mine(obj: dict[str, Any], cluster: str) -> bool:
    return bool((obj.get("spec") or {}).get("cluster") == cluster)


@router.get("/works", summary="The Works of the token's cluster (list or watch)")
async def list_works(request: Request) -> Response:
    _, cluster = _cluster_of(request)
    ctx = context(request)
    selector = parse_selector(f"{CLUSTER_LABEL}={label_value(cluster)}")
    q = request.query_params
    if q.get("watch") in ("true", "1"):
        rv = q.get("resourceVersion") or "0"
        timeout = q.get("timeoutSeconds") or ""
        if not rv.isdigit() or (timeout and not timeout.isdigit()):
            raise ApiError(400, "BAD_REQUEST", "resourceVersion and timeoutSeconds must be integers", {})
        return StreamingResponse(watch_stream(ctx, WORK, None, int(rv), selector, None,
                                               float(timeout) if timeout else None,
                                               accept=lambda obj: _mine(obj, cluster)),
                                 media_type="application/json")
    items, revision = await ctx.registry.list(WORK, None, selector)
    return JSONResponse({"kind": "WorkList", "apiVersion": WORK.api_version,
                         "metadata": {"resourceVersion": str(revision)},
                         "items": [o for o in items if _mine(o, cluster)]})


@router.put("/works/{name}/status", summary="Report what the member holds for one Work")
async def put_status(request: Request, name: str, body: WorkStatus) -> JSONResponse:
    principal, cluster = _cluster_of(request)
    ctx = context(request)
    work = await ctx.registry.get(WORK, name)
    if not _mine(work, cluster):
        raise ApiError(403, "FORBIDDEN", f"Work {name} is not for cluster {cluster!r}",
                       {"role": principal.role.value, "cluster": cluster, "work": name})
    out = await ctx.registry.update_status(WORK, name, body.model_dump(mode="json"))
    return JSONResponse({"name": name, "resourceVersion": out["metadata"]["resourceVersion"],
                         "observedHash": body.observedHash, "applied": body.applied})
