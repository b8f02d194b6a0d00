"""``/api/v1/componentstatuses`` (``kubectl get componentstatuses``, ``cs``): the health of the control
plane's parts as kube-apiserver reports its scheduler, controller manager and etcd — here the store and
every single-active component, healthy while some process holds its leader lease
(``/leases/<name>``, `drods.machinery.leader`). Read-only and computed, never stored."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Depends, Request

from drods.api.auth import Principal
from drods.api.context import authenticate, context
from drods.api.json_response import JSONResponse
from drods.api.table import NAME, Column, PrintedKind, to_table, wants_table
from drods.errors import NotFound
from drods.model.keys import LEASES_PREFIX
from drods.store import Store

router = APIRouter(include_in_schema=False)  # a Kubernetes path: in /openapi/v2 and v3, not the façade's
COMPONENT_STATUS = PrintedKind(
    "", "v1", "ComponentStatus", "componentstatuses", False, short_names=("cs",), verbs=("get", "list"),
    columns=(NAME, Column("Status", lambda o: "Healthy" if _healthy(o) else "Unhealthy"),
             Column("Message", lambda o: (o.get("conditions") or [{}])[0].get("message")),
             Column("Error", lambda o: (o.get("conditions") or [{}])[0].get("error"))))
# shown even when nobody leads them: a control plane without them places nothing
EXPECTED = ("scheduler", "member-controllers")


def _healthy(obj: dict[str, Any]) -> bool:
    return any(c.get("type") == "Healthy" and c.get("status") == "True" for c in obj.get("conditions") or [])


def _status(name: str, healthy: bool, message: str, error: str = "") -> dict[str, Any]:
    cond: dict[str, Any] = {"type": "Healthy", "status": "True" if healthy else "False", "message": message}
    if error:
        cond["error"] = error
    return {"kind": "ComponentStatus", "apiVersion": "v1", "metadata": {"name": name}, "conditions": [cond]}


async def component_statuses(store: Store) -> tuple[list[dict[str, Any]], int]:
    """The store first (reading the leases is its health check), then each component by lease name."""
    try:
        leases, revision = await store.range(LEASES_PREFIX)
    except Exception as e:  # noqa: BLE001 - an unreachable store is what this reports
        return [_status("store", False, "", f"{type(e).__name__}: {e}")], 0
    held = {kv.key[len(LEASES_PREFIX):]: kv.value.decode(errors="replace") for kv in leases}
    out = [_status("store", True, "ok")]
    for name in sorted(set(held) | set(EXPECTED)):
        who = held.get(name)
        out.append(_status(name, who is not None, f"led by {who}" if who else "",
                           "" if who else "no process holds its leader lease"))
    return out, revision


@router.get("/api/v1/componentstatuses")
async def list_component_statuses(request: Request, _: Principal = Depends(authenticate)) -> JSONResponse:
    items, revision = await component_statuses(context(request).store)
    if wants_table(request):
        return JSONResponse(to_table(COMPONENT_STATUS, items, revision))
    return JSONResponse({"kind": "ComponentStatusList", "apiVersion": "v1",
                         "metadata": {"resourceVersion": str(revision)}, "items": items})


@router.get("/api/v1/componentstatuses/{name}")
async def get_component_status(request: Request, name: str, _: Principal = Depends(authenticate)) -> JSONResponse:
    items, revision = await component_statuses(context(request).store)
    found = next((i for i in items if i["metadata"]["name"] == name), None)
    if found is None:
        raise NotFound(f'componentstatuses "{name}" not found',
                       {"kind": "componentstatuses", "name": name, "group": ""})
    if wants_table(request):
        return JSONResponse(to_table(COMPONENT_STATUS, [found], revision))
    return JSONResponse(found)
