"""Metrics reports from cluster agents and their normalised, scheduler-facing form.

A `MetricsReport` is the wire shape of PUT /api/v1/metrics (SPEC API6): agent vocabulary
(percentages, "available" amounts, camelCase). `normalise` turns it into a `NormalisedStatus`,
the unified model every other part of DRO-DS reads (SPEC F1/F5): used/capacity pairs in
absolute units, utilisations in 0..1, a water level, and a source and timestamp on every value
so that values merged from agents, Kubernetes and Prometheus stay honest about their age.

Internally times are float epoch seconds (cheap to compare on the hot path); datetimes appear
only at the edges (`MetricsReport.timestamp`, `NormalisedStatus.to_dict`).
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from types import MappingProxyType
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationInfo, field_validator

Source = Literal["push", "kubernetes", "prometheus"]

# The flat metric vocabulary shared by rate control, thresholds, history and forecasting.
CPU_CAPACITY = "cpu.capacity"  # cores
CPU_USED = "cpu.used"  # cores
CPU_UTILISATION = "cpu.utilisation"  # 0..1
MEMORY_CAPACITY = "memory.capacity"  # GiB
MEMORY_USED = "memory.used"  # GiB
MEMORY_UTILISATION = "memory.utilisation"  # 0..1
GPU_CAPACITY = "gpu.capacity"  # devices
GPU_USED = "gpu.used"  # devices (busy-equivalent)
GPU_UTILISATION = "gpu.utilisation"  # 0..1
STORAGE_CAPACITY = "storage.capacity"  # GiB
STORAGE_USED = "storage.used"  # GiB
STORAGE_UTILISATION = "storage.utilisation"  # 0..1
NETWORK_IN = "network.inMbps"
NETWORK_OUT = "network.outMbps"
PODS = "pods"
NODE_FREE_CPU = "largestNodeFree.cpu"  # cores
NODE_FREE_MEMORY = "largestNodeFree.memory"  # GiB
NODE_FREE_GPU = "largestNodeFree.gpu"  # devices
REQUEST_RATE = "requestRate"  # req/s
WATER_LEVEL = "waterLevel"  # 0..1, see `water_level`

METRICS: tuple[str, ...] = (
    CPU_CAPACITY,
    CPU_USED,
    CPU_UTILISATION,
    MEMORY_CAPACITY,
    MEMORY_USED,
    MEMORY_UTILISATION,
    GPU_CAPACITY,
    GPU_USED,
    GPU_UTILISATION,
    STORAGE_CAPACITY,
    STORAGE_USED,
    STORAGE_UTILISATION,
    NETWORK_IN,
    NETWORK_OUT,
    PODS,
    NODE_FREE_CPU,
    NODE_FREE_MEMORY,
    NODE_FREE_GPU,
    REQUEST_RATE,
    WATER_LEVEL,
)


@dataclass(frozen=True, slots=True)
class PushedName:
    """A report field's name (``cpuUsage``) as a view of the stored metrics: ``scale`` × ``metric``,
    or ``capacity`` − ``metric`` for the "available" fields."""

    metric: str
    scale: float = 1.0
    capacity: str | None = None


PUSHED_NAMES: Mapping[str, PushedName] = {
    "cpuCapacity": PushedName(CPU_CAPACITY),
    "cpuUsage": PushedName(CPU_UTILISATION, scale=100.0),
    "memoryCapacity": PushedName(MEMORY_CAPACITY),
    "memoryAvailable": PushedName(MEMORY_USED, capacity=MEMORY_CAPACITY),
    "gpuCapacity": PushedName(GPU_CAPACITY),
    "gpuUsage": PushedName(GPU_UTILISATION, scale=100.0),
    "storageCapacity": PushedName(STORAGE_CAPACITY),
    "storageAvailable": PushedName(STORAGE_USED, capacity=STORAGE_CAPACITY),
    "networkIn": PushedName(NETWORK_IN),
    "networkOut": PushedName(NETWORK_OUT),
}


# ---------------------------------------------------------------------------------------------
# Wire model (edge: pydantic)
# ---------------------------------------------------------------------------------------------

# No cluster measures a billion cores, GiB, devices, Mbps, pods or requests a second: a larger number is a
# broken agent's, and 1e308 printed as a 300-digit CPU column pushed every other column off `drods top`
_NonNeg = Field(default=None, ge=0, le=1e9)
_Percent = Field(default=None, ge=0, le=100)


class LargestNodeFree(BaseModel):
    """Free resources on the single emptiest node (SPEC S2: fragmentation-aware fit)."""

    model_config = ConfigDict(extra="allow", allow_inf_nan=False)

    cpu: float | None = _NonNeg
    memory: float | None = _NonNeg
    gpu: float | None = _NonNeg


class MetricsReport(BaseModel):
    """One agent push. Unknown fields are kept (``model_extra``) and ignored by scoring."""

    model_config = ConfigDict(extra="allow", allow_inf_nan=False, str_strip_whitespace=True)

    cluster: str = Field(min_length=1, max_length=253)
    timestamp: datetime | None = Field(default=None, description="when measured; omitted = when received")
    cpuCapacity: float | None = _NonNeg
    cpuUsage: float | None = _Percent
    memoryCapacity: float | None = _NonNeg
    memoryAvailable: float | None = _NonNeg
    gpuCapacity: float | None = _NonNeg
    gpuUsage: float | None = _Percent
    storageCapacity: float | None = _NonNeg
    storageAvailable: float | None = _NonNeg
    networkIn: float | None = _NonNeg
    networkOut: float | None = _NonNeg
    pods: int | None = _NonNeg
    largestNodeFree: LargestNodeFree | None = None
    requestRate: float | None = _NonNeg

    @field_validator("timestamp")
    @classmethod
    def _assume_utc(cls, v: datetime | None) -> datetime | None:
        # Agents that omit the offset are taken to mean UTC rather than the server's local zone.
        return v if v is None or v.tzinfo is not None else v.replace(tzinfo=UTC)

    @field_validator("memoryAvailable", "storageAvailable")
    @classmethod
    def _available_within_capacity(cls, v: float | None, info: ValidationInfo) -> float | None:
        cap_field = "memoryCapacity" if info.field_name == "memoryAvailable" else "storageCapacity"
        cap = info.data.get(cap_field)
        if v is not None and cap is not None and v > cap:
            raise ValueError(f"{info.field_name} ({v}) must not exceed {cap_field} ({cap})")
        return v

    @field_validator("largestNodeFree")
    @classmethod
    def _node_within_cluster(cls, v: LargestNodeFree | None, info: ValidationInfo) -> LargestNodeFree | None:
        if v is None:
            return v
        for part, cap_field in (("cpu", "cpuCapacity"), ("memory", "memoryCapacity"), ("gpu", "gpuCapacity")):
            free = getattr(v, part)
            cap = info.data.get(cap_field)
            if free is not None and cap is not None and free > cap:
                raise ValueError(f"largestNodeFree.{part} ({free}) must not exceed {cap_field} ({cap})")
        return v

    @property
    def extras(self) -> dict[str, Any]:
        return dict(self.model_extra or {})


# ---------------------------------------------------------------------------------------------
# Normalised status (inside: dataclasses)
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Measured:
    """One value with where it came from and when it was measured (SPEC F5)."""

    value: float
    source: Source
    ts: float  # epoch seconds of the measurement (not of its arrival)

    def to_dict(self) -> dict[str, Any]:
        return {"value": self.value, "source": self.source, "timestamp": iso(self.ts)}


@dataclass(frozen=True, slots=True)
class ResourceView:
    """Plain-number view of one resource for scoring code that doesn't care about provenance."""

    capacity: float | None
    used: float | None
    utilisation: float | None

    @property
    def free(self) -> float | None:
        if self.capacity is None or self.used is None:
            return None
        return max(self.capacity - self.used, 0.0)


