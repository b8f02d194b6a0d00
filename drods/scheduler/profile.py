"""Scheduler profile (S8): which plugins run, their base weights, adjuster thresholds and defaults.

A profile is YAML, for example::

    name: default
    filters: [Readiness, TargetClusters, ClusterAffinity, TaintToleration, Capability,
              NetworkFit, GpuStorageFit, ResourceFit, WaterLevelLimit, UserLatencySLO,
              SpreadConstraint]
    scores: {LeastWaterLevel: 1.0, BalancedAllocation: 0.5, ClusterLocality: 1.0,
             TopologyPreference: 0.5, NetworkLocality: 0.5, Cost: 0.5, Dissonance: 1.0,
             TrafficAffinity: 1.0, DataLocality: 1.0, UserLatency: 1.0}
    pluginArgs: {TopologyPreference: {regionScore: 70}}
    adjuster: {packBelow: 0.3, spreadAbove: 0.6,
               packMultipliers: {LeastWaterLevel: 0.5, ClusterLocality: 2.0},
               surgeGain: {NetworkLocality: 2.0, ClusterLocality: 1.0}}
    defaults: {waterLevelLimit: 0.85, division: WaterLevel, seed: null}
    concentration: {enabled: true, minSpread: 5, margin: 0.5}

``concentration`` (``concentrate.py``): when the affinity scores (TrafficAffinity, DataLocality,
Dissonance) separate the candidates by at least ``minSpread`` points, the division uses only the
clusters within ``margin`` of the best, extended best-first until they hold the replicas.

Filters run in the listed order. A score with weight 0 or absent is off. A score plugin may define ``skip(task, snap)``:
when it says True (no price, dataset, traffic edge or class to weigh) the plugin is left out of that
decision before any array work, its weight included; a filter or estimator likewise (GpuStorageFit
for a task needing no GPU and no tier storage).
Plugins from installed packages (entry point group ``drods.scheduler.plugins``) are loaded before
names are checked, so a third-party plugin is enabled by naming it here.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from drods.model.placement import DEFAULT_WATER_LEVEL_LIMIT
from drods.scheduler.adjuster import DEFAULT_PACK_MULTIPLIERS, DEFAULT_SURGE_GAIN, Adjuster, AdjusterConfig
from drods.scheduler.concentrate import DEFAULT_MARGIN, DEFAULT_MIN_SPREAD, ConcentrationSettings
from drods.scheduler.interface import FilterPlugin, ReplicaEstimator, ScorePlugin
from drods.scheduler.registry import filter_plugins, load_entry_points, score_plugins

Skip = Callable[[Any, Any], bool]  # (TaskInfo, Snapshot) -> True: the plugin has no input in this task

DEFAULT_FILTERS = [
    "Readiness", "TargetClusters", "ClusterAffinity", "WorkloadAffinity", "TaintToleration", "Capability",
    "NetworkFit",
    "GpuStorageFit", "ResourceFit", "WaterLevelLimit", "UserLatencySLO", "SpreadConstraint", "FollowUp",
]
DEFAULT_SCORES = {
    "LeastWaterLevel": 1.0, "BalancedAllocation": 0.5, "ClusterLocality": 1.0,
    "TopologyPreference": 0.5, "NetworkLocality": 0.5, "Cost": 0.5, "Dissonance": 1.0,
    "TrafficAffinity": 1.0, "DataLocality": 1.0, "UserLatency": 1.0,
}


class ProfileError(ValueError):
    """The profile is invalid; ``errors`` lists every problem found."""

    def __init__(self, errors: list[str]) -> None:
        super().__init__("invalid scheduler profile: " + "; ".join(errors))
        self.errors = errors


class AdjusterSpec(BaseModel):
    model_config = ConfigDict(extra="forbid")

    packBelow: float = Field(default=0.30, ge=0, le=1)
    spreadAbove: float = Field(default=0.60, ge=0, le=1)
    packMultipliers: dict[str, float] = Field(default_factory=lambda: dict(DEFAULT_PACK_MULTIPLIERS))
    spreadMultipliers: dict[str, float] = Field(default_factory=dict)
    surgeGain: dict[str, float] = Field(default_factory=lambda: dict(DEFAULT_SURGE_GAIN))

    @model_validator(mode="after")
    def _ordered(self) -> AdjusterSpec:
        if self.packBelow > self.spreadAbove:
            raise ValueError(f"adjuster.packBelow ({self.packBelow}) must not exceed spreadAbove "
                             f"({self.spreadAbove})")
        for fld in ("packMultipliers", "spreadMultipliers", "surgeGain"):
            for k, v in getattr(self, fld).items():
                if v < 0:
                    raise ValueError(f"adjuster.{fld}.{k} must be >= 0")
        return self


class DefaultsSpec(BaseModel):
    model_config = ConfigDict(extra="forbid")

    # Placements without their own waterLevelLimit (null: the same default).
    waterLevelLimit: float | None = Field(default=DEFAULT_WATER_LEVEL_LIMIT, gt=0, le=1)
    division: Literal["WaterLevel", "AvailableReplicas", "Aggregated"] = "WaterLevel"
    seed: int | None = None


class ConcentrationSpec(BaseModel):
    model_config = ConfigDict(extra="forbid")

    enabled: bool = True
    minSpread: float = Field(default=DEFAULT_MIN_SPREAD, ge=0, le=100)
    margin: float = Field(default=DEFAULT_MARGIN, ge=0, le=100)


class ProfileSpec(BaseModel):
    model_config = ConfigDict(extra="forbid")

    name: str = Field(default="default", min_length=1)
    filters: list[str] = Field(default_factory=lambda: list(DEFAULT_FILTERS))
    scores: dict[str, float] = Field(default_factory=lambda: dict(DEFAULT_SCORES))
    pluginArgs: dict[str, dict[str, Any]] = Field(default_factory=dict)
    adjuster: AdjusterSpec = Field(default_factory=AdjusterSpec)
    defaults: DefaultsSpec = Field(default_factory=DefaultsSpec)
    concentration: ConcentrationSpec = Field(default_factory=ConcentrationSpec)

    @model_validator(mode="after")
    def _weights(self) -> ProfileSpec:
        for k, v in self.scores.items():
            if v < 0:
                raise ValueError(f"scores.{k}: weight must be >= 0")
        if len(set(self.filters)) != len(self.filters):
            raise ValueError("filters: a plugin is listed twice")
        return self


@dataclass(slots=True)
class Profile:
    """A validated profile with its plugins instantiated."""

    spec: ProfileSpec
    filters: list[FilterPlugin]
    scores: list[tuple[ScorePlugin, float]]
    estimators: list[ReplicaEstimator]
    adjuster: Adjuster
    concentration: ConcentrationSettings = ConcentrationSettings()
    # each filter's / estimator's / score plugin's ``skip(task, snap)`` (None: never skipped), looked
    # up once, so a plugin without input in a task costs one call, not a timed pass
    filter_skips: tuple[Skip | None, ...] = field(default=(), init=False)
    estimator_skips: tuple[Skip | None, ...] = field(default=(), init=False)
    score_skips: tuple[Skip | None, ...] = field(default=(), init=False)
    # whether any score plugin is an affinity score (concentration, topology primaries look at those)
    has_affinity: bool = field(default=False, init=False)

    def __post_init__(self) -> None:
        self.filter_skips = tuple(getattr(p, "skip", None) for p in self.filters)
        self.estimator_skips = tuple(getattr(e, "skip", None) for e in self.estimators)
        self.score_skips = tuple(getattr(p, "skip", None) for p, _ in self.scores)
        self.has_affinity = any(getattr(p, "affinity", False) for p, _ in self.scores)

    @property
    def name(self) -> str:
        return self.spec.name

    @classmethod
    def default(cls) -> Profile:
        return cls.from_dict({})

    @classmethod
    def empty(cls) -> Profile:
        """Every plugin disabled: the scheduler then picks at random (S8)."""
        return cls.from_dict({"name": "random", "filters": [], "scores": {}})

    @classmethod
    def from_yaml(cls, text: str) -> Profile:
        try:
            data = yaml.safe_load(text)
        except yaml.YAMLError as e:
            raise ProfileError([f"not valid YAML: {e}"]) from e
        if data is None:
            data = {}
        if not isinstance(data, Mapping):
            raise ProfileError(["the profile must be a YAML mapping"])
        return cls.from_dict(data)

    @classmethod
    def load(cls, path: str | Path) -> Profile:
        return cls.from_yaml(Path(path).read_text())

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Profile:
        try:
            spec = ProfileSpec.model_validate(dict(data))
        except ValidationError as e:
            raise ProfileError([
                f"{'.'.join(str(p) for p in err['loc']) or '<root>'}: {err['msg']}" for err in e.errors()
            ]) from e
        return cls.from_spec(spec)

    @classmethod
    def from_spec(cls, spec: ProfileSpec) -> Profile:
        load_entry_points()
        fmap = filter_plugins()
        smap = score_plugins()
        errors: list[str] = []
        for nm in spec.filters:
            if nm not in fmap:
                errors.append(f"filters: unknown filter plugin {nm!r} (known: {', '.join(sorted(fmap))})")
        for nm in spec.scores:
            if nm not in smap:
                errors.append(f"scores: unknown score plugin {nm!r} (known: {', '.join(sorted(smap))})")
        known = set(fmap) | set(smap)
        for nm in spec.pluginArgs:
            if nm not in known:
                errors.append(f"pluginArgs: unknown plugin {nm!r}")
        for fld in ("packMultipliers", "spreadMultipliers", "surgeGain"):
            for nm in getattr(spec.adjuster, fld):
                if nm not in smap:
                    errors.append(f"adjuster.{fld}: unknown score plugin {nm!r}")
        if errors:
            raise ProfileError(errors)
        filters: list[FilterPlugin] = []
        estimators: list[ReplicaEstimator] = []
        for nm in spec.filters:
            inst = fmap[nm](spec.pluginArgs.get(nm))
            filters.append(inst)
            if callable(getattr(inst, "max_replicas", None)):
                estimators.append(inst)
        scores: list[tuple[ScorePlugin, float]] = [
            (smap[nm](spec.pluginArgs.get(nm)), float(w)) for nm, w in spec.scores.items() if w > 0
        ]
        a = spec.adjuster
        adjuster = Adjuster(
            {p.name: w for p, w in scores},
            AdjusterConfig(a.packBelow, a.spreadAbove, dict(a.packMultipliers), dict(a.spreadMultipliers),
                           dict(a.surgeGain)),
        )
        c = spec.concentration
        return cls(spec, filters, scores, estimators, adjuster,
                   ConcentrationSettings(c.enabled, c.minSpread, c.margin))

    def to_yaml(self) -> str:
        return yaml.safe_dump(self.spec.model_dump(), sort_keys=False)
