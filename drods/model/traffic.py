"""The service traffic graph (H1): who talks to whom, from mesh telemetry or agents.

``PUT /api/v1/traffic`` reports edges between workloads (by namespace/name). The graph is one
store document (``TRAFFIC_KEY``): per directed edge the smoothed ``bytesPerSecond`` and
``requestsPerSecond`` and when they were last reported. A report blends into the stored value
with weight w = 0.5^(Δt / half-life) on the old one (an exponentially weighted mean over time), and
a reader decays an edge by 0.5^(age / half-life), so traffic that stops fades out without anyone
deleting it; edges decayed below ``MIN_BYTES_PER_SECOND`` are dropped on the next write. Each edge
also keeps when it was first reported (``since``): a move for traffic (the traffic rebalance) reads
only edges reported over at least its settle window, so one report of a burst moves nothing.
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Mapping
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, model_validator

HALF_LIFE_S = 3600.0
MIN_BYTES_PER_SECOND = 1.0


class WorkloadRef(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)

    namespace: str = Field(default="default", min_length=1)
    name: str = Field(min_length=1)

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"


class TrafficEdge(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True, populate_by_name=True)

    source: WorkloadRef = Field(alias="from")
    to: WorkloadRef
    bytesPerSecond: float = Field(default=0.0, ge=0, allow_inf_nan=False)
    requestsPerSecond: float = Field(default=0.0, ge=0, allow_inf_nan=False)

    @model_validator(mode="after")
    def _between_two(self) -> TrafficEdge:
        if self.source.key == self.to.key:
            raise ValueError("to: a workload's traffic with itself places nothing: name another workload")
        return self


class TrafficReport(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)

    edges: list[TrafficEdge] = Field(min_length=1, max_length=10_000)
    timestamp: str | None = None  # RFC 3339; default: when the server receives it


def edge_key(src: str, dst: str) -> str:
    return f"{src}>{dst}"


def decay(value: float, age_s: float, half_life_s: float = HALF_LIFE_S) -> float:
    return value * math.pow(0.5, max(0.0, age_s) / half_life_s)


def merge_report(graph: Mapping[str, Any] | None, report: TrafficReport, now: float,
                 half_life_s: float = HALF_LIFE_S) -> dict[str, Any]:
    """The graph document after ``report`` (observed at ``now``, epoch seconds)."""
    edges: dict[str, dict[str, float]] = {}
    old = (graph or {}).get("edges") or {}
    for k, e in old.items():
        age = now - float(e.get("time", now))
        if decay(float(e.get("bytesPerSecond", 0.0)), age, half_life_s) >= MIN_BYTES_PER_SECOND:
            edges[k] = dict(e)
    for e in report.edges:
        k = edge_key(e.source.key, e.to.key)
        prev = edges.get(k)
        if prev is None:
            b, r, since = e.bytesPerSecond, e.requestsPerSecond, now
        else:
            w = math.pow(0.5, max(0.0, now - float(prev["time"])) / half_life_s)
            b = w * float(prev["bytesPerSecond"]) + (1 - w) * e.bytesPerSecond
            r = w * float(prev["requestsPerSecond"]) + (1 - w) * e.requestsPerSecond
            since = min(float(prev.get("since", prev["time"])), now) if "since" in prev else float("-inf")
        edges[k] = {"bytesPerSecond": b, "requestsPerSecond": r, "time": now,
                    **({"since": since} if math.isfinite(since) else {})}
    return {"edges": edges, "halfLifeSeconds": half_life_s}


def _live_edges(graph: Mapping[str, Any] | None, now: float,
                settled_s: float = 0.0) -> Iterator[tuple[str, str, float, float, float]]:
    """(from, to, bytes/s, requests/s, reported at) of each directed edge, decayed to ``now``;
    ``settled_s``: only edges reported over at least that long (an edge stored without ``since``
    predates the field and counts as settled)."""
    if not graph:
        return
    half = float(graph.get("halfLifeSeconds") or HALF_LIFE_S)
    for k, e in (graph.get("edges") or {}).items():
        src, _, dst = k.partition(">")
        if not dst or src == dst:
            continue
        at = float(e.get("time", now))
        if settled_s > 0 and "since" in e and at - float(e["since"]) < settled_s:
            continue
        yield (src, dst, decay(float(e.get("bytesPerSecond", 0.0)), now - at, half),
               decay(float(e.get("requestsPerSecond", 0.0)), now - at, half), at)


def peers(graph: Mapping[str, Any] | None, now: float, settled_s: float = 0.0) -> dict[str, dict[str, float]]:
    """Undirected, decayed bytes/s between workloads: ``{workload: {peer: bytes/s}}`` (``settled_s``: only
    the edges reported over at least that long)."""
    out: dict[str, dict[str, float]] = {}
    for src, dst, v, _, _ in _live_edges(graph, now, settled_s):
        if v <= 0:
            continue
        out.setdefault(src, {})[dst] = out.get(src, {}).get(dst, 0.0) + v
        out.setdefault(dst, {})[src] = out.get(dst, {}).get(src, 0.0) + v
    return out


def edges_now(graph: Mapping[str, Any] | None, now: float) -> list[dict[str, Any]]:
    """The directed edges decayed to ``now``, heaviest first: what ``GET /api/v1/traffic`` answers."""
    out = []
    stored = (graph or {}).get("edges") or {}
    for src, dst, b, r, at in _live_edges(graph, now):
        if b < MIN_BYTES_PER_SECOND:
            continue
        (sns, _, sname), (dns, _, dname) = src.partition("/"), dst.partition("/")
        since = (stored.get(edge_key(src, dst)) or {}).get("since")
        out.append({"from": {"namespace": sns, "name": sname}, "to": {"namespace": dns, "name": dname},
                    "bytesPerSecond": round(b, 3), "requestsPerSecond": round(r, 3), "reportedAt": at,
                    **({"firstReportedAt": since} if since is not None else {})})
    return sorted(out, key=lambda e: (-e["bytesPerSecond"], e["from"]["namespace"], e["from"]["name"]))
