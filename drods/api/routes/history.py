"""API9 history, monitoring part: ``/api/v1/history/metrics`` and ``/api/v1/history/failures``.

(``/api/v1/history/schedules`` belongs to the scheduler and lives with it.)

* ``GET /api/v1/history/metrics?cluster=&metric=&startTime=&endTime=&step=`` — ``metric`` is a stored
  name (``cpu.utilisation``, 0..1) or a report field as pushed (``cpuUsage``, percent;
  ``memoryAvailable`` = capacity − used); averages per step from the control plane's metric history
  (``local``: the SQLite series file, or the Prometheus every replica shares, see
  `drods.monitor.metric_history`), or from the cluster's own Prometheus when its object sets
  ``spec.prometheus`` (``source=auto|local|prometheus``). Times are RFC 3339; ``step`` is ``30s``,
  ``5m``, ``1h``, ``1d`` or seconds; defaults: the last hour, a step giving at most ~500 points.
* ``GET /api/v1/history/failures?startTime=&endTime=&maxEntries=100`` — the failure log, newest
  first (entry shape in `drods.monitor.history`); ``kind`` and ``cluster`` filter it.
"""

from __future__ import annotations

import math
import re
from datetime import UTC, datetime
from typing import Any, Literal

from fastapi import APIRouter, Depends, Query, Request

from drods.api.auth import Principal
from drods.api.context import authenticate, monitoring
from drods.api.json_response import JSONResponse
from drods.api.routes.admin import parse_time
from drods.api.schemas import ERROR_RESPONSES
from drods.errors import ApiError, Invalid, not_found
from drods.monitor.report import METRICS, PUSHED_NAMES, iso
from drods.monitor.series import PrometheusError
from drods.monitor.service import MonitorService

router = APIRouter(prefix="/api/v1/history", tags=["history"], responses=ERROR_RESPONSES)

_RFC3339 = {"format": "date-time"}
_STEP = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(ms|s|m|h|d|w)?\s*$")
_UNIT = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0, "d": 86_400.0, "w": 604_800.0, None: 1.0}
_NICE_STEPS = (10, 15, 30, 60, 120, 300, 600, 900, 1800, 3600, 7200, 21_600, 43_200, 86_400, 604_800)
MAX_POINTS = 11_000
MAX_STEP_S = 366 * 86_400
LATEST = 253_402_214_400.0 - 8 * 86_400  # a week before year 10000: date arithmetic stays valid
LATEST_DATE = datetime.fromtimestamp(LATEST, UTC).date().isoformat()


def _invalid(field: str, message: str) -> ApiError:
    return Invalid(f"{field}: {message}", {"fields": [{"field": field, "message": message}]})


def parse_step(value: str) -> float:
    m = _STEP.match(value)
    if not m:
        raise _invalid("step", "must be a duration like 30s, 5m, 1h, 1d, or a number of seconds such as 90")
    seconds = float(m.group(1)) * _UNIT[m.group(2)]
    if not 1.0 <= seconds <= MAX_STEP_S:
        raise _invalid("step", f"must be between 1s and {MAX_STEP_S // 86_400}d")
    return seconds


def format_step(seconds: float) -> str:
    for unit, size in (("w", 604_800), ("d", 86_400), ("h", 3600), ("m", 60)):
        if seconds >= size and seconds % size == 0:
            return f"{int(seconds // size)}{unit}"
    return f"{seconds:g}s"


def _epoch(name: str, value: str | None, default: float) -> float:
    dt = parse_time(name, value)
    if dt is None:
        return default
    t = dt.timestamp()
    if not 0 <= t <= LATEST:
        raise _invalid(name, f"must be between 1970-01-01 and {LATEST_DATE}")
    return t


def time_window(svc: MonitorService, start: str | None, end: str | None,
                default_span_s: float | None = None) -> tuple[float, float]:
    """Parsed ``[startTime, endTime]``. Without ``endTime`` nothing recent is cut off (other
    replicas' clocks may run a little ahead); the default start is the retention horizon."""
    now = svc.clock()
    e = _epoch("endTime", end, now + 86_400)
    span = default_span_s if default_span_s is not None else svc.settings.failureRetentionDays * 86_400
    s = _epoch("startTime", start, min(e, now) - span)
    if s > e:
        raise _invalid("startTime", "must not be after endTime")
    # Entries older than the retention are pruned: never walk day buckets further back than that.
    horizon = now - (svc.settings.failureRetentionDays + 1) * 86_400
    return max(s, horizon, 0.0), min(e, now + 86_400)


