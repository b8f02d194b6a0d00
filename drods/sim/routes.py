"""Paths a member cluster serves that DRO-DS's own API server does not: cluster-scoped core resources
(``/api/v1/nodes``), all-namespace lists (``/api/v1/pods``), the ``scale`` subresource
(``kubectl scale``) and ``metrics.k8s.io`` (``kubectl top``) computed from live usage.

CRUD is the control plane's generic machinery (`drods.api.routes.kubernetes.dispatch`); only the
metrics and the Scale shape are sim-specific."""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable
from typing import Any

from fastapi import APIRouter, Depends, Request
from fastapi.responses import Response

from drods.api.auth import Action, Principal
from drods.api.body import read_body
from drods.api.context import authenticate, context
from drods.api.fields import parse_field_selector
from drods.api.json_response import JSONResponse
from drods.api.routes.kubernetes import dispatch, resolve, selector_of
from drods.api.table import to_table, wants_table
from drods.errors import Invalid, NotFound, not_found
from drods.model.kinds import Kind
from drods.model.quantity import format_memory, format_nanocores
from drods.model.timefmt import rfc3339
from drods.sim import kinds as K
from drods.sim.resources import Resources
from drods.sim.running import RunningSim
from drods.sim.usage import pod_key, pod_usage

Obj = dict[str, Any]
METRICS_GV = "metrics.k8s.io/v1beta1"
WINDOW = "10s"


def _sim(request: Request) -> RunningSim:
    sim: RunningSim = request.app.state.sim
    return sim


# ---- metrics.k8s.io -------------------------------------------------------------------------------


def node_usage(sim: RunningSim, now: float) -> dict[str, Resources]:
    world = sim.controller.world
    usage = {n["metadata"]["name"]: Resources() for n in world.nodes}
    shares = sim.loads.shares(world.pods)
    for pod in world.pods:
        node = (pod.get("spec") or {}).get("nodeName")
        if node in usage:
            usage[node] = usage[node] + pod_usage(pod, now, sim.cfg.usage, shares.get(pod_key(pod)))
    return usage


def _node_metrics(node: Obj, used: Resources, stamp: str) -> Obj:
    meta = node["metadata"]
    return {"kind": "NodeMetrics", "apiVersion": METRICS_GV,
            "metadata": {"name": meta["name"], "creationTimestamp": stamp, "labels": meta.get("labels", {})},
            "timestamp": stamp, "window": WINDOW,
            "usage": {"cpu": format_nanocores(used.cpu), "memory": format_memory(used.memory)}}


def _pod_metrics(pod: Obj, sim: RunningSim, now: float, stamp: str, shares: dict[str, float]) -> Obj:
    meta = pod["metadata"]
    containers = (pod.get("spec") or {}).get("containers") or [{"name": "main"}]
    total = pod_usage(pod, now, sim.cfg.usage, shares.get(pod_key(pod)))
    share = 1 / len(containers)  # the pod's usage split evenly over its containers
    return {"kind": "PodMetrics", "apiVersion": METRICS_GV,
            "metadata": {"name": meta["name"], "namespace": meta.get("namespace"), "creationTimestamp": stamp,
                         "labels": meta.get("labels", {})},
            "timestamp": stamp, "window": WINDOW,
            "containers": [{"name": c.get("name", "main"),
                            "usage": {"cpu": format_nanocores(total.cpu * share),
                                      "memory": format_memory(total.memory * share)}} for c in containers]}


def _metrics_list(kind: str, items: list[Obj]) -> JSONResponse:
    return JSONResponse({"kind": f"{kind}List", "apiVersion": METRICS_GV, "metadata": {}, "items": items})


def _running(pod: Obj) -> bool:
    return (pod.get("status") or {}).get("phase") == "Running"


def _label_filter(request: Request, items: list[Obj]) -> list[Obj]:
    selector = selector_of(request)
    if selector is None:
        return items
    return [o for o in items if selector.matches(o["metadata"].get("labels") or {})]


