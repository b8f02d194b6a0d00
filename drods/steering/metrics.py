"""Metric levels as the CATS metric-definition draft asks (SPEC C6; docs/steering.md):

* **L0** — raw values with units (`L0`: delay ms, jitter ms, loss %, bandwidth Mbit/s, cost per
  hour, load = CPU utilisation 0..1, processing ms);
* **L1** — one score per category (communication, computing, service) in [0, 1], smaller is better,
  each attribute normalised by the category's method: ``sigmoid`` (around a documented reference
  point), ``minMax`` (over the candidate instances of one client site) or ``zScore`` (over the same
  candidates, squashed into (0, 1) by the logistic function);
* **L2** — one score, the mean of the L1 scores present, on 0..100.

Every function works on whole arrays: (services, client sites, instances), NaN where a pair is not
a candidate.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

import numpy as np
from numpy.typing import NDArray

F = NDArray[np.float64]
Category = Literal["communication", "computing", "service"]


@dataclass(frozen=True, slots=True)
class L0:
    """One raw metric: its unit, category, whether smaller is better, and the sigmoid's reference
    point and scale (the value scored 0.5, and how fast the score rises around it)."""

    name: str
    unit: str
    category: Category
    smaller_is_better: bool
    reference: float
    scale: float


#: The attributes a registration may name in ``sensitiveAttributes``, with their L0 definition.
ATTRIBUTES: dict[str, L0] = {
    "delay": L0("delay", "ms", "service", True, 50.0, 20.0),
    "jitter": L0("jitter", "ms", "communication", True, 10.0, 5.0),
    "loss": L0("loss", "%", "communication", True, 1.0, 0.5),
    "bandwidth": L0("bandwidth", "Mbit/s", "communication", False, 100.0, 50.0),
    "cost": L0("cost", "per hour", "service", True, 1.0, 0.5),
    "load": L0("load", "utilisation 0..1", "computing", True, 0.7, 0.1),
}


def _sigmoid(x: F, spec: L0) -> F:
    z = (x - spec.reference) / spec.scale
    return 1.0 / (1.0 + np.exp(-np.clip(z, -50, 50)))


def _min_max(x: F, _spec: L0) -> F:
    with np.errstate(invalid="ignore", divide="ignore"):
        lo = np.nanmin(x, axis=-1, keepdims=True)
        hi = np.nanmax(x, axis=-1, keepdims=True)
        span = hi - lo
        return np.where(span > 0, (x - lo) / np.where(span > 0, span, 1.0), 0.0)


def _z_score(x: F, _spec: L0) -> F:
    with np.errstate(invalid="ignore", divide="ignore"):
        mean = np.nanmean(x, axis=-1, keepdims=True)
        std = np.nanstd(x, axis=-1, keepdims=True)
        z = np.where(std > 0, (x - mean) / np.where(std > 0, std, 1.0), 0.0)
    return 1.0 / (1.0 + np.exp(-np.clip(z, -50, 50)))


NORMALISERS: dict[str, Callable[[F, L0], F]] = {"sigmoid": _sigmoid, "minMax": _min_max, "zScore": _z_score}


def l1_attribute(values: F, attribute: str, method: str) -> F:
    """One attribute's L1 contribution in [0, 1], smaller is better; NaN stays NaN; an infinite
    raw value (unreachable) scores 1."""
    spec = ATTRIBUTES[attribute]
    finite = np.where(np.isfinite(values), values, np.nan)
    score = NORMALISERS[method](finite, spec)
    if not spec.smaller_is_better:
        score = 1.0 - score
    return np.where(np.isinf(values), 1.0, score)


def l2(l1_scores: list[F]) -> F:
    """The composed score on 0..100: the mean of the L1 category scores present."""
    stacked = np.stack(l1_scores)
    with np.errstate(invalid="ignore"):
        return np.asarray(np.nanmean(stacked, axis=0) * 100.0, dtype=np.float64)
