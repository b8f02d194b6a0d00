"""Replica division (S7, S10): Duplicated, static weights, dynamic water-level weights,
AvailableReplicas and Aggregated — on candidate-local arrays.

Apportionment is Webster / Sainte-Laguë (the divisor method Karmada adopted for issue 6735) with
per-cluster caps: cluster i gets ``min(cap_i, round(w_i / λ))`` for the common divisor λ that
makes the sum right. Properties this module guarantees (and the property tests check):

* never more on a cluster than its cap (what fits); when caps bite the surplus is redistributed
  to the others by the same rule, and the total placed is ``min(requested, Σ caps)``;
* house-monotone: raising the total never lowers any cluster (no Alabama paradox, issue 6735);
* stable: given the current placement, scale-up only *adds* seats and scale-down only *removes*
  seats; nothing else moves;
* one tie rule on every path. Seats are ranked by their signpost ``w/(k+0.5)`` (k = seats the
  cluster holds before this one); an exact tie goes to the cluster with *fewer* seats, then to
  the preferred one. Adding takes the best-ranked free seats, removing gives back the worst-ranked
  held ones (so on a tie the cluster with *more* seats loses, then the least preferred). A
  division from scratch, an incremental one and a scale-down from a larger division therefore
  all give the same answer — Karmada's "round 6" of the Sainte-Laguë example is 2:2:1:1 either way;
* clusters with weight 0 never receive new replicas (and lose theirs first on scale-down).

Aggregated (and the pack end of the water-level blend) uses the fewest clusters that hold the
replicas — clusters already used first, then the most room — and divides among them in
proportion to their room, so no cluster is filled to the brim while another idles; a
scale-down keeps the fewest clusters that already hold the new count (largest first) and
empties the others instead of trimming them all.

Large gaps are closed by a vectorised divisor search and the last few seats greedily, so a
division over 10,000 clusters costs a handful of array passes.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from drods.scheduler.arrays import BoolArr, FloatArr, IntArr

_GREEDY = 16
CLAMP_SLACK = 0.5  # a new seat may end up to half its step above the clamp's level (`_clamp_top`)
_REL = 1e-12


def _as_int(a: FloatArr) -> IntArr:
    return a.astype(np.intp)


def _added(lam: float, w: FloatArr, cap: FloatArr, elig: BoolArr, sf: FloatArr) -> tuple[float, FloatArr]:
    """Seats after raising every eligible cluster to round(w / lam), capped; and how many were added."""
    with np.errstate(divide="ignore", invalid="ignore"):
        t = np.minimum(cap, np.floor(w / lam + 0.5))
    t = np.where(elig, np.maximum(sf, t), sf)
    return float((t - sf).sum()), t


def _removed(lam: float, w: FloatArr, s: IntArr, pos: BoolArr) -> tuple[int, IntArr]:
    """Seats after lowering every positive-weight cluster to round(w / lam); and how many went."""
    t = np.where(pos, np.minimum(s, np.floor(w / lam + 0.5)), s).astype(np.intp)
    return int((s - t).sum()), t


def _add(s: IntArr, w: FloatArr, cap: FloatArr, d: int, prefer: FloatArr | None) -> None:
    """Add ``d`` seats in Webster order (in place)."""
    elig = w > 0
    if d <= _GREEDY:  # the top signposts alone; they already stop at what the caps leave
        _add_top(s, w, cap, elig, d, prefer)
        return
    room = np.where(elig, cap - s, 0.0)
    room = np.maximum(room, 0.0)
    achievable = room.sum()
    if achievable < d:
        d = int(achievable)
    sf = s.astype(np.float64)
    while d > _GREEDY:
        open_ = elig & (room > 0)
        if not open_.any():
            return
        wo = w[open_]
        hi = float((wo / (sf[open_] + 0.5)).max()) * (1 + 1e-9)
        lo = float(wo.min()) / (float(sf.max()) + d + 1.0)
        if not (lo > 1e-300 and np.isfinite(hi)):
            break

        best_t: FloatArr | None = None
        best_add = 0.0
        for _ in range(60):
            mid = (lo * hi) ** 0.5
            a, t = _added(mid, w, cap, elig, sf)
            if a <= d:
                hi = mid
                best_t, best_add = t, a
                if d - a <= _GREEDY:
                    break
            else:
                lo = mid
            if hi / lo < 1 + 1e-12:
                break
        if best_t is None or best_add == 0:
            break
        sf = best_t
        d -= int(best_add)
        room = np.maximum(np.where(elig, cap - sf, 0.0), 0.0)
    s[:] = _as_int(sf)
    if d > 0:
        _add_top(s, w, cap, elig, d, prefer)


def _add_top(s: IntArr, w: FloatArr, cap: FloatArr, elig: BoolArr, d: int, prefer: FloatArr | None) -> None:
    """Give the ``d`` highest Webster signposts w/(s+k+0.5) their seat, in one vectorised pass.

    Signposts of one cluster decrease with k, so the top ``d`` overall are exactly what ``d``
    greedy steps would pick. Exact ties go to the cluster with fewer seats, then the preferred one.
    """
    open_ = elig & (s < cap)
    n_open = int(np.count_nonzero(open_))
    if n_open == 0:
        return
    if n_open > 2 * d:
        # Only clusters whose first signpost is among the top d can win a seat (each cluster's
        # signposts decrease); keep them and anything within tie tolerance, drop the rest. Over
        # whole arrays (closed clusters at -inf): gathering the open rows first cost more.
        first = w / (s + 0.5)
        first[~open_] = -np.inf
        kth = np.partition(first, first.size - d)[first.size - d]
        keep = first >= kth - 2 * abs(kth) * _REL
        exact = (first == kth).nonzero()[0]
        if exact.size > d:  # of many equal signposts only the first d by the tie order can win
            pref = prefer[exact] if prefer is not None else np.zeros(exact.size)
            keep[exact[np.lexsort((exact, -pref, s[exact]))[d:]]] = False
        rows = keep.nonzero()[0]
    else:
        rows = open_.nonzero()[0]
    k = np.arange(d, dtype=np.float64)
    seats = s[rows][:, None] + k                       # seat index each signpost would create
    p = w[rows][:, None] / (seats + 0.5)
    p[seats >= cap[rows][:, None]] = -1.0
    flat = p.ravel()
    take = min(d, int(np.count_nonzero(flat > 0)))
    if take <= 0:
        return
    thr = np.partition(flat, flat.size - take)[flat.size - take]
    tol = abs(thr) * _REL
    chosen = (flat >= thr - tol).nonzero()[0]
    if chosen.size > take:  # signposts tied at the threshold: the tie order decides which of them win
        sure = chosen[flat[chosen] > thr + tol]
        tied = chosen[flat[chosen] <= thr + tol]
        seat_of = seats.ravel()[tied]
        pref = prefer[rows][tied // d] if prefer is not None else np.zeros(tied.size)
        order = np.lexsort((tied, -pref, seat_of))
        chosen = np.concatenate((sure, tied[order[:take - sure.size]]))
    s += np.bincount(rows[chosen // d], minlength=s.size)


def _remove(s: IntArr, w: FloatArr, d: int, prefer: FloatArr | None) -> None:
    """Remove ``d`` seats in reverse Webster order (in place)."""
    d = min(d, int(s.sum()))
    if d <= 0:
        return
    zero = (w <= 0) & (s > 0)
    if zero.any():
        # weight-0 clusters lose their replicas first, least preferred first
        rows = np.flatnonzero(zero)
        if prefer is not None:
            rows = rows[np.argsort(prefer[rows], kind="stable")]
        have = s[rows]
        before = np.concatenate(([0], np.cumsum(have)[:-1]))
        take = np.clip(d - before, 0, have)
        s[rows] -= take
        d -= int(take.sum())
    pos = w > 0
    while d > _GREEDY:
        sf = s.astype(np.float64)
        live = pos & (s > 0)
        if not live.any():
            return
        lo = float((w[live] / (sf[live] - 0.5)).min()) * (1 - 1e-9)
        hi = float(w[live].max()) / 0.25
        if not (lo > 1e-300 and np.isfinite(hi)):
            break

        best: IntArr | None = None
        best_r = 0
        for _ in range(60):
            mid = (lo * hi) ** 0.5
            r, t = _removed(mid, w, s, pos)
            if r <= d:
                lo = mid
                best, best_r = t, r
                if d - r <= _GREEDY:
                    break
            else:
                hi = mid
            if hi / lo < 1 + 1e-12:
                break
        if best is None or best_r == 0:
            break
        s[:] = best
        d -= best_r
    if d > 0:
        _remove_bottom(s, w, d, prefer)


def _remove_bottom(s: IntArr, w: FloatArr, d: int, prefer: FloatArr | None) -> None:
    """Take back the ``d`` lowest signposts w/(s-k-0.5), vectorised; ties: the cluster with more
    seats, then the least preferred one (exactly the reverse of ``_add_top``)."""
    rows = np.flatnonzero(s > 0)
    if rows.size == 0:
        return
    k = np.arange(d, dtype=np.float64)
    seat = s[rows][:, None] - k                         # the seat being removed (1-based)
    q = w[rows][:, None] / np.maximum(seat - 0.5, 0.5)
    q[seat < 1] = np.inf
    flat = q.ravel()
    take = min(d, int(np.isfinite(flat).sum()))
    if take <= 0:
        return
    thr = np.partition(flat, take - 1)[take - 1]
    tol = abs(thr) * _REL
    chosen = np.flatnonzero(flat < thr - tol)
    need = take - chosen.size
    if need > 0:
        tied = np.flatnonzero(np.abs(flat - thr) <= tol)
        r = tied // d
        pref = prefer[rows][r] if prefer is not None else -rows[r].astype(np.float64)
        order = np.lexsort((-tied, pref, -seat.ravel()[tied]))
        chosen = np.concatenate((chosen, tied[order[:need]]))
    np.subtract.at(s, rows[chosen // d], 1)


def webster(
    total: int,
    weights: FloatArr,
    caps: FloatArr,
    *,
    initial: IntArr | None = None,
    prefer: FloatArr | None = None,
) -> IntArr:
    """Capped Webster apportionment of ``total`` seats; incremental from ``initial`` when given.

    ``prefer`` breaks exact ties (higher is preferred for a new seat, lower loses a seat first).
    Returns seats summing to ``min(total, reachable)``.
    """
    w = np.asarray(weights, dtype=np.float64)
    top = float(w.max()) if w.size else 0.0
    if top > 0:
        w = w / top  # scale-free: keeps the divisor search in a sane floating-point range
    m = w.size
    cap = np.floor(np.asarray(caps, dtype=np.float64))
    if initial is not None:
        s = np.asarray(initial, dtype=np.intp).copy()
        cap = np.maximum(cap, s)
    else:
        s = np.zeros(m, dtype=np.intp)
        elig = (w > 0) & (cap > 0)
        wsum = float(w[elig].sum())
        if wsum <= 0 or total <= 0:
            return s
        start = np.where(elig, np.minimum(cap, np.floor(w * (total / wsum) + 0.5)), 0.0)
        s = _as_int(start)
    d = total - int(s.sum())
    if d > 0:
        _add(s, w, cap, d, prefer)
    elif d < 0:
        _remove(s, w, -d, prefer)
    return s


@dataclass(frozen=True, slots=True)
class TopClamp:
    """What the WaterLevel division's clamp on the hottest reads (`_clamp_top`), per position: the same
    levels and steps the users' band's ceiling reads, and this workload's replicas there now."""

    levels: FloatArr  # its water level now (this workload's own replicas counted)
    steps: FloatArr  # the water level one replica adds (the larger resource's; inf: none fits)
    existing: IntArr  # this workload's replicas there now (a sub-division may replace the input's)

    def sub(self, g: IntArr) -> TopClamp:
        return TopClamp(self.levels[g], self.steps[g], self.existing[g])