def _metrics_router() -> APIRouter:
    router = APIRouter(include_in_schema=False)
    base = "/apis/metrics.k8s.io/v1beta1"

    @router.get(f"{base}/nodes")
    async def list_node_metrics(request: Request, p: Principal = Depends(authenticate)) -> JSONResponse:
        p.require(Action.READ)
        sim, now = _sim(request), time.time()
        usage, stamp = node_usage(sim, now), rfc3339(now)
        nodes = _label_filter(request, sim.controller.world.nodes)
        return _metrics_list("NodeMetrics", [_node_metrics(n, usage[n["metadata"]["name"]], stamp) for n in nodes])

    @router.get(f"{base}/nodes/{{name}}")
    async def get_node_metrics(request: Request, name: str, p: Principal = Depends(authenticate)) -> JSONResponse:
        p.require(Action.READ)
        sim, now = _sim(request), time.time()
        usage = node_usage(sim, now)
        for n in sim.controller.world.nodes:
            if n["metadata"]["name"] == name:
                return JSONResponse(_node_metrics(n, usage[name], rfc3339(now)))
        raise not_found("NodeMetrics", name)

    async def pods(request: Request, namespace: str | None, name: str | None) -> JSONResponse:
        sim, now = _sim(request), time.time()
        stamp = rfc3339(now)
        shares = sim.loads.shares(sim.controller.world.pods)
        items = [p for p in sim.controller.world.pods if _running(p)
                 and (namespace is None or p["metadata"].get("namespace") == namespace)]
        if name is not None:
            for p in items:
                if p["metadata"]["name"] == name:
                    return JSONResponse(_pod_metrics(p, sim, now, stamp, shares))
            raise not_found("PodMetrics", name)
        return _metrics_list("PodMetrics", [_pod_metrics(p, sim, now, stamp, shares)
                                            for p in _label_filter(request, items)])

    @router.get(f"{base}/pods")
    async def all_pod_metrics(request: Request, p: Principal = Depends(authenticate)) -> JSONResponse:
        p.require(Action.READ)
        return await pods(request, None, None)

    @router.get(f"{base}/namespaces/{{ns}}/pods")
    async def ns_pod_metrics(request: Request, ns: str, p: Principal = Depends(authenticate)) -> JSONResponse:
        p.require(Action.READ)
        return await pods(request, ns, None)

    @router.get(f"{base}/namespaces/{{ns}}/pods/{{name}}")
    async def pod_metrics(request: Request, ns: str, name: str, p: Principal = Depends(authenticate)) -> JSONResponse:
        p.require(Action.READ)
        return await pods(request, ns, name)

    return router


# ---- scale subresource ----------------------------------------------------------------------------


def _scale_of(obj: Obj) -> Obj:
    meta = obj["metadata"]
    spec = obj.get("spec") or {}
    match = ((spec.get("selector") or {}).get("matchLabels") or {})
    return {"kind": "Scale", "apiVersion": "autoscaling/v1",
            "metadata": {k: meta[k] for k in ("name", "namespace", "uid", "resourceVersion", "creationTimestamp")
                         if k in meta},
            "spec": {"replicas": int(spec.get("replicas", 1))},
            "status": {"replicas": int((obj.get("status") or {}).get("replicas", 0)),
                       "selector": ",".join(f"{k}={v}" for k, v in sorted(match.items()))}}


def _scale_router() -> APIRouter:
    router = APIRouter(include_in_schema=False)
    scalable = {"deployments": K.DEPLOYMENT, "statefulsets": K.STATEFUL_SET, "replicasets": K.REPLICA_SET}

    @router.api_route("/apis/apps/v1/namespaces/{ns}/{plural}/{name}/scale", methods=["GET", "PUT", "PATCH"])
    async def scale(request: Request, ns: str, plural: str, name: str,
                    p: Principal = Depends(authenticate)) -> JSONResponse:
        kind = scalable.get(plural)
        if kind is None:
            raise NotFound(f"{plural} have no scale subresource", {"kind": plural})
        registry = context(request).registry
        if request.method == "GET":
            p.require(Action.READ)
            return JSONResponse(_scale_of(await registry.get(kind, name, ns)))
        p.require(Action.WRITE)
        body = await read_body(request)
        replicas: Any = None
        if isinstance(body, dict):
            replicas = (body.get("spec") or {}).get("replicas")
        elif isinstance(body, list):  # JSON patch
            for op in body:
                if isinstance(op, dict) and op.get("path") == "/spec/replicas":
                    replicas = op.get("value")
        if not isinstance(replicas, int) or replicas < 0:
            raise Invalid("spec.replicas must be a non-negative integer",
                          {"fields": [{"field": "spec.replicas", "message": "must be >= 0"}]})
        obj = await registry.patch(kind, name, {"spec": {"replicas": replicas}}, "application/merge-patch+json", ns)
        return JSONResponse(_scale_of(obj))

    return router


