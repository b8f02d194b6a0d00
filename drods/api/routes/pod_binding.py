"""The core ``Binding`` a scheduler posts to assign a Pod to a node, as kube-apiserver serves it:
``POST /api/v1/namespaces/{ns}/pods/{name}/binding`` and ``POST /api/v1/namespaces/{ns}/bindings``
(the pod named by the body's ``metadata.name``). Create-only and never stored: it sets the Pod's
``spec.nodeName`` once — a Pod already on a node is a 409 — and answers a ``Success`` Status.
(DRO-DS's own ``bindings.multicluster.io`` are another kind.)"""

from __future__ import annotations

from typing import Any, Literal

from fastapi import APIRouter, Depends, Request
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from drods.api.auth import Action, Principal
from drods.api.body import read_body
from drods.api.context import authenticate, context
from drods.api.dryrun import is_dry_run
from drods.api.json_response import JSONResponse
from drods.errors import BadRequest, Conflict, field_errors_of
from drods.model.kinds import by_kind

router = APIRouter(include_in_schema=False)  # a Kubernetes path: in /openapi/v2 and v3, not the façade's
POD = by_kind("v1", "Pod")


class _Meta(BaseModel):
    model_config = ConfigDict(extra="allow")

    name: str = Field(default="", max_length=253)
    namespace: str | None = None


class _Target(BaseModel):
    model_config = ConfigDict(extra="allow")

    kind: Literal["Node"] = "Node"
    name: str = Field(min_length=1, max_length=253)
    apiVersion: str = "v1"


class PodBinding(BaseModel):
    """``v1/Binding``: the Pod (``metadata.name``) and the node it goes to (``target``)."""

    model_config = ConfigDict(extra="forbid")

    apiVersion: Literal["v1"] = "v1"
    kind: Literal["Binding"] = "Binding"
    metadata: _Meta = Field(default_factory=_Meta)
    target: _Target


async def _bind(request: Request, principal: Principal, ns: str, pod: str | None) -> JSONResponse:
    principal.require(Action.WRITE, namespace=ns)
    dry = is_dry_run(request)
    raw = await read_body(request)
    try:
        body = PodBinding.model_validate(raw)
    except ValidationError as e:
        raise BadRequest(f"Binding is invalid: {e.errors()[0]['msg']}", {"causes": field_errors_of(e.errors())}) from e
    name = pod or body.metadata.name
    if not name:
        raise BadRequest("Binding is invalid: metadata.name names the Pod", {"causes": [
            {"field": "metadata.name", "message": "Required value"}]})
    if pod is not None and body.metadata.name and body.metadata.name != pod:
        raise BadRequest(f"Binding is invalid: metadata.name {body.metadata.name!r} is not the Pod {pod!r}",
                         {"causes": [{"field": "metadata.name", "message": "must match the Pod's name"}]})
    assert POD is not None
    registry = context(request).registry
    obj: dict[str, Any] = await registry.get(POD, name, ns)
    spec = obj.get("spec") or {}
    if spec.get("nodeName"):
        raise Conflict(f"Operation cannot be fulfilled on pods/binding \"{name}\": pod {name} is already assigned "
                       f"to node \"{spec['nodeName']}\"", {"name": name, "kind": "pods", "nodeName": spec["nodeName"]})
    obj["spec"] = {**spec, "nodeName": body.target.name}
    await registry.update(POD, obj, ns, dry_run=dry)  # a CAS on the revision read: a racing binder gets 409
    return JSONResponse({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success", "code": 201},
                        status_code=201)


@router.post("/api/v1/namespaces/{ns}/pods/{name}/binding", status_code=201)
async def bind_pod(request: Request, ns: str, name: str, p: Principal = Depends(authenticate)) -> JSONResponse:
    return await _bind(request, p, ns, name)


@router.post("/api/v1/namespaces/{ns}/bindings", status_code=201)
async def create_binding(request: Request, ns: str, p: Principal = Depends(authenticate)) -> JSONResponse:
    return await _bind(request, p, ns, None)
