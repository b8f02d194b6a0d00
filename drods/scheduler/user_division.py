"""Division by the users' shares: a region with 60 % of the demand gets about 60 % of the
replicas when its clusters have room, then water level balances within each share.

Each candidate belongs to the user place it is nearest to (within the latency SLO when there is one;
otherwise to none). The shares are apportioned over those groups by the same capped Webster rule as
every division (a group's cap is what its clusters can hold, so a full group's surplus goes to the
others by share); what no group can hold goes to the clusters near no user place. Each group's part
is then divided over the group in latency bands — the clusters within ``near_ms`` of the group's
nearest one fill (by the task's own division, water level balancing among them, the UserLatency
score tilting it towards the nearer) before the next band takes the rest (`tiers.divide_in_tiers`).
The band is ``NEAR_MS`` (20 ms), or ``UserLatency``'s pluginArgs ``nearMs``: set to the users' latency
SLO, every cluster within it counts as near, so the water level (the score tilting it towards the
nearer) decides among them — a lower peak than filling the users' own region first, at the price of
latency within the SLO and of replicas that no longer follow users moving within it. The overflow
beyond the SLO always goes nearest first in ``NEAR_MS`` bands. Existing replicas are kept the way `divide`
keeps them: a scale-up only adds, a scale-down only removes.

A nearer band fills first only up to its group's mean water level + ``nearCeilingMargin`` (UserLatency
pluginArgs; `Ceiling`) while a farther band within the SLO has room under it; then the bands fill in
order to their caps with what is left. Without it the users' own region filled to its limit however
much quieter a region within the SLO stood, and peak shaving moved the replicas a few minutes later,
each move a copy of the replica's state. The default, 0.03 (the group's capacity-weighted mean level
+ 0.03), was measured against 0.05 and 0.08 on the shipped scenarios, their seeds and the variants
(docs/whatif.md).

With a latency SLO and clusters beyond it among the candidates (the UserLatencySLO filter kept them:
those within had too little room under their limit less its ``headroom``), the whole division runs
twice: first with every cluster capped at its limit less the headroom (the users' clusters first, the
overflow beyond the SLO nearest first), then, for what is left, to the limits.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

import numpy as np

from drods.scheduler.arrays import FloatArr, IntArr
from drods.scheduler.divide import DivisionInput, divide, webster
from drods.scheduler.tiers import divide_in_tiers

NEAR_MS = 20.0  # clusters this close to a group's nearest one count as equally near (default band)
NEAR_CEILING_MARGIN: float | None = 0.03  # UserLatency nearCeilingMargin (measured: docs/whatif.md)


def latency_bands(latency: FloatArr, near_ms: float = NEAR_MS) -> IntArr:
    """0 for the clusters within ``near_ms`` of the nearest, then 1, 2, … per further band (unknown: last)."""
    known = ~np.isnan(latency)
    if not known.any():
        return np.zeros(latency.size, dtype=np.intp)
    # bands closed above: a cluster exactly ``near_ms`` from the nearest is in its band (so one at the SLO is too)
    band = np.maximum(np.ceil((np.where(known, latency, np.nanmax(latency)) - np.nanmin(latency)) / near_ms) - 1, 0)
    band[~known] = band.max() + 1
    return np.unique(band, return_inverse=True)[1].astype(np.intp)  # type: ignore[no-any-return]


@dataclass(slots=True)
class Ceiling:
    """Per position: its water level now and the level one replica adds; ``margin`` above the group's
    mean level is as high as a nearer band fills while a farther band within the SLO has room below it.
    ``held_back`` is filled in by the division (what the decision's explanation says)."""

    levels: FloatArr
    steps: FloatArr
    margin: float
    held_back: list[float] = field(default_factory=list)  # the levels at which it held a nearer band back
    limits: FloatArr | None = None  # per position, its water-level limit
    headroom: float = 0.0  # kept below ``limits`` while a cluster beyond the SLO has room under its own

    def level(self, g: IntArr) -> float | None:
        """The group's capacity-weighted mean level + the margin (None: no position takes a replica)."""
        w = 1.0 / self.steps[g]
        ok = np.isfinite(w) & (w > 0)
        if not ok.any():
            return None
        return float((self.levels[g][ok] * w[ok]).sum() / w[ok].sum()) + self.margin

    def room_under(self, levels: FloatArr) -> FloatArr:
        """Replicas each position holds under its own level in ``levels``."""
        return _replicas_in(levels - self.levels, self.steps)

    def room(self, g: IntArr, level: float | None) -> FloatArr:
        """Replicas each of the positions ``g`` holds under ``level``."""
        if level is None:
            return np.zeros(g.size)
        return _replicas_in(level - self.levels[g], self.steps[g])


def _replicas_in(gap: FloatArr, steps: FloatArr) -> FloatArr:
    with np.errstate(divide="ignore", invalid="ignore"):
        fit = np.floor(gap / steps + 1e-9)
    return np.where(np.isfinite(fit), np.maximum(fit, 0.0), 0.0)


def divide_by_users(inp: DivisionInput, group: IntArr, shares: FloatArr, latency: FloatArr,
                    near_ms: float = NEAR_MS, ceiling: Ceiling | None = None) -> IntArr:
    """Replicas per position; ``group[i]`` is the user place position i serves (-1: none) and
    ``latency[i]`` its latency from that place. With a ceiling's ``headroom`` and positions beyond the
    SLO, every position first fills to its limit less the headroom, then to its limit."""
    if ceiling is not None and ceiling.headroom > 0 and ceiling.limits is not None and np.any(group < 0):
        held = inp.existing.astype(np.float64) if inp.keep_existing else np.zeros(inp.caps.size)
        soft = np.maximum(np.minimum(inp.caps, ceiling.room_under(ceiling.limits - ceiling.headroom)), held)
        inner = replace(ceiling, headroom=0.0)
        first = divide_by_users(replace(inp, caps=soft), group, shares, latency, near_ms, inner)  # shares held_back
        if int(first.sum()) >= inp.total:
            return first
        return divide_by_users(replace(inp, existing=first, keep_existing=True), group, shares, latency, near_ms,
                               inner)
    m = inp.caps.size
    counts = np.zeros(m, dtype=np.intp)
    if m == 0 or inp.total <= 0:
        return counts
    held = inp.existing.astype(np.intp) if inp.keep_existing else np.zeros(m, dtype=np.intp)
    k = shares.size
    members = [np.flatnonzero(group == u) for u in range(k)] + [np.flatnonzero(group < 0)]
    caps = np.asarray([float(np.floor(np.maximum(inp.caps[g], held[g])).sum()) for g in members])
    held_g = np.asarray([int(held[g].sum()) for g in members], dtype=np.intp)
    weights = np.append(np.asarray(shares, dtype=np.float64), 0.0)  # the ungrouped take no share
    quota = webster(inp.total, weights, caps, initial=held_g if inp.keep_existing else None)
    left = inp.total - int(quota.sum())
    if left > 0:  # the users' groups are full: the rest goes to the clusters near no user place
        quota[-1] += min(left, max(0, int(caps[-1]) - int(quota[-1])))
    # beyond every user place's SLO (the overflow), the nearest go first whatever the band within it
    widths = [near_ms] * k + [NEAR_MS]
    for u, (g, share, width) in enumerate(zip(members, quota.tolist(), widths, strict=True)):
        if share > 0 and g.size:
            sub = replace(inp, total=int(share), caps=inp.caps[g], existing=inp.existing[g], scores=inp.scores[g],
                          prefer=inp.prefer[g], required=None, static_weights=None,
                          clamp=None if inp.clamp is None else inp.clamp.sub(g))
            bands = latency_bands(latency[g], width)
            if bands.max() == 0:
                counts[g] = divide(sub)
            elif ceiling is None or u == k:  # the overflow: no band within the SLO to share with
                counts[g] = divide_in_tiers(sub, bands, lambda d, _pos: divide(d), regroup=False)
            else:
                level = ceiling.level(g)
                got = counts[g] = _fill_under_ceiling(sub, bands, ceiling.room(g, level))
                near, had = bands == 0, held[g]
                if level is not None and np.any(got[~near] > had[~near]) and \
                        np.any(got[near] < np.floor(np.maximum(inp.caps[g][near], had[near]))):
                    ceiling.held_back.append(level)  # the farther band took what the nearer had room for
    return counts


def _fill_under_ceiling(sub: DivisionInput, bands: IntArr, soft: FloatArr) -> IntArr:
    """The bands in order up to ``soft`` each (what they hold under the group's mean level + the
    margin), then the bands in order up to their caps for what is left."""
    held = sub.existing.astype(np.intp) if sub.keep_existing else np.zeros(sub.caps.size, dtype=np.intp)
    first = divide_in_tiers(replace(sub, caps=np.maximum(np.minimum(sub.caps, held + soft), held)), bands,
                            lambda d, _pos: divide(d), regroup=False)
    if int(first.sum()) >= sub.total:
        return first
    return divide_in_tiers(replace(sub, existing=first, keep_existing=True), bands, lambda d, _pos: divide(d),
                           regroup=False)