@dataclass(slots=True)
class DivisionInput:
    """Candidate-local arrays (length m) describing one division problem."""

    kind: str
    total: int
    caps: FloatArr          # replicas this workload may have per cluster (existing + what fits)
    existing: IntArr        # current replicas kept on each candidate
    scores: FloatArr        # total score 0..100
    prefer: FloatArr        # tie-break preference (higher = better)
    spread: float = 1.0     # adjuster's spread factor σ
    static_weights: FloatArr | None = None
    required: IntArr | None = None  # positions that must get ≥ 1 replica (spread minGroups)
    keep_existing: bool = True
    clamp: TopClamp | None = None  # WaterLevel: no new seat piled onto the hottest (None: not clamped)


def aggregate(
    total: int,
    caps: FloatArr,
    *,
    initial: IntArr | None = None,
    used: BoolArr | None = None,
    scores: FloatArr | None = None,
    prefer: FloatArr | None = None,
) -> IntArr:
    """Aggregated division: the fewest clusters that hold ``total``, divided in proportion to room.

    Scale-up (or from scratch) orders clusters already ``used`` (or holding ``initial`` replicas)
    first, then by room (capped at the replicas still needed, so every cluster that can take them
    all ties and the score decides), then ``scores``, then ``prefer``; takes the shortest prefix
    whose room holds the new replicas and divides them by Webster with weights = room. Scale-down
    keeps the fewest clusters (most replicas first) that already hold ``total`` and divides it in
    proportion to what they hold — the others are emptied. Returns ``min(total, reachable)`` seats.
    """
    cap = np.floor(np.asarray(caps, dtype=np.float64))
    m = cap.size
    s = np.zeros(m, dtype=np.intp) if initial is None else np.asarray(initial, dtype=np.intp).copy()
    pref = np.zeros(m) if prefer is None else np.asarray(prefer, dtype=np.float64)
    d = total - int(s.sum())
    if d > 0:
        room: FloatArr = np.subtract(cap, s, dtype=np.float64)
        np.maximum(room, 0.0, out=room)
        np.minimum(room, float(d), out=room)
        first = (s > 0) if used is None else (np.asarray(used, dtype=bool) | (s > 0))
        sc = np.zeros(m) if scores is None else np.asarray(scores, dtype=np.float64)
        best = _first_that_holds(d, room, first, sc, pref)
        if best is not None:  # one cluster holds them all: the common case, without sorting every row
            s[best] += d
            return s
        order = np.lexsort((-pref, -sc, -room, -first.astype(np.float64)))
        order = order[room[order] > 0]
        if order.size == 0:
            return s
        k = int(np.searchsorted(np.cumsum(room[order]), float(d) - 0.5)) + 1
        take = order[:k]
        s[take] += webster(d, room[take], room[take], prefer=pref[take])
    elif d < 0:
        held = np.flatnonzero(s > 0)
        order = held[np.lexsort((-pref[held], -s[held]))]
        k = int(np.searchsorted(np.cumsum(s[order]), float(total) - 0.5)) + 1 if total > 0 else 0
        keep = order[:k]
        out = np.zeros(m, dtype=np.intp)
        if keep.size:
            w = s[keep].astype(np.float64)
            out[keep] = webster(total, w, w, prefer=pref[keep])
        s = out
    return s


