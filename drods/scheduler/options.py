"""The options a placement weighed (X1): the chosen clusters plus the best-scoring feasible clusters
that received nothing, with every score plugin's score and how many replicas each could hold.

Only the top ``OPTIONS_TOP_K`` (`drods.model.decision`) unchosen feasible clusters by total score
are named — a decision over 10,000 feasible clusters stays a few KB — and the rest are counted
(``omitted``). The runner-up is
the best of those; the score differences against the weakest chosen cluster say why it lost.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from drods.model.decision import OPTIONS_TOP_K
from drods.scheduler.arrays import FloatArr, IntArr


@dataclass(frozen=True, slots=True)
class Options:
    """Positions into the candidates' score matrix: chosen first, then the top unchosen."""

    names: tuple[str, ...]
    positions: IntArr
    chosen: int  # the first ``chosen`` entries received replicas
    room: tuple[int | None, ...]  # replicas each could hold (None: not estimated)
    feasible: int
    static_weights: tuple[float, ...] | None = None  # divided by static weights: each one's weight

    @property
    def omitted(self) -> int:
        return max(0, self.feasible - len(self.names))


def weigh_options(names: np.ndarray, cand: IntArr, totals: FloatArr, chosen_pos: IntArr, caps: FloatArr | None,
                  k: int = OPTIONS_TOP_K) -> Options:
    """The chosen positions and the ``k`` best unchosen ones (by total); ``names`` is the snapshot's
    name per row, ``cand`` the candidates' rows (only the returned ones are looked up)."""
    m = int(totals.size)
    neg = np.negative(totals)  # one pass: chosen ones pushed last, the best unchosen first
    neg[chosen_pos] = np.inf
    unchosen = m - int(np.asarray(chosen_pos).size)
    take = min(k, unchosen)
    rest = np.argpartition(neg, take - 1)[:take] if 0 < take < m else np.argsort(neg, kind="stable")[:take]
    rest = rest[np.argsort(neg[rest], kind="stable")]
    pos = np.concatenate([np.asarray(chosen_pos, dtype=np.intp), rest.astype(np.intp)])
    out = tuple(str(x) for x in names[cand[pos]].tolist())
    if caps is not None and caps.size == m:
        room: tuple[int | None, ...] = tuple(int(x) if np.isfinite(x) else None  # inf: no limit estimated
                                             for x in np.floor(caps[pos]).tolist())
    else:
        room = (None,) * pos.size
    return Options(out, pos, int(np.asarray(chosen_pos).size), room, m)
