"""Fluid water filling: the level a set of clusters reaches when a divisible demand fills the
lowest first. The simulator's ideal peak (`drods.whatif.ideal`) and the peak-shaving rebalance
(`drods.scheduler.peakshave`, the fleet's achievable level) both measure against it.
"""

from __future__ import annotations

import numpy as np

from drods.scheduler.arrays import FloatArr


def fluid_level(background: FloatArr, capacity: FloatArr, demand: float, *, at_least_top: bool = True) -> float:
    """The level L (fraction of capacity) at which the clusters hold ``demand`` above their
    ``background`` (fractions), filling the lowest first; ``background.max()`` bounds it below unless
    ``at_least_top`` is false (then: the water's own level)."""
    if background.size == 0:
        return float("nan")
    top = float(background.max()) if at_least_top else -np.inf
    if demand <= 0:
        return max(top, float(background.min()))
    order = np.argsort(background, kind="stable")
    bg, cap = background[order], capacity[order]
    ccap = np.cumsum(cap)
    # water held when the level reaches bg[k]: Σ_{j<k} (bg[k] − bg[j]) · cap[j]
    held = bg * np.concatenate(([0.0], ccap[:-1])) - np.concatenate(([0.0], np.cumsum(bg * cap)[:-1]))
    k = int(np.searchsorted(held, demand, side="right")) - 1  # the last level still below the demand
    level = bg[k] + (demand - held[k]) / ccap[k]
    return max(float(level), top)