def _first_that_holds(d: int, room: FloatArr, first: BoolArr, sc: FloatArr, pref: FloatArr) -> int | None:
    """The row ``aggregate``'s order puts first when it alone has room for all ``d`` (else None):
    used first, then most room, score, preference, lowest row — found with a few reductions."""
    # masks over whole arrays: gathering the rows cost more, and without clusters in use the ties at the
    # most room are most of the rows
    r = np.where(first, room, -np.inf) if first.any() else room  # clusters in use come first when there are any
    most = r.max()
    if most < d:  # room is capped at d: only a full cluster holds them all
        return None
    tied = r == most
    for key in (sc, pref):
        if np.count_nonzero(tied) > 1:
            v = np.where(tied, key, -np.inf)
            tied &= v == v.max()
    hit = tied.nonzero()[0]
    return int(hit[0]) if hit.size else None  # none: a NaN key; the full sort decides


def divide(inp: DivisionInput) -> IntArr:
    """Divide ``inp.total`` replicas according to ``inp.kind``; see the module docstring."""
    m = inp.caps.size
    total = inp.total
    caps = inp.caps
    init = inp.existing.astype(np.intp) if inp.keep_existing else None
    if m == 0 or total <= 0:
        return np.zeros(m, dtype=np.intp)
    if inp.kind == "Duplicated":
        return np.where(caps >= total, total, 0).astype(np.intp)
    if init is not None and inp.required is not None and inp.required.size:
        need = inp.required[(init[inp.required] == 0) & (caps[inp.required] >= 1)]
        room = total - int(init.sum())
        if room > 0 and need.size:
            init[need[:room]] = 1
    elif init is None and inp.required is not None and inp.required.size:
        init = np.zeros(m, dtype=np.intp)
        ok = inp.required[caps[inp.required] >= 1][:total]
        init[ok] = 1
    if inp.kind == "Aggregated":
        return aggregate(total, caps, initial=init, used=inp.existing > 0, scores=inp.scores, prefer=inp.prefer)
    finite = np.isfinite(caps)
    if inp.kind == "StaticWeight":
        w = inp.static_weights if inp.static_weights is not None else np.ones(m)
        return webster(total, w, caps, initial=init, prefer=inp.prefer)
    headroom = caps if finite.all() else np.ones(m)
    if inp.kind == "AvailableReplicas":
        return webster(total, headroom, caps, initial=init, prefer=inp.prefer)
    # WaterLevel (default): blend spread (∝ headroom × score) and pack (fewest clusters) by σ
    sigma = min(1.0, max(0.0, inp.spread))
    # a score floor of 1 keeps a low-scored cluster as the last resort rather than never
    w_spread = np.where(caps > 0, headroom * (np.maximum(inp.scores, 1.0) / 100.0), 0.0)
    fresh = init is None or not init.any()
    if sigma >= 1.0 and fresh:
        return _clamp_top(total, w_spread, caps, None, inp)
    pack = aggregate(total, caps, used=inp.existing > 0, scores=inp.scores, prefer=inp.prefer)
    if sigma <= 0.0 and fresh:
        return pack
    # one apportionment over the blended shares: σ·(spread quota) + (1-σ)·(pack allocation)
    blend = np.zeros(m)
    wsum = float(w_spread.sum())
    if sigma > 0 and wsum > 0:  # no cluster with room: nothing to spread over
        blend += (sigma * total / wsum) * w_spread
    if sigma < 1:
        blend += (1.0 - sigma) * pack
    return _clamp_top(total, blend, caps, init, inp)


