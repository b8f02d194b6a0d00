"""Per-cluster weights from application feedback (SPEC H3): where the replicas go, not only how many.

An application may report per cluster (``PUT /api/v1/feedback`` with ``"cluster"``): a region whose
clients see a worse p99 than the others needs a larger share of the total. Each turn, with fresh
reports from at least two placed clusters, every cluster's normalised miss ``e_c`` (the same
`drods.autoscaling.feedback.error`) is compared with their mean; the cluster's weight — its current
weight, else its share of the replicas — is multiplied by ``1 + gain · (e_c − mean)``, bounded to
``± max_shift`` per turn, floored at ``min_weight`` and normalised. No move while every cluster is
within ``tolerance`` of the mean (balanced: the loop stops), nor within the cool-down of the last
move. A reporting cluster without replicas counts (its clients are served from afar) and starts
from ``min_weight``. The weights go on the FederatedHPA's status (``clusterWeights``, with
``clusterWeightsTime``); the resource detector turns them into the Binding's static weight list and
a reschedule trigger at that time, so the scheduler divides the whole total by them again.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np

from drods.autoscaling.feedback import Observation, error
from drods.model.autoscaling import FeedbackTargets


@dataclass(frozen=True, slots=True)
class WeightSettings:
    gain: float = 0.5
    max_shift: float = 0.25  # a weight moves by at most this fraction per turn
    min_weight: float = 0.05  # no placed cluster is starved
    tolerance: float = 0.1  # misses this close to the mean are balanced
    cooldown_s: float = 30.0  # the scheduler and the application need time to show the last move
    max_age_s: float = 120.0


@dataclass(frozen=True, slots=True)
class Rebalance:
    weights: dict[str, float] | None  # None: keep what there is
    errors: dict[str, float]
    reason: str


def rebalance(targets: FeedbackTargets, reports: Mapping[str, Observation], placement: Mapping[str, int],
              previous: Mapping[str, float] | None, last_move: float | None, now: float,
              settings: WeightSettings) -> Rebalance:
    """One turn (see the module docstring)."""
    errors: dict[str, float] = {}
    for c, obs in reports.items():  # a cluster without replicas counts: its clients are served from afar
        if now - obs.at <= settings.max_age_s and (last_move is None or obs.at > last_move):
            miss = error(targets, obs)
            if miss is not None:
                errors[c] = miss
    if len(errors) < 2:
        return Rebalance(None, errors, "fewer than two clusters report")
    if last_move is not None and now - last_move < settings.cooldown_s:
        return Rebalance(None, errors, "cool-down")
    names = sorted(errors)
    e = np.fromiter((errors[c] for c in names), dtype=np.float64, count=len(names))
    d = e - e.mean()
    if float(np.abs(d).max()) <= settings.tolerance:
        return Rebalance(None, errors, "balanced")
    total = max(sum(placement.get(c, 0) for c in names), 1)
    base = np.fromiter(((previous or {}).get(c, placement.get(c, 0) / total) for c in names),
                       dtype=np.float64, count=len(names))
    base = np.maximum(base, settings.min_weight)
    base = base / base.sum()
    factor = np.clip(1.0 + settings.gain * d, 1.0 - settings.max_shift, 1.0 + settings.max_shift)
    w = base * factor
    w = w / w.sum()
    low = w < settings.min_weight
    if low.any() and not low.all():  # floor the starved, take it from the others in proportion
        w[low] = settings.min_weight
        w[~low] = w[~low] / w[~low].sum() * (1.0 - w[low].sum())
    new = {c: round(float(x), 4) for c, x in zip(names, w, strict=True)}
    if previous is not None and all(abs(new[c] - previous.get(c, -1.0)) < 1e-3 for c in names):
        return Rebalance(None, errors, "at the weight floor")
    return Rebalance(new, errors, "unbalanced")
