"""The kubelet's stats summary of a simulated node, ``GET /api/v1/nodes/{node}/proxy/stats/summary``
(reached through the API server's node proxy, as on a real cluster): its network counters and its
running pods' (`drods.sim.traffic`). Only the network part of the kubelet's document is served."""

from __future__ import annotations

import time
from typing import Any

from fastapi import APIRouter, Depends, Request

from drods.api.auth import Action, Principal
from drods.api.context import authenticate
from drods.api.json_response import JSONResponse
from drods.errors import not_found
from drods.model.timefmt import rfc3339, rfc3339_ms
from drods.sim.running import RunningSim
from drods.sim.traffic import running
from drods.sim.usage import pod_key

Obj = dict[str, Any]


def stats_summary(sim: RunningSim, node: Obj, now: float) -> Obj:
    """The kubelet's ``stats/summary`` for ``node`` (network only, plus the identifying fields)."""
    world = sim.controller.world
    sim.traffic.advance(world.nodes, world.pods, sim.cfg.usage, sim.traffic_demand.shares(world.pods), now)
    name = node["metadata"]["name"]
    stamp = rfc3339_ms(now)  # counters are advanced when read: their time is this instant
    pods = []
    for pod in sim.controller.world.pods:
        meta = pod.get("metadata") or {}
        if (pod.get("spec") or {}).get("nodeName") != name or not running(pod):
            continue
        pods.append({"podRef": {"name": meta.get("name"), "namespace": meta.get("namespace"), "uid": meta.get("uid")},
                     "startTime": (pod.get("status") or {}).get("startTime"),
                     "network": sim.traffic.pods[pod_key(pod)].doc(stamp)})
    return {"node": {"nodeName": name, "startTime": rfc3339(sim.started_at),
                     "network": sim.traffic.nodes[name].doc(stamp)}, "pods": pods}


def stats_summary_router() -> APIRouter:
    router = APIRouter(include_in_schema=False)

    @router.get("/api/v1/nodes/{name}/proxy/stats/summary")
    async def summary(request: Request, name: str, p: Principal = Depends(authenticate)) -> JSONResponse:
        p.require(Action.READ)
        sim: RunningSim = request.app.state.sim
        for n in sim.controller.world.nodes:
            if n["metadata"]["name"] == name:
                return JSONResponse(stats_summary(sim, n, time.time()))
        raise not_found("Node", name)

    return router