@dataclass(frozen=True, slots=True)
class NormalisedStatus:
    """Per-cluster status as the scheduler sees it.

    ``values`` maps metric names from `METRICS` to `Measured`; a metric absent from the latest
    report is carried over from the previous status with its *original* timestamp, and dropped
    once older than the normaliser's ``max_age_s``.

    Water level (SPEC glossary "RW": usage relative to capacity) is defined as
    ``max(cpu.used / cpu.capacity, memory.used / memory.capacity)`` in 0..1: the binding
    resource decides how full a domain is. GPU and storage are excluded on purpose: most
    workloads need neither, and a full GPU pool must not make a CPU-only domain look full.
    """

    cluster: str
    ts: float  # report time, after clamping
    received_ts: float
    source: Source
    values: Mapping[str, Measured]
    clock_skew_clamped: bool = False
    extras: Mapping[str, Any] = field(default_factory=dict)

    def get(self, metric: str) -> float | None:
        m = self.values.get(metric)
        return None if m is None else m.value

    def metrics(self) -> Iterator[tuple[str, float]]:
        for name, m in self.values.items():
            yield name, m.value

    def _resource(self, prefix: str) -> ResourceView:
        return ResourceView(
            self.get(prefix + ".capacity"), self.get(prefix + ".used"), self.get(prefix + ".utilisation")
        )

    @property
    def cpu(self) -> ResourceView:
        return self._resource("cpu")

    @property
    def memory(self) -> ResourceView:
        return self._resource("memory")

    @property
    def gpu(self) -> ResourceView:
        return self._resource("gpu")

    @property
    def storage(self) -> ResourceView:
        return self._resource("storage")

    @property
    def water_level(self) -> float | None:
        return self.get(WATER_LEVEL)

    @property
    def network_mbps(self) -> float:
        return (self.get(NETWORK_IN) or 0.0) + (self.get(NETWORK_OUT) or 0.0)

    @property
    def pods(self) -> int | None:
        p = self.get(PODS)
        return None if p is None else int(p)

    def replace_values(self, values: Mapping[str, Measured]) -> NormalisedStatus:
        return NormalisedStatus(
            self.cluster,
            self.ts,
            self.received_ts,
            self.source,
            values,
            self.clock_skew_clamped,
            self.extras,
        )

    def to_dict(self) -> dict[str, Any]:
        """The JSON shape for the API: nested groups, ``{value, source, timestamp}`` leaves."""
        v = self.values

        def leaf(name: str) -> dict[str, Any] | None:
            m = v.get(name)
            return None if m is None else m.to_dict()

        def res(prefix: str) -> dict[str, Any]:
            return {k: leaf(f"{prefix}.{k}") for k in ("capacity", "used", "utilisation")}

        return {
            "cluster": self.cluster,
            "timestamp": iso(self.ts),
            "receivedAt": iso(self.received_ts),
            "source": self.source,
            "clockSkewClamped": self.clock_skew_clamped,
            "cpu": res("cpu"),
            "memory": res("memory"),
            "gpu": res("gpu"),
            "storage": res("storage"),
            "network": {"inMbps": leaf(NETWORK_IN), "outMbps": leaf(NETWORK_OUT)},
            "pods": leaf(PODS),
            "largestNodeFree": {k: leaf(f"largestNodeFree.{k}") for k in ("cpu", "memory", "gpu")},
            "requestRate": leaf(REQUEST_RATE),
            "waterLevel": leaf(WATER_LEVEL),
            "extras": dict(self.extras),
        }


