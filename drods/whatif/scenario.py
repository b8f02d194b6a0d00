"""The scenario format of ``drods simulate`` (documented in docs/whatif.md).

A scenario is YAML or JSON: regions (UTC offset, latency to the other regions), cluster groups
(capacity, price, limit), background load (a seeded diurnal generator or a trace CSV), workloads
(generated events or an explicit list) and timed events (failures, drains, surges). Everything
is validated here, at the edge; the engine works on plain dataclasses and arrays.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Annotated, Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from drods.errors import BadRequest, Invalid, field_errors_of
from drods.model.placement import DEFAULT_WATER_LEVEL_LIMIT
from drods.monitor.autoops import AutoOpsPolicy
from drods.scheduler.profile import Profile

# The simulation's size, validated up front (docs/whatif.md): its arrays are ticks × clusters (float32 per
# policy, float64 for the background load). Every shipped scenario has 288 ticks; fleet-1000 288,000 cells.
MAX_TICKS = 50_000  # 31 days of 1-minute ticks are 44,640
MAX_CELLS = 10_000_000  # ticks × clusters: ≈ 35 × fleet-1000, ≈ 0.2 GB of arrays


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
    seed: int = Field(default=0, ge=0)  # numpy's generators take no negative seed
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
        self._size()
        self._cluster_names()
        minutes = self.durationHours * 60
        seen: dict[str, int] = {}
        for i, w in enumerate(self.workloads.items):
            _check_item(f"workloads.items[{i}]", w, minutes, names, seen.get(w.name), self.workloads.generate)
            seen[w.name] = i
        for i, e in enumerate(self.events):
            if e.region is not None and e.region not in names:
                raise ValueError(f"events[{i}].region: unknown region {e.region!r}")
            if e.at >= self.durationHours * 60:
                raise ValueError(f"events[{i}].at: minute {e.at:g} is not within the scenario's "
                                 f"{self.durationHours * 60:g} minutes")
        if self.autoops.preallocate:
            raise ValueError("autoops.preallocate is not simulated (it needs the forecaster's history); set it false")
        return self

    def _size(self) -> None:
        """The simulation's size within MAX_TICKS and MAX_CELLS (its arrays are ticks × clusters)."""
        ticks = self.durationHours * 60.0 / self.tickMinutes
        if ticks > MAX_TICKS:
            raise ValueError(f"tickMinutes: {self.tickMinutes:g}-minute ticks over {self.durationHours:g} h are "
                             f"{ticks:,.0f} ticks, more than {MAX_TICKS:,}; take longer ticks or a shorter scenario")
        clusters = sum(g.count for g in self.clusters)
        if self.ticks * clusters > MAX_CELLS:
            raise ValueError(f"clusters: {clusters:,} clusters × {self.ticks:,} ticks are {self.ticks * clusters:,} "
                             f"cluster-ticks, more than {MAX_CELLS:,}; take fewer clusters or fewer ticks")

    def _cluster_names(self) -> None:
        """Each cluster's name (as `drods.whatif.engine.build_fleet` makes them) once across groups."""
        first: dict[str, int] = {}
        for i, g in enumerate(self.clusters):
            prefix = g.prefix or g.region
            for k in range(g.count):
                name = g.names[k] if g.names else f"{prefix}-{k:03d}"
                j = first.setdefault(name, i)
                if j == i and g.names and g.names.index(name) != k:
                    raise ValueError(f"clusters[{i}].names: {name!r} is listed twice")
                if j != i:
                    raise ValueError(f"clusters[{i}]: its cluster {name!r} is also one of clusters[{j}]'s; cluster "
                                     f"names must be unique across groups (give one group a prefix or names)")

    @property
    def ticks(self) -> int:
        return max(1, int(round(self.durationHours * 60.0 / self.tickMinutes)))


def _check_item(where: str, w: WorkloadItem, minutes: float, regions: set[str], twin: int | None,
                gen: WorkloadGenerator | None) -> None:
    """One explicit workload: its region known, its times within the scenario and its life, its name its own."""
    if twin is not None:
        raise ValueError(f"{where}.name: {w.name!r} is also workloads.items[{twin}]'s name")
    if gen is not None and (m := re.fullmatch(r"w(\d{5,})", w.name)) and f"w{int(m[1]):05d}" == w.name \
            and 1 <= int(m[1]) <= gen.initial + gen.events:
        raise ValueError(f"{where}.name: {w.name!r} is a name the generator gives its workloads (w00001…)")
    if w.region is not None and w.region not in regions:
        raise ValueError(f"{where}.region: unknown region {w.region!r}")
    if w.at >= minutes:
        raise ValueError(f"{where}.at: minute {w.at:g} is not within the scenario's {minutes:g} minutes")
    if w.leaveAt is not None and not w.at < w.leaveAt <= minutes:
        raise ValueError(f"{where}.leaveAt: minute {w.leaveAt:g} is not after its arrival (at {w.at:g}) and "
                         f"within the scenario's {minutes:g} minutes")
    end = minutes if w.leaveAt is None else w.leaveAt
    for k, (minute, replicas) in enumerate(w.scale):
        if replicas < 0:
            raise ValueError(f"{where}.scale[{k}]: {replicas} replicas; a scale is to 0 replicas or more")
        if not w.at <= minute < end:
            raise ValueError(f"{where}.scale[{k}]: minute {minute:g} is not within the workload's life "
                             f"(from minute {w.at:g} to {end:g}); a scale outside it is never applied")


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
