"""Cost-first division (F6, ``placement.costFirst``): the cheapest placement the caps allow.

The caps already hold the water-level limit and resource fit, and the filters the latency needs,
so filling the cheapest clusters first up to their caps is the cheapest placement meeting them.
Scale-up adds to the cheapest clusters with room; scale-down removes from the most expensive
first, so overflow onto dearer clusters is the first to shrink. Clusters without a price rank
after every priced one; equal prices go by the scheduler's preference (score, then seeded tie).
"""

from __future__ import annotations

import numpy as np

from drods.scheduler.arrays import FloatArr, IntArr


def _take(order: IntArr, avail: FloatArr, need: int) -> FloatArr:
    """Per-position amount taken walking ``order`` until ``need`` is met."""
    r = np.minimum(avail[order], float(need))
    before = np.cumsum(r) - r
    out = np.zeros(avail.size)
    out[order] = np.clip(need - before, 0.0, r)
    return out


def cheapest_fill(total: int, caps: FloatArr, existing: IntArr, price: FloatArr, prefer: FloatArr,
                  keep_existing: bool = True) -> IntArr:
    """Replicas per candidate: ``existing`` adjusted to ``total`` by price order."""
    p = np.where(np.isnan(price), np.inf, price)
    counts = existing.astype(np.float64) if keep_existing else np.zeros(caps.size)
    have = int(counts.sum())
    if have < total:
        order = np.lexsort((-prefer, p))
        counts += _take(order, np.maximum(caps - counts, 0.0), total - have)
    elif have > total:
        order = np.lexsort((prefer, -p))
        counts -= _take(order, counts, have - total)
    return counts.astype(np.intp)
