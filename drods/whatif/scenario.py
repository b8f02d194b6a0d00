"""The scenario format of ``drods simulate`` (documented in docs/whatif.md).

A scenario is YAML or JSON: regions (UTC offset, latency to the other regions), cluster groups
(capacity, price, limit), background load (a seeded diurnal generator or a trace CSV), workloads
(generated events or an explicit list) and timed events (failures, drains, surges). Everything
is validated here, at the edge; the engine works on plain dataclasses and arrays.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from drods.errors import BadRequest, Invalid, field_errors_of
from drods.model.placement import DEFAULT_WATER_LEVEL_LIMIT
from drods.monitor.autoops import AutoOpsPolicy
from drods.scheduler.profile import Profile


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class Region(_Strict):
    name: str = Field(min_length=1)
    utcOffsetHours: float = Field(default=0.0, ge=-12, le=14)
    # to other regions (either side may say it; both: the same); same region: localLatencyMs
    latencyMs: dict[str, Annotated[float, Field(ge=0)]] = Field(default_factory=dict)
    localLatencyMs: float = Field(default=5.0, ge=0)


class ClusterGroup(_Strict):
    """``count`` identical clusters named ``<prefix>-<i>`` (prefix defaults to the region), or as
    ``names`` lists them (then ``count`` may be left out)."""

    region: str
    count: int = Field(default=1, ge=1, le=100_000)
    prefix: str | None = None
    names: list[str] = Field(default_factory=list)  # explicit names instead of <prefix>-<i>
    cpu: float = Field(default=64.0, gt=0)  # allocatable cores
    memoryGiB: float = Field(default=256.0, gt=0)
    cpuCoreHour: float = Field(default=0.04, ge=0)
    memoryGiBHour: float = Field(default=0.005, ge=0)
    egressGiB: float = Field(default=0.02, ge=0)
    waterLevelLimit: float | None = Field(default=None, gt=0, le=1)
    weight: int = Field(default=1, ge=1)  # the Static baseline's weight
    provider: str | None = None

    @model_validator(mode="after")
    def _names(self) -> ClusterGroup:
        if self.names and "count" not in self.model_fields_set:
            self.count = len(self.names)  # the names say how many
        if self.names and len(self.names) != self.count:
            raise ValueError(f"names lists {len(self.names)} clusters but count is {self.count}")
        return self


class Diurnal(_Strict):
    """cpu utilisation = base + amplitude · (1 + cos(2π (local hour − peakHour) / 24)) / 2 + noise."""

    base: float = Field(default=0.25, ge=0, le=1)
    amplitude: float = Field(default=0.35, ge=0, le=1)
    peakHour: float = Field(default=14.0, ge=0, lt=24)  # local time
    noise: float = Field(default=0.02, ge=0, le=0.5)  # sd of an AR(1) noise (correlation 0.9 per tick)
    memoryRatio: float = Field(default=0.8, ge=0, le=2)  # memory utilisation = ratio × cpu utilisation
    jitter: float = Field(default=0.05, ge=0, le=0.5)  # per-cluster spread of base and amplitude


class Background(_Strict):
    """Load the simulated workloads don't own; ``trace`` (CSV) replaces ``diurnal`` where it has data."""

    diurnal: Diurnal = Field(default_factory=Diurnal)
    trace: str | None = None  # path, relative to the scenario file
    requestsFraction: float = Field(default=1.0, ge=0, le=2)  # requests = fraction × the cluster's mean use


class WorkloadItem(_Strict):
    name: str = Field(min_length=1)
    at: float = Field(default=0.0, ge=0)  # minutes from the start
    replicas: int = Field(ge=0)
    cpu: float = Field(default=1.0, ge=0)
    memoryGiB: float = Field(default=1.0, ge=0)
    region: str | None = None  # where its users are (default: the first region)
    leaveAt: float | None = Field(default=None, ge=0)
    scale: list[tuple[float, int]] = Field(default_factory=list)  # (minute, replicas)


class WorkloadGenerator(_Strict):
    """``events`` workload events (arrivals, scalings, departures) over the scenario, seeded."""

    events: int = Field(default=200, ge=0, le=1_000_000)
    initial: int = Field(default=0, ge=0, le=1_000_000)  # workloads already running at the start (not events)
    replicas: tuple[int, int] = (2, 12)
    cpu: tuple[float, float] = (0.25, 2.0)
    memoryGiB: tuple[float, float] = (0.5, 4.0)
    scaleShare: float = Field(default=0.4, ge=0, le=1)
    leaveShare: float = Field(default=0.2, ge=0, le=1)
    followDiurnal: bool = True  # arrivals and scale-ups follow the origin region's day

    @field_validator("replicas", "cpu", "memoryGiB")
    @classmethod
    def _range(cls, v: tuple[float, float]) -> tuple[float, float]:
        low, high = v
        if low < 0 or high < low:
            raise ValueError(f"a range [low, high] with 0 ≤ low ≤ high, not [{low:g}, {high:g}]")
        return v


class Workloads(_Strict):
    generate: WorkloadGenerator | None = None
    items: list[WorkloadItem] = Field(default_factory=list)
    trafficMBps: float = Field(default=0.2, ge=0)  # per replica, to its users
    stateGiB: float = Field(default=0.5, ge=0)  # copied when a replica moves