def _clamp_top(total: int, w: FloatArr, caps: FloatArr, init: IntArr | None, inp: DivisionInput) -> IntArr:
    """Webster, with no new seat lifting a position more than half a step above the higher of the hottest
    candidate's level now and the lowest level under which all the new seats fit: the proportional share
    hedges against levels that move (a cluster low now is often one whose day has not begun), the clamp
    keeps it from piling onto the hottest. What the clamp cannot hold (only when ``caps`` leave too little
    room under it) goes by ``caps``."""
    first = webster(total, w, caps, initial=init, prefer=inp.prefer)
    c = inp.clamp
    if c is None:
        return first
    held = np.zeros(caps.size, dtype=np.intp) if init is None else init
    touched = np.flatnonzero(first > held)
    if not touched.size:
        return first
    top = float(np.max(c.levels, where=w > 0, initial=-np.inf))  # (a weight > 0 has caps > 0)
    step = c.steps[touched]
    after = c.levels[touched] + (first[touched] - c.existing[touched]) * step
    if bool(np.all(~np.isfinite(step) | (after <= top + (CLAMP_SLACK + 1e-9) * step))):
        return first  # nothing above the hottest: the common case
    tight = _under_top(total - int(held.sum()), w, caps, held, c.levels, c.steps, c.existing, top)
    if tight is None:
        return first
    clamped = webster(total, w, tight, initial=init, prefer=inp.prefer)
    return clamped if int(clamped.sum()) >= total else webster(total, w, caps, initial=clamped, prefer=inp.prefer)


