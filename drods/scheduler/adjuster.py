"""Dynamic weight adjuster (S5, S10): turns monitoring signals into this cycle's factor weights.

It is deliberately a small, predictable formula — every number comes from the profile:

* fleet water level ``F`` = allocatable-cpu-weighted mean water level of the *feasible* clusters;
* spread factor ``σ = clip((F - packBelow) / (spreadAbove - packBelow), 0, 1)``:
  ``F ≥ spreadAbove`` (default 0.60) → σ = 1, spread: division weights ∝ headroom below the limit;
  ``F ≤ packBelow`` (default 0.30) → σ = 0, pack: fewest clusters, those already in use first;
  linear in between;
* weight of score plugin p =
  ``base[p] × (packMultiplier[p] + σ·(spreadMultiplier[p] - packMultiplier[p])) × (1 + surgeGain[p]·surge)``
  where ``surge`` ∈ [0, 1] is the traffic-surge signal from monitoring (0 when absent).

Defaults: when packing, LeastWaterLevel counts half and ClusterLocality double; a full surge
triples NetworkLocality and doubles ClusterLocality.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

DEFAULT_PACK_MULTIPLIERS: dict[str, float] = {"LeastWaterLevel": 0.5, "ClusterLocality": 2.0}
DEFAULT_SURGE_GAIN: dict[str, float] = {"NetworkLocality": 2.0, "ClusterLocality": 1.0}


@dataclass(slots=True)
class AdjusterConfig:
    pack_below: float = 0.30
    spread_above: float = 0.60
    pack_multipliers: dict[str, float] = field(default_factory=lambda: dict(DEFAULT_PACK_MULTIPLIERS))
    spread_multipliers: dict[str, float] = field(default_factory=dict)
    surge_gain: dict[str, float] = field(default_factory=lambda: dict(DEFAULT_SURGE_GAIN))


@dataclass(slots=True)
class Adjustment:
    """What the adjuster decided this cycle (recorded in every ScheduleResult)."""

    weights: dict[str, float]
    spread: float
    fleet_water_level: float
    surge: float


class Adjuster:
    def __init__(self, base_weights: Mapping[str, float], config: AdjusterConfig | None = None) -> None:
        self.base = dict(base_weights)
        self.config = config or AdjusterConfig()
        c = self.config
        # per plugin: base weight, pack multiplier, what spreading adds to it, surge gain
        self._terms = [(name, base, (pm := c.pack_multipliers.get(name, 1.0)),
                        c.spread_multipliers.get(name, 1.0) - pm, c.surge_gain.get(name, 0.0))
                       for name, base in self.base.items()]

    def spread_factor(self, fleet_water_level: float) -> float:
        c = self.config
        span = c.spread_above - c.pack_below
        if span <= 0:
            return 1.0 if fleet_water_level >= c.spread_above else 0.0
        return min(1.0, max(0.0, (fleet_water_level - c.pack_below) / span))

    def adjust(self, fleet_water_level: float, surge: float = 0.0) -> Adjustment:
        sigma = self.spread_factor(fleet_water_level)
        surge = min(1.0, max(0.0, surge))
        weights = {name: base * (pm + sigma * dm) * (1.0 + gain * surge) for name, base, pm, dm, gain in self._terms}
        return Adjustment(weights, sigma, fleet_water_level, surge)
