"""Tiered division (F6 overflow, F4/H1/H2 concentration): fill tier 0 up to its caps, overflow to 1, ...

Karmada 1.18's ``clusterAffinities[].overflowAffinities``: the primary group is used first up to
what its clusters can hold, the remaining replicas overflow to the listed groups in order, and on
scale-down the last tier shrinks first. The same order serves affinity concentration (the
best-scored clusters before the next best). Each tier's share is divided by the task's own
division (water level, available replicas, aggregated, cost-first) over that tier alone.

Shares: on scale-down (fewer replicas than held) the earliest tiers keep theirs and the latest lose
theirs first; nothing grows on a scale-down (no replica starts while replicas are being removed).
On scale-up with ``regroup`` (overflowAffinities, as Karmada: a replica-count change re-applies
the tier order) each tier in turn takes what it can hold, so overflow replicas return to the
primary once it has room; without it (affinity concentration) every tier keeps what it holds and
only the new replicas go to the earliest tier with room. At an unchanged count nothing moves, and
a rebalance (existing ignored) fills the tiers afresh.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

import numpy as np

from drods.scheduler.arrays import IntArr
from drods.scheduler.divide import DivisionInput


def tier_totals(total: int, room: list[float], held: list[int], regroup: bool) -> list[int]:
    """Replicas per tier: ``room`` is what each tier's clusters can hold (held included)."""
    out: list[int] = []
    left = total
    if sum(held) >= total:  # scale-down (or no change): the last tiers shrink first
        for h in held:
            k = min(h, left)
            out.append(k)
            left -= k
        return out
    if regroup:
        for r in room:
            k = int(min(r, float(left)))
            out.append(k)
            left -= k
        return out
    out = list(held)
    left -= sum(held)
    for i, r in enumerate(room):
        free = max(0, int(min(r, float(held[i] + left))) - held[i])
        out[i] += free
        left -= free
    return out


def divide_in_tiers(inp: DivisionInput, tier: IntArr, fn: Callable[[DivisionInput, IntArr], IntArr],
                    regroup: bool) -> IntArr:
    """Replicas per position: each tier's share (``tier_totals``) divided by ``fn(sub-input, positions)``."""
    m = inp.caps.size
    counts = np.zeros(m, dtype=np.intp)
    held_arr = inp.existing if inp.keep_existing else np.zeros(m, dtype=np.intp)
    levels = np.unique(tier)
    groups = [np.flatnonzero(tier == lv) for lv in levels.tolist()]
    room = [float(np.floor(np.maximum(inp.caps[g], held_arr[g])).sum()) for g in groups]
    held = [int(held_arr[g].sum()) for g in groups]
    for g, share in zip(groups, tier_totals(inp.total, room, held, regroup), strict=True):
        if share <= 0:
            continue
        required = None
        if inp.required is not None and inp.required.size:  # spread minGroups inside this tier
            local = np.full(m, -1, dtype=np.intp)
            local[g] = np.arange(g.size)
            required = local[inp.required]
            required = required[required >= 0]
        sub = replace(inp, total=share, caps=inp.caps[g], existing=inp.existing[g], scores=inp.scores[g],
                      prefer=inp.prefer[g], required=required,
                      static_weights=None if inp.static_weights is None else inp.static_weights[g],
                      clamp=None if inp.clamp is None else inp.clamp.sub(g))
        counts[g] = fn(sub, g)
    return counts
