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
* ``GET /api/v1/agent/autoscalers`` — for each workload on the cluster that a FederatedHPA owns:
  bounds in effect, metric targets, behaviour, desired total and the cluster's share — what the
  agent caches to scale alone while cut off (`drods.autoscaling.autonomy`);
* ``GET /api/v1/agent/probe-targets`` — what the agent measures the network to (C2) besides its
  ``--probe`` targets: every client site's probe endpoint (``steering.probe.clientSites``) and every
  other cluster's API endpoint, with the probe cadence (`drods.members.agent_probe`);
* ``POST /api/v1/agent/autonomy`` — the decisions the agent took while cut off; the control plane
  adopts the last one per workload as its desired total (one result per workload: ``adopted``,
  ``duplicate`` — already adopted, ``deleted`` — dropped, the workload or autoscaler is gone, or
  ``moved`` — dropped, the workload is not placed on the agent's cluster).
"""

from __future__ import annotations

import time
from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import Response, StreamingResponse
from pydantic import BaseModel, ConfigDict, Field

from drods.api.auth import Action, Principal
from drods.api.context import authenticate, context
from drods.api.json_response import JSONResponse
from drods.api.routes.autoscaling import WorkloadRef
from drods.api.routes.kubernetes import watch_alive, watch_revision, watch_stream
from drods.api.schemas import ERROR_RESPONSES
from drods.autoscaling import autonomy
from drods.autoscaling.controller import AutoscalerSettings
from drods.errors import BadRequest, Forbidden, Invalid, validation_failed
from drods.machinery.journal import Journal
from drods.model.annotations import CLUSTER_LABEL
from drods.model.keys import AUTOSCALING_PREFIX
from drods.model.kinds import CLUSTER, WORK
from drods.model.selector import parse_selector
from drods.model.timefmt import parse_rfc3339
from drods.model.work import WorkStatus, label_value
from drods.steering.settings import ProbeSettings

MAX_CLOCK_SKEW_S = 300.0


class LocalDecision(BaseModel):
    """One scaling decision an agent took alone (`drods.members.autonomy`)."""

    model_config = ConfigDict(extra="forbid")

    workload: WorkloadRef
    autoscaler: str = Field(min_length=1, max_length=253)
    uid: str = Field(default="", max_length=64)
    time: str = Field(json_schema_extra={"format": "date-time"})
    fromReplicas: int = Field(ge=0, le=1_000_000)  # the cluster's replicas before
    toReplicas: int = Field(ge=0, le=1_000_000)  # and after
    total: int = Field(ge=0, le=1_000_000)  # the workload's total this makes
    utilisation: dict[str, float] = Field(default_factory=dict, max_length=8)


class AutonomyReport(BaseModel):
    model_config = ConfigDict(extra="forbid")

    decisions: list[LocalDecision] = Field(min_length=1, max_length=10_000)


router = APIRouter(prefix="/api/v1/agent", tags=["agent"], responses=ERROR_RESPONSES)


async def _cluster_of(request: Request) -> tuple[Principal, str]:
    principal = await authenticate(request)
    principal.require(Action.WORK)
    cluster = request.query_params.get("cluster") or principal.cluster
    if not cluster:
        raise Invalid("name the cluster with ?cluster=", {"fields": [{"field": "cluster", "message": "required"}]})
    principal.require(Action.WORK, cluster)
    return principal, cluster


def _mine(obj: dict[str, Any], cluster: str) -> bool:
    return bool((obj.get("spec") or {}).get("cluster") == cluster)


@router.get("/works", summary="The Works of the token's cluster (list or watch)")
async def list_works(request: Request) -> Response:
    _, cluster = await _cluster_of(request)
    ctx = context(request)
    selector = parse_selector(f"{CLUSTER_LABEL}={label_value(cluster)}")
    q = request.query_params
    if q.get("watch") in ("true", "1"):
        rv = watch_revision(request)
        timeout = q.get("timeoutSeconds") or ""
        if timeout and not timeout.isdigit():
            raise BadRequest("timeoutSeconds must be an integer")
        # from a listed revision: the process's one watch of the Works, handed on by cluster
        shared = ctx.work_watches.watch(cluster, rv, selector) if rv > 0 else None
        return StreamingResponse(watch_stream(ctx, WORK, None, rv, selector, None,
                                               float(timeout) if timeout else None,
                                               accept=lambda obj: _mine(obj, cluster), events=shared,
                                               alive=watch_alive(ctx, request)),
                                 media_type="application/json")
    items, revision = await ctx.work_watches.list(cluster, selector)
    return JSONResponse({"kind": "WorkList", "apiVersion": WORK.api_version,
                         "metadata": {"resourceVersion": str(revision)}, "items": items})


@router.put("/works/{name}/status", summary="Report what the member holds for one Work")
async def put_status(request: Request, name: str, body: WorkStatus) -> JSONResponse:
    principal, cluster = await _cluster_of(request)
    ctx = context(request)
    work = await ctx.registry.get(WORK, name)
    if not _mine(work, cluster):
        raise Forbidden(f"Work {name} is not for cluster {cluster!r}",
                        {"role": principal.role.value, "cluster": cluster, "work": name})
    out = await ctx.registry.update_status(WORK, name, body.model_dump(mode="json"))
    return JSONResponse({"name": name, "resourceVersion": out["metadata"]["resourceVersion"],
                         "observedHash": body.observedHash, "applied": body.applied})


@router.get("/autoscalers", summary="The autoscaling bounds a pull-mode agent caches for its cluster")
async def list_autoscalers(request: Request) -> JSONResponse:
    _, cluster = await _cluster_of(request)
    items = await autonomy.cluster_autoscalers(context(request).registry, cluster)
    return JSONResponse({"kind": "AgentAutoscalerList", "cluster": cluster, "items": items})


@router.get("/probe-targets", summary="What a pull-mode agent measures the network to (C2)")
async def probe_targets(request: Request) -> JSONResponse:
    _, cluster = await _cluster_of(request)
    ctx = context(request)
    probe = ctx.probe or ProbeSettings()
    targets = [{"name": site, "url": url, "type": "ClientSite"} for site, url in sorted(probe.clientSites.items())]
    clusters, _ = await ctx.registry.list(CLUSTER)
    for c in sorted(clusters, key=lambda o: str(o["metadata"]["name"])):
        name, endpoint = str(c["metadata"]["name"]), (c.get("spec") or {}).get("endpoint")
        if name != cluster and isinstance(endpoint, str) and endpoint.startswith(("http://", "https://")):
            targets.append({"name": name, "url": endpoint, "type": "Cluster"})
    return JSONResponse({"cluster": cluster, "targets": targets, "intervalSeconds": probe.intervalSeconds,
                         "probesPerInterval": probe.probesPerInterval, "timeoutSeconds": probe.timeoutSeconds})


@router.post("/autonomy", summary="What a pull-mode agent decided while cut off; adopted as desired totals")
async def report_autonomy(request: Request, body: AutonomyReport) -> JSONResponse:
    _, cluster = await _cluster_of(request)
    ctx = context(request)
    now = time.time()
    decisions: list[autonomy.Decision] = []
    errors = []
    for i, d in enumerate(body.decisions):
        at = parse_rfc3339(d.time)
        if at is None or at > now + MAX_CLOCK_SKEW_S:
            errors.append({"field": f"decisions[{i}].time", "message": "an RFC 3339 time, not in the future"})
            continue
        w = d.workload
        decisions.append(autonomy.Decision((w.apiVersion, w.kind, w.namespace, w.name), d.autoscaler, d.uid, at,
                                           d.fromReplicas, d.toReplicas, d.total, dict(d.utilisation)))
    if errors:
        raise validation_failed("bad decision time", errors)
    journal = Journal(ctx.store, AUTOSCALING_PREFIX, retention_s=AutoscalerSettings().history_retention_s)
    results = await autonomy.adopt(ctx.registry, journal, cluster, decisions, now)
    return JSONResponse({"cluster": cluster, "results": [r.to_dict() for r in results]})