@dataclass(frozen=True, slots=True)
class Rejection:
    """A report that was not applied; ``code`` is UPPER_SNAKE for API error bodies (API0c)."""

    cluster: str
    code: Literal["STALE_REPORT", "OUT_OF_ORDER_REPORT"]
    reason: str
    # A stale report is still a measurement of its time: kept for history, never for the live view.
    history: NormalisedStatus | None = None

    @property
    def stale(self) -> bool:
        return self.code == "STALE_REPORT"


def iso(ts: float) -> str:
    return datetime.fromtimestamp(ts, UTC).isoformat().replace("+00:00", "Z")


def to_epoch(t: datetime | float) -> float:
    if isinstance(t, datetime):
        if t.tzinfo is None:
            t = t.replace(tzinfo=UTC)
        return t.timestamp()
    return float(t)


def _ratio(used: float | None, cap: float | None) -> float | None:
    if used is None or cap is None or cap <= 0:
        return None
    return min(max(used / cap, 0.0), 1.0)


def water_level(values: Mapping[str, Measured]) -> Measured | None:
    """max(cpu, memory) utilisation; timestamped by the *older* of its inputs (conservative)."""
    parts = [values[k] for k in (CPU_UTILISATION, MEMORY_UTILISATION) if k in values]
    if not parts:
        return None
    top = max(parts, key=lambda m: m.value)
    return Measured(top.value, top.source, min(m.ts for m in parts))


def normalise(
    report: MetricsReport,
    now: datetime | float,
    *,
    max_skew_s: float = 30.0,
    max_age_s: float = 300.0,
    last_accepted_ts: float | None = None,
    previous: NormalisedStatus | None = None,
    source: Source = "push",
) -> NormalisedStatus | Rejection:
    """Validate a report's time and build the status the scheduler will see.

    * no timestamp → ``now``; more than ``max_skew_s`` in the future → clamped to ``now``, flagged;
    * older than ``max_age_s`` → `Rejection` carrying the report's own values (for history);
    * not newer than ``last_accepted_ts`` → `Rejection`;
    * fields the report omits are carried over from ``previous`` while younger than
      ``max_age_s`` (agents may send partial updates).
    """
    now_ts = to_epoch(now)
    ts = now_ts if report.timestamp is None else report.timestamp.timestamp()
    clamped = False
    if ts > now_ts + max_skew_s:
        ts, clamped = now_ts, True
    if ts < now_ts - max_age_s:
        return Rejection(
            report.cluster,
            "STALE_REPORT",
            f"report is {now_ts - ts:.0f}s old; a report older than {max_age_s:.0f}s is not live: it goes to the "
            "metrics history (within its retention), not to the live view",
            history=_status(report, ts, now_ts, {}, source, clamped),
        )
    if last_accepted_ts is not None and ts <= last_accepted_ts:
        return Rejection(
            report.cluster,
            "OUT_OF_ORDER_REPORT",
            f"report time {iso(ts)} is not newer than the last accepted report ({iso(last_accepted_ts)})",
        )

    vals: dict[str, Measured] = {}
    if previous is not None:
        horizon = now_ts - max_age_s
        vals = {k: m for k, m in previous.values.items() if m.ts >= horizon}
    return _status(report, ts, now_ts, vals, source, clamped)


