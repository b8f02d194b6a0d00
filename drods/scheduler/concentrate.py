"""Affinity concentration (F4, H1, H2): affinity scores that clearly separate clusters narrow the division.

A score only tilts the water-level division: replicas are still spread over every feasible cluster
in proportion to headroom × total score, so a chatty caller lands beside its callee, a reader beside
its data, a latency-sensitive service away from batch jobs only in proportion to the preferred
cluster's share of the fleet's headroom. Karmada narrows the candidates *before* division
(``spreadConstraints`` / cluster count); this is the same step driven by the affinity plugins.

The affinity plugins (``affinity = True``: TrafficAffinity, DataLocality, Dissonance) that ran for
the task give each candidate their weighted mean ``a`` (0..100). When ``max(a) − min(a)`` reaches
``minSpread`` the affinity input separates the clusters, and the division may use only

* the top tier: candidates with ``a ≥ max(a) − margin``;
* extended best-first (by ``a``, then the scheduler's preference) while the kept clusters' caps
  cannot hold the replicas; and
* every cluster already holding this workload's replicas (no move just for concentrating); and
* with TrafficAffinity, the clusters of its significant peers (``anchorShare`` of the heaviest
  peer's traffic): each joins the top tier and gets one replica while the replicas last, so callers
  in two regions each have a copy of their callee at hand.

When a *repelling* affinity took part (Dissonance: clashing classes kept apart) the whole top tier
is not kept: only the shortest best-first prefix (by ``a``, then the scheduler's preference) whose
caps hold the replicas. Spreading a workload over several equally good clusters puts it beside the
clashing neighbours of each of them — measured in ``bench/placement_quality.py``, 40–50 % of the
clashing pairs left with Dissonance came from workloads split over tied top-tier clusters (51 of
240 workloads on seed 3, 42 on seed 5). Attracting affinities (traffic peers, data) keep the tier:
being beside a peer on two clusters costs nothing.

The caps are the estimators' (resource fit and water-level limit), so the concentrated division
never raises a cluster above its limit: replicas the top tier cannot hold overflow to the next-best
clusters, not past the limit. The division fills the top tier first up to its caps and gives the
rest to the other kept clusters (``tiers.py``), so the preferred clusters are used to the limit.
Nothing is computed unless an affinity plugin ran (each skips when its input is absent), so tasks
without traffic, datasets or a class pay nothing.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from drods.scheduler.arrays import FloatArr, IntArr

DEFAULT_MIN_SPREAD = 5.0
DEFAULT_MARGIN = 0.5


@dataclass(frozen=True, slots=True)
class ConcentrationSettings:
    """Profile knobs (``concentration`` in the profile); ``enabled: false`` keeps plain division."""

    enabled: bool = True
    min_spread: float = DEFAULT_MIN_SPREAD
    margin: float = DEFAULT_MARGIN


@dataclass(frozen=True, slots=True)
class Concentration:
    """Positions (into the candidate arrays) the division may use, and why: recorded in the decision."""

    keep: IntArr
    tier: IntArr  # per kept position: 0 the top tier, 1 the best-first overflow (and existing replicas)
    plugins: tuple[str, ...]
    spread: float
    threshold: float
    required: IntArr  # candidate positions that must each get a replica (beside significant traffic peers)

    def record(self, candidates: int) -> dict[str, object]:
        out: dict[str, object] = {"plugins": list(self.plugins), "kept": int(self.keep.size), "of": candidates,
                                  "affinitySpread": round(self.spread, 2), "tierFrom": round(self.threshold, 2)}
        if self.required.size:
            out["besidePeers"] = int(self.required.size)
        return out


def affinity_mean(rows: FloatArr, weights: FloatArr) -> FloatArr:
    """Weighted mean of the affinity plugins' score rows (k × m) per candidate."""
    wsum = float(weights.sum())
    return (weights @ rows) / wsum if wsum > 0 else rows.mean(axis=0)  # type: ignore[no-any-return]


def concentrate(a: FloatArr, caps: FloatArr, existing: IntArr, prefer: FloatArr, total: int,
                settings: ConcentrationSettings, plugins: tuple[str, ...], *,
                fewest: bool = False, anchors: FloatArr | None = None) -> Concentration | None:
    """The candidates the division may use, or None when the affinity scores don't separate them.
    ``fewest``: a repelling affinity took part — keep only the best-first prefix that holds ``total``.
    ``anchors``: per candidate, the traffic of significant peers running there; the heaviest ``total``
    of them that can hold a replica join the top tier and each gets one."""
    m = a.size
    if m < 2 or total <= 0:
        return None
    best = float(a.max())
    spread = best - float(a.min())
    if spread < settings.min_spread:
        return None
    threshold = best - settings.margin
    required = np.zeros(0, dtype=np.intp)
    if anchors is not None and not fewest:
        at = np.flatnonzero((anchors > 0) & (caps >= 1))
        if at.size > 1:  # one peer's clusters are the top tier already
            required = at[np.lexsort((-prefer[at], -anchors[at]))][:total]
    order = np.lexsort((-prefer, -a))
    top_mask = a >= threshold
    top_mask[required] = True
    top = int(np.count_nonzero(top_mask))
    room = np.cumsum(np.maximum(caps[order], 0.0))
    need = int(np.searchsorted(room, float(total) - 0.5)) + 1  # shortest best-first prefix that holds them
    k = min(m, need if fewest else max(top, need))
    keep = np.zeros(m, dtype=bool)
    keep[order[:k]] = True
    keep[required] = True
    keep |= existing > 0
    if keep.all() and not required.size:
        return None
    rows = np.flatnonzero(keep)
    tier = (~top_mask[rows]).astype(np.intp)
    return Concentration(rows, tier, plugins, spread, threshold, required)