# ---- cluster-scoped core resources and all-namespace lists ------------------------------------------


Handler = Callable[..., Awaitable[Response]]


def _core_router(kinds: tuple[Kind, ...]) -> APIRouter:
    router = APIRouter(include_in_schema=False)
    for kind in kinds:
        if kind.group != "" or kind.plural == "namespaces":
            continue  # namespaces already have their own paths in the generic router
        _add_core_routes(router, kind)
    return router


def _add_core_routes(router: APIRouter, kind: Kind) -> None:
    base = f"/api/v1/{kind.plural}"

    async def collection(request: Request, p: Principal = Depends(authenticate)) -> Response:
        if request.method == "GET" and request.query_params.get("fieldSelector"):
            return await list_with_fields(request, p, kind.group, kind.version, kind.plural, None)
        return await dispatch(request, p, kind, None, None, None)

    router.add_api_route(base, collection, methods=["GET", "POST"] if not kind.namespaced else ["GET"])
    if kind.namespaced:
        return

    async def item(request: Request, name: str, p: Principal = Depends(authenticate)) -> Response:
        return await dispatch(request, p, kind, None, name, None)

    async def status(request: Request, name: str, p: Principal = Depends(authenticate)) -> Response:
        return await dispatch(request, p, kind, None, name, "status")

    router.add_api_route(f"{base}/{{name}}", item, methods=["GET", "PUT", "PATCH", "DELETE"])
    router.add_api_route(f"{base}/{{name}}/status", status, methods=["GET", "PUT", "PATCH"])


# ---- field selectors ------------------------------------------------------------------------------


async def list_with_fields(request: Request, p: Principal, group: str, version: str, plural: str,
                           ns: str | None) -> Response:
    kind = resolve(request, group, version, plural)
    if ns is not None and not kind.namespaced:
        raise NotFound(f"{kind.plural} are not namespaced", {"kind": kind.kind}, code="RESOURCE_TYPE_NOT_FOUND")
    text = request.query_params.get("fieldSelector") or ""
    watching = request.query_params.get("watch") in ("true", "1")
    if watching or not text or text.replace("==", "=").startswith("metadata.name=") and "," not in text:
        return await dispatch(request, p, kind, ns, None, None)
    p.require(Action.READ)
    fields = parse_field_selector(text, allowed=None)
    ctx = context(request)
    items, revision = await ctx.registry.list(kind, ns, selector_of(request))
    items = [o for o in items if fields.matches(o)]
    if wants_table(request):
        return JSONResponse(to_table(kind, items, revision, request.query_params.get("includeObject")))
    return JSONResponse({"kind": f"{kind.kind}List", "apiVersion": kind.api_version,
                         "metadata": {"resourceVersion": str(revision)}, "items": items})


def _field_router() -> APIRouter:
    """Lists with any field selector (kubectl describe node lists its pods by ``spec.nodeName``).
    Everything else — watches, name-only selectors — goes to the generic machinery unchanged."""
    router = APIRouter(include_in_schema=False)

    @router.get("/api/v1/namespaces/{ns}/{plural}")
    async def core_ns(request: Request, ns: str, plural: str, p: Principal = Depends(authenticate)) -> Response:
        return await list_with_fields(request, p, "", "v1", plural, ns)

    @router.get("/apis/{group}/{version}/namespaces/{ns}/{plural}")
    async def group_ns(request: Request, group: str, version: str, ns: str, plural: str,
                       p: Principal = Depends(authenticate)) -> Response:
        return await list_with_fields(request, p, group, version, plural, ns)

    @router.get("/apis/{group}/{version}/{plural}")
    async def group_all(request: Request, group: str, version: str, plural: str,
                        p: Principal = Depends(authenticate)) -> Response:
        return await list_with_fields(request, p, group, version, plural, None)

    return router


def sim_routers(kinds: tuple[Kind, ...]) -> list[APIRouter]:
    return [_metrics_router(), _scale_router(), _core_router(kinds), _field_router()]