def _status(report: MetricsReport, ts: float, now_ts: float, vals: dict[str, Measured], source: Source,
            clamped: bool) -> NormalisedStatus:
    """The report's values over ``vals`` (what is carried over), with derived ratios and water level."""

    def put(name: str, value: float | None) -> None:
        if value is not None and math.isfinite(value):
            vals[name] = Measured(float(value), source, ts)

    r = report
    put(CPU_CAPACITY, r.cpuCapacity)
    put(MEMORY_CAPACITY, r.memoryCapacity)
    put(GPU_CAPACITY, r.gpuCapacity)
    put(STORAGE_CAPACITY, r.storageCapacity)
    put(NETWORK_IN, r.networkIn)
    put(NETWORK_OUT, r.networkOut)
    put(PODS, None if r.pods is None else float(r.pods))
    put(REQUEST_RATE, r.requestRate)
    if r.largestNodeFree is not None:
        put(NODE_FREE_CPU, r.largestNodeFree.cpu)
        put(NODE_FREE_MEMORY, r.largestNodeFree.memory)
        put(NODE_FREE_GPU, r.largestNodeFree.gpu)

    # Percent-reported resources: utilisation is primary, "used" needs a known capacity.
    for prefix, pct in (("cpu", r.cpuUsage), ("gpu", r.gpuUsage)):
        if pct is not None:
            put(prefix + ".utilisation", pct / 100.0)
        util = vals.get(prefix + ".utilisation")
        cap = vals.get(prefix + ".capacity")
        if util is not None and cap is not None:
            vals[prefix + ".used"] = Measured(util.value * cap.value, source, max(util.ts, cap.ts))
    # Available-reported resources: used = capacity - available.
    for prefix, avail in (("memory", r.memoryAvailable), ("storage", r.storageAvailable)):
        cap = vals.get(prefix + ".capacity")
        if avail is not None and cap is not None:
            used = max(cap.value - avail, 0.0)
            put(prefix + ".used", used)
            u = _ratio(used, cap.value)
            if u is not None:
                put(prefix + ".utilisation", u)
    wl = water_level(vals)
    if wl is not None:
        vals[WATER_LEVEL] = wl
    else:
        vals.pop(WATER_LEVEL, None)
    return NormalisedStatus(
        cluster=r.cluster,
        ts=ts,
        received_ts=now_ts,
        source=source,
        values=vals,
        clock_skew_clamped=clamped,
        extras=r.extras,
    )


class Normaliser:
    """Per-cluster memory for `normalise`: last accepted time and last status (for carry-over)."""

    def __init__(self, *, max_skew_s: float = 30.0, max_age_s: float = 300.0) -> None:
        self.max_skew_s = max_skew_s
        self.max_age_s = max_age_s
        self._last: dict[str, NormalisedStatus] = {}

    def __call__(
        self, report: MetricsReport, now: datetime | float, source: Source = "push"
    ) -> NormalisedStatus | Rejection:
        prev = self._last.get(report.cluster)
        out = normalise(
            report,
            now,
            max_skew_s=self.max_skew_s,
            max_age_s=self.max_age_s,
            last_accepted_ts=None if prev is None else prev.ts,
            previous=prev,
            source=source,
        )
        if isinstance(out, NormalisedStatus):
            self._last[report.cluster] = out
        return out

    def latest(self, cluster: str) -> NormalisedStatus | None:
        return self._last.get(cluster)

    def latest_all(self) -> Mapping[str, NormalisedStatus]:
        """The last accepted status of every cluster this normaliser has seen (read-only view)."""
        return MappingProxyType(self._last)

    def forget(self, cluster: str) -> None:
        """Drop a deregistered cluster (SPEC API1 DELETE)."""
        self._last.pop(cluster, None)