@router.get("/metrics", summary="Metric history of one cluster (API9)")
async def metric_history(
    request: Request,
    cluster: str = Query(min_length=1, max_length=253),
    metric: str = Query(min_length=1, max_length=64, description="e.g. waterLevel, cpu.utilisation, pods, or a "
                                                                 "name as pushed: cpuUsage (percent), memoryAvailable"),
    startTime: str | None = Query(default=None, description="RFC 3339; default endTime - 1h",
                                  json_schema_extra=_RFC3339),
    endTime: str | None = Query(default=None, description="RFC 3339; default now", json_schema_extra=_RFC3339),
    step: str | None = Query(default=None, max_length=32, description="30s, 5m, 1h, 1d; default: ~500 points"),
    source: Literal["auto", "local", "prometheus"] = Query(default="auto"),
    _: Principal = Depends(authenticate),
) -> JSONResponse:
    svc = await monitoring(request)
    pushed = PUSHED_NAMES.get(metric)
    stored = pushed.metric if pushed is not None else metric
    if stored not in METRICS:
        raise Invalid(f"metric: unknown metric {metric!r}",
                      {"fields": [{"field": "metric", "message": "unknown metric"}],
                        "allowed": [*METRICS, *PUSHED_NAMES]})
    now = svc.clock()
    end = _epoch("endTime", endTime, now)
    start = _epoch("startTime", startTime, end - 3600)
    if start >= end:
        raise _invalid("startTime", "must be before endTime")
    if step is None:
        step_s = float(next((s for s in _NICE_STEPS if (end - start) / s <= 500), _NICE_STEPS[-1]))
    else:
        step_s = parse_step(step)
    points = math.floor((end - start) / step_s) + 1
    if points > MAX_POINTS:
        raise _invalid("step", f"{points} points requested; at most {MAX_POINTS} (use a larger step)")
    info = await svc.cluster(cluster)
    known = info is not None
    chosen = svc.history.source_for(cluster, stored) if source == "auto" else source
    if chosen == "prometheus" and (info is None or not info.prometheus):
        raise _invalid("source", f"cluster {cluster!r} has no spec.prometheus URL")
    needed = [stored, *([pushed.capacity] if pushed is not None and pushed.capacity else [])]
    if chosen == "prometheus" and any(m not in svc.history.templates() for m in needed):
        raise _invalid("metric", f"no PromQL range template for {metric!r}")
    try:
        pts = await svc.history.query_from(chosen, cluster, stored, start, end, step_s, info)
        if pushed is not None and pushed.capacity:
            caps = dict(await svc.history.query_from(chosen, cluster, pushed.capacity, start, end, step_s, info))
            pts = [(t, max(caps[t] - v, 0.0)) for t, v in pts if t in caps]
        elif pushed is not None:
            pts = [(t, v * pushed.scale) for t, v in pts]
    except PrometheusError as e:
        raise ApiError(502, "PROMETHEUS_ERROR", str(e), {"cluster": cluster}) from e
    if not known and not pts:
        raise not_found("Cluster", cluster)
    body: dict[str, Any] = {
        "cluster": cluster, "metric": metric, "source": chosen,
        **({"storedAs": stored} if pushed is not None else {}),
        "startTime": iso(start), "endTime": iso(end), "step": format_step(step_s), "stepSeconds": step_s,
        "points": [{"time": iso(t), "value": v} for t, v in pts],
    }
    return JSONResponse(body)


@router.get("/failures", summary="Cluster failures, rejected reports, breaches, unschedulable attempts (API9)")
async def failure_history(
    request: Request,
    startTime: str | None = Query(default=None, description="RFC 3339; default: the retention horizon",
                                  json_schema_extra=_RFC3339),
    endTime: str | None = Query(default=None, description="RFC 3339; default now", json_schema_extra=_RFC3339),
    maxEntries: int = Query(default=100, ge=1, le=10_000),
    kind: str | None = Query(default=None, max_length=64, description="e.g. ClusterNotReady, StaleReports"),
    cluster: str | None = Query(default=None, max_length=253),
    _: Principal = Depends(authenticate),
) -> JSONResponse:
    svc = await monitoring(request)
    start, end = time_window(svc, startTime, endTime)
    page = await svc.failures.query(start, end, maxEntries, kind=kind, cluster=cluster)
    return JSONResponse({"items": page.items, "truncated": page.truncated, "startTime": iso(start),
                         "endTime": iso(end)})