def _under_top(need: int, w: FloatArr, caps: FloatArr, held: IntArr, level: FloatArr, step: FloatArr,
               existing: IntArr, top: float) -> FloatArr | None:
    """``caps`` tightened to the seats each position holds under the clamp's level (None: no room to spare,
    the caps decide)."""
    known = np.isfinite(step) & (step > 0)
    base = level - existing * np.where(known, step, 0.0)  # the level without this workload
    open_ = known & (w > 0) & (caps > held)
    b, st, now, most = base[open_], step[open_], held[open_].astype(np.float64), np.minimum(np.floor(caps[open_]), 1e12)

    def new_seats(at: float) -> float:
        return float(np.maximum(np.minimum(np.floor((at - b) / st + CLAMP_SLACK + 1e-9), most) - now, 0.0).sum())

    at = top
    if new_seats(at) < need:
        if float((most - now).sum()) <= need:
            return None
        lo, hi, tolerance = at, float((b + most * st).max()), 1e-6 * float(st.min())
        while hi - lo > tolerance:  # the lowest level under which they all fit
            mid = 0.5 * (lo + hi)
            lo, hi = (mid, hi) if new_seats(mid) < need else (lo, mid)
        at = hi
    with np.errstate(divide="ignore", invalid="ignore"):
        under = np.where(known, np.floor((at - base) / step + CLAMP_SLACK + 1e-9), np.inf)
    return np.minimum(caps, np.maximum(under, held))