class Event(_Strict):
    at: float = Field(ge=0)  # minutes from the start
    type: Literal["fail", "recover", "drain", "uncordon", "surge"]
    cluster: str | None = None
    region: str | None = None
    durationMinutes: float | None = Field(default=None, gt=0)  # fail/drain/surge: undone after this
    factor: float = Field(default=2.0, gt=0)  # surge: background load and the region's workloads × factor

    @model_validator(mode="after")
    def _target(self) -> Event:
        if (self.cluster is None) == (self.region is None):
            raise ValueError("an event names exactly one of cluster or region")
        return self


class Sla(_Strict):
    waterLevel: float = Field(default=DEFAULT_WATER_LEVEL_LIMIT, gt=0, le=2)
    latencyMs: float | None = Field(default=None, gt=0)


class Scenario(_Strict):
    name: str = Field(min_length=1)
    description: str = ""
    durationHours: float = Field(default=24.0, gt=0, le=24 * 31)
    tickMinutes: float = Field(default=5.0, gt=0, le=240)
    startHourUtc: float = Field(default=0.0, ge=0, lt=24)
    seed: int = 0
    regions: list[Region] = Field(min_length=1)
    clusters: list[ClusterGroup] = Field(min_length=1)
    background: Background = Field(default_factory=Background)
    workloads: Workloads = Field(default_factory=Workloads)
    events: list[Event] = Field(default_factory=list)
    sla: Sla = Field(default_factory=Sla)
    waterLevelLimit: float = Field(default=DEFAULT_WATER_LEVEL_LIMIT, gt=0, le=1)  # the placements' limit
    sustainedMinutes: float = Field(default=10.0, ge=0)  # monitoring's sustainedSeconds, in minutes
    hysteresis: float = Field(default=0.05, ge=0)  # monitoring's limitHysteresis
    autoops: AutoOpsPolicy = Field(default_factory=lambda: AutoOpsPolicy(preallocate=False))
    # the default (WaterLevel) policy's profile pluginArgs, as in a scheduler profile (docs/whatif.md)
    pluginArgs: dict[str, dict[str, Any]] = Field(default_factory=dict)

    @model_validator(mode="after")
    def _refs(self) -> Scenario:
        if self.pluginArgs:
            Profile.from_dict({"pluginArgs": self.pluginArgs})  # a ProfileError names what is wrong
        names = {r.name for r in self.regions}
        if len(names) != len(self.regions):
            twice = sorted(n for n in names if sum(r.name == n for r in self.regions) > 1)
            raise ValueError(f"regions: {', '.join(twice)} listed twice")
        said: dict[tuple[str, str], float] = {}
        for i, r in enumerate(self.regions):
            for other, ms in r.latencyMs.items():
                where = f"regions[{i}].latencyMs.{other}"
                if other not in names:
                    raise ValueError(f"{where}: unknown region {other!r}")
                if other == r.name:
                    raise ValueError(f"{where}: a region's own latency is localLatencyMs")
                back = said.get((other, r.name))
                if back is not None and back != ms:
                    raise ValueError(f"{where}: {ms:g} ms, but {other}'s latencyMs.{r.name} says {back:g} ms")
                said[(r.name, other)] = ms
        for i, g in enumerate(self.clusters):
            if g.region not in names:
                raise ValueError(f"clusters[{i}].region: unknown region {g.region!r}")
        for w in self.workloads.items:
            if w.region is not None and w.region not in names:
                raise ValueError(f"workloads.items[{w.name}]: unknown region {w.region!r}")
        for i, e in enumerate(self.events):
            if e.region is not None and e.region not in names:
                raise ValueError(f"events[{i}].region: unknown region {e.region!r}")
            if e.at >= self.durationHours * 60:
                raise ValueError(f"events[{i}].at: minute {e.at:g} is not within the scenario's "
                                 f"{self.durationHours * 60:g} minutes")
        if self.autoops.preallocate:
            raise ValueError("autoops.preallocate is not simulated (it needs the forecaster's history); set it false")
        return self

    @property
    def ticks(self) -> int:
        return max(1, int(round(self.durationHours * 60.0 / self.tickMinutes)))


def load_scenario(path: str | Path) -> tuple[Scenario, Path]:
    """Read and validate a scenario file; returns it and the folder relative paths resolve against."""
    p = Path(path)
    try:
        data: Any = yaml.safe_load(p.read_text())
    except OSError as e:
        raise BadRequest(f"cannot read {p}: {e.strerror}", {"path": str(p)}) from e
    except yaml.YAMLError as e:
        raise BadRequest(f"{p} is not valid YAML: {e}", {"path": str(p)}) from e
    return parse_scenario(data), p.parent


def parse_scenario(data: Any) -> Scenario:
    """Validate a scenario document; errors as ``VALIDATION_FAILED`` with field paths."""
    try:
        return Scenario.model_validate(data)
    except ValidationError as e:
        fields = [_placed(f) for f in field_errors_of(e.errors())]
        raise Invalid("invalid scenario: " + "; ".join(
            f"{f['field']}: {f['message']}" for f in fields[:5]),
                      {"fields": fields}) from e


def _placed(f: dict[str, Any]) -> dict[str, Any]:
    """A field error of the whole document (one that names no field of it) said to be at its root."""
    return f if f["field"] else {**f, "field": "<root>"}
