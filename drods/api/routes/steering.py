"""Traffic steering (SPEC C2, C7, F8): network status in, routes and the service directory out.

* ``PUT /api/v1/network/status`` — ``{"measurements": [{"from", "to", "delayMs", "jitterMs",
  "lossPercent", "bandwidthMbps", "timestamp"?, "source"?}]}``; merged by (``from``, ``to``) pair into
  ``/status/network/<from>/<to>`` (a missing timestamp is now). Metrics it does not know are
  ignored and named in the answer. The answer's ``nextReportSeconds`` (and ``intervalSeconds`` per
  client site) is the strictest ``statusIntervalSeconds`` of the services using those sites (C1);
  ``pairIntervalSeconds`` says it per reported (``from``, ``to``) pair — the strictest need among the
  services whose client site and instance (cluster or its city) that pair joins.
  A cluster-agent token may only report pairs whose ``to`` is its own cluster. ``GET`` answers the
  stored pairs (``?from=`` filters): each keeps its last report (``reported``) and probe result
  (``measured``, `drods.steering.probing`); the top-level fields are the fresh measurement's, else
  the report's (``source``: ``measured`` | ``reported``).
* ``GET /api/v1/network/intervals`` — every (client site, cluster or city) pair some service uses,
  with its collection interval (C1, `drods.steering.intervals`); ``?from=`` filters.
* ``GET /api/v1/steering/services`` — every published ServiceRoute, summarised.
* ``GET /api/v1/steering/services/{serviceId}/routes`` — ``{"serviceId", "strategy", "evaluation",
  "output", "routes": [{"clientSite", "instances": [{"cluster", "weight", "metric" (number or
  "MAX"), "reason"}], "changedAt"}], "updated", "changes"}``; ``?watch=true`` streams one such line
  now and one per change (NDJSON, ``timeoutSeconds`` default 1800).
* ``GET /api/v1/steering/services/{serviceId}/resolve?clientSite=…&flow=…`` — one flow's instance,
  with flow affinity (`drods.steering.flows`): ``{"cluster", "pinned", "reason", …}``; each
  resolution counts as a request from its client site (`drods.steering.demand`: the demand the
  service's users are learned from). ``?dryRun=All`` only looks (an operator, a dashboard): the
  answer the flow would get, with ``"dryRun": true`` — no pin written or renewed, no demand counted,
  so looking never moves replicas.
* ``GET /api/v1/steering/directory`` — the multi-cluster service directory (F8).
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Callable
from typing import Any

from fastapi import APIRouter, Body, Depends, Query, Request
from fastapi.responses import Response, StreamingResponse

from drods.api.auth import Action, Principal, Role
from drods.api.context import ApiContext, authenticate, context
from drods.api.dryrun import dry_run_param
from drods.api.json_response import JSONResponse
from drods.api.routes.kubernetes import watch_alive
from drods.api.schemas import ERROR_RESPONSES
from drods.api.streaming import until_stopped
from drods.errors import Conflict, NotFound
from drods.model.keys import NETWORK_PREFIX
from drods.model.kinds import CLUSTER, SERVICE_REGISTRATION, SERVICE_ROUTE
from drods.model.steering import NetworkStatus
from drods.steering.demand import DemandRecorder
from drods.steering.directory import directory
from drods.steering.flows import resolve
from drods.steering.intervals import DEFAULT_INTERVAL, pair_interval, pair_needs, site_intervals
from drods.steering.status import write_measurements

network = APIRouter(prefix="/api/v1/network", tags=["steering"], responses=ERROR_RESPONSES)
router = APIRouter(prefix="/api/v1/steering", tags=["steering"], responses=ERROR_RESPONSES)

MAX_WATCH_SECONDS = 86400.0


@network.put("/status", summary="Report network status between client sites and service sites (C2)")
async def put_network_status(request: Request, body: NetworkStatus = Body(...),
                             principal: Principal = Depends(authenticate)) -> JSONResponse:
    if principal.role is Role.CLUSTER_AGENT:
        for m in body.measurements:
            principal.require(Action.REPORT, m.to)
    ctx = context(request)
    ignored = sorted({k for m in body.measurements for k in (m.model_extra or {})})
    stored = await write_measurements(ctx.store, body.measurements)
    regs, _rev = await ctx.registry.list(SERVICE_REGISTRATION)
    intervals = site_intervals(regs, {m.source_site for m in body.measurements})
    needs = pair_needs(regs, await _cities(ctx))
    reported = sorted({(m.source_site, m.to) for m in body.measurements})
    return JSONResponse({"accepted": len(body.measurements), "pairs": len(stored), "ignored": ignored,
                         "intervalSeconds": intervals,
                         "pairIntervalSeconds": [{"from": a, "to": b, "intervalSeconds": pair_interval(needs, a, b)}
                                                 for a, b in reported],
                         "nextReportSeconds": min(intervals.values(), default=DEFAULT_INTERVAL)})


async def _cities(ctx: ApiContext) -> dict[str, str | None]:
    clusters, _rev = await ctx.registry.list(CLUSTER)
    return {str(o["metadata"]["name"]): (o.get("spec") or {}).get("city") for o in clusters}


@network.get("/intervals", summary="The collection interval per (client site, cluster or city) pair (C1)")
async def get_intervals(request: Request, source: str | None = Query(default=None, alias="from"),
                        _: Principal = Depends(authenticate)) -> JSONResponse:
    ctx = context(request)
    regs, _rev = await ctx.registry.list(SERVICE_REGISTRATION)
    needs = pair_needs(regs, await _cities(ctx))
    pairs = [n.json() for _, n in sorted(needs.items()) if source is None or n.source == source]
    return JSONResponse({"defaultIntervalSeconds": DEFAULT_INTERVAL, "pairs": pairs})


@network.get("/status", summary="The stored network status, one entry per site pair")
async def get_network_status(request: Request, source: str | None = Query(default=None, alias="from"),
                             _: Principal = Depends(authenticate)) -> JSONResponse:
    prefix = f"{NETWORK_PREFIX}{source}/" if source else NETWORK_PREFIX
    kvs, _rev = await context(request).store.range(prefix)
    return JSONResponse({"measurements": [json.loads(kv.value) for kv in kvs]})


def routes_view(obj: dict[str, Any]) -> dict[str, Any]:
    spec = obj.get("spec") or {}
    return {"serviceId": spec.get("serviceId", obj["metadata"]["name"]), "strategy": spec.get("strategy"),
            "evaluation": spec.get("evaluation"), "output": spec.get("output"), "routes": spec.get("routes") or [],
            "updated": spec.get("updated"), "changes": spec.get("changes", 0),
            "registration": spec.get("registration")}


@router.get("/services", summary="Every service with published routes")
async def list_services(request: Request, _: Principal = Depends(authenticate)) -> JSONResponse:
    items, _rev = await context(request).registry.list(SERVICE_ROUTE)
    return JSONResponse({"services": [{k: v for k, v in routes_view(o).items() if k != "routes"} for o in items]})


@router.get("/services/{service_id}/routes", summary="A service's routes per client site (C7); ?watch=true streams",
            responses={200: {"content": {"application/json": {}, "application/x-ndjson": {}}}})
async def get_routes(request: Request, service_id: str,
                     watch: bool = Query(default=False, description="stream the routes as they change (NDJSON)"),
                     timeoutSeconds: float = Query(default=1800.0, gt=0, le=MAX_WATCH_SECONDS),
                     _: Principal = Depends(authenticate)) -> Response:
    ctx = context(request)
    obj = await ctx.registry.try_get(SERVICE_ROUTE, service_id)
    if watch:
        timeout = timeoutSeconds
        rv = int(obj["metadata"]["resourceVersion"]) if obj is not None else None
        return StreamingResponse(_watch(ctx, service_id, obj, rv, timeout, watch_alive(ctx, request)),
                                 media_type="application/x-ndjson")
    if obj is None:
        raise NotFound(f"no routes for service {service_id!r} (not registered, or not evaluated yet)",
                       {"serviceId": service_id}, code="SERVICE_NOT_FOUND")
    return JSONResponse(routes_view(obj))


async def _watch(ctx: ApiContext, service_id: str, first: dict[str, Any] | None, rv: int | None,
                 timeout_s: float, alive: Callable[[], bool] | None) -> AsyncIterator[bytes]:
    import asyncio

    ctx.metrics.watches.inc()
    if rv is None:
        rv = await ctx.store.current_revision()
    events = ctx.registry.watch(SERVICE_ROUTE, None, rv)
    try:
        if first is not None:
            yield (json.dumps(routes_view(first), separators=(",", ":")) + "\n").encode()
        async with asyncio.timeout(timeout_s):
            async for event_type, obj in until_stopped(ctx.stopping, events, alive):
                if obj["metadata"]["name"] != service_id:
                    continue
                view = routes_view(obj) if event_type != "DELETED" else {"serviceId": service_id, "deleted": True}
                yield (json.dumps(view, separators=(",", ":")) + "\n").encode()
    except TimeoutError:
        return
    finally:
        ctx.metrics.watches.dec()
        await events.aclose()  # type: ignore[attr-defined]


@router.get("/services/{service_id}/resolve", summary="Resolve a flow to an instance, with flow affinity (C7)")
async def resolve_flow(request: Request, service_id: str, client_site: str = Query(alias="clientSite", min_length=1),
                       flow: str = Query(min_length=1, max_length=253, pattern=r"^[A-Za-z0-9._:-]+$"),
                       _: Principal = Depends(authenticate),
                       looking: bool = Depends(dry_run_param)) -> JSONResponse:
    ctx = context(request)
    obj = await ctx.registry.try_get(SERVICE_ROUTE, service_id)
    if obj is None:
        raise NotFound(f"no routes for service {service_id!r}", {"serviceId": service_id}, code="SERVICE_NOT_FOUND")
    spec = obj.get("spec") or {}
    route = next((r for r in spec.get("routes") or [] if r.get("clientSite") == client_site), None)
    if route is None:
        raise NotFound(f"service {service_id!r} does not serve client site {client_site!r}",
                       {"serviceId": service_id, "clientSite": client_site}, code="CLIENT_SITE_NOT_FOUND")
    ref = spec.get("registration") or {}
    reg = await ctx.registry.try_get(SERVICE_REGISTRATION, str(ref.get("name")), str(ref.get("namespace") or "default"))
    timeout = float((((reg or {}).get("spec") or {}).get("flowAffinity") or {}).get("timeoutSeconds") or 300.0)
    res = await resolve(ctx.store, service_id, route, flow, timeout, pin=not looking)
    if not looking:  # a client's request: where the users are (steering.users); a look is no user's
        if ctx.demand is None:
            ctx.demand = DemandRecorder(ctx.store)
        await ctx.demand.count(service_id, client_site)
    if res is None:
        raise Conflict(f"service {service_id!r} has no instance for client site {client_site!r}",
                       {"serviceId": service_id, "clientSite": client_site},
                       code="NO_ROUTE")
    return JSONResponse({"serviceId": service_id, "clientSite": client_site, "flow": flow, "cluster": res.cluster,
                         "pinned": res.pinned, "reason": res.reason, "affinityTimeoutSeconds": timeout,
                         **({"dryRun": True} if looking else {})})


@router.get("/directory", summary="The multi-cluster service directory (F8, KEP-1645)")
async def get_directory(request: Request, _: Principal = Depends(authenticate)) -> JSONResponse:
    ctx = context(request)
    return JSONResponse({"services": await directory(ctx.registry)})
