"""Choosing routes from evaluated arrays, damped (SPEC C5, C6, C8).

`choose` is the strategy's pick without history: per client site the best eligible instance
(``preferred``) or every eligible instance weighted by the strategy's goodness (``balanced``); a
client site with no instance meeting the SLA gets the instance with the best raw metric, marked
``MAX``.

`step` adds the damping that keeps a flapping status from flapping routes:

* **minimum interval** — a client site's route changes at most once per ``minIntervalSeconds``,
  unless the instance it uses broke the SLA while another meets it (then it moves at once);
* **change threshold** — a valid route is replaced only by one whose strategy key is better by more
  than ``changeThreshold`` (relative);
* **hysteresis** — an instance not in use must meet the SLA with a ``hysteresis`` margin (e.g. delay
  ≤ 90 ms for a 100 ms SLA) before it is chosen; one in use keeps being eligible up to the threshold;
* **hold-down** — outside an emergency, an instance not in use is eligible only once it has met the
  margin continuously for ``minIntervalSeconds`` (a status flapping between good and bad never
  pulls routes back until it has been calm that long).

`step` also says when to look again without a new status (`StepResult.recheck_at`): the moment a
held-back change becomes allowed — a deadline, not polling.

All of it is array code over one service's (client sites x instances).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
from numpy.typing import NDArray

from drods.steering.digests import digest, row_digests
from drods.steering.engine import Chunk, ServiceEval, ServicePlan
from drods.steering.evaluation import B
from drods.steering.metrics import F


@dataclass(frozen=True, slots=True)
class Damping:
    minIntervalSeconds: float = 10.0
    changeThreshold: float = 0.1
    hysteresis: float = 0.1


@dataclass(slots=True)
class RouteState:
    """What one service's published routes are, and since when each client site's has been so."""

    clients: tuple[str, ...]
    instances: tuple[str, ...]
    weights: F  # (clients, instances), rows sum to 1 (or 0: no route)
    changed_at: F  # (clients,) clock time of the last change, -inf never
    changes: int = 0
    held: B = field(default_factory=lambda: np.zeros(0, dtype=bool))  # a better route is held back
    # (clients, instances): since when each pair has met the SLA with the margin (+inf: it does not)
    valid_since: F = field(default_factory=lambda: np.zeros((0, 0)))
    # (clients, instances): until when flows may stay pinned to the pair (used by the route recently)
    recent_until: F = field(default_factory=lambda: np.zeros((0, 0)))

    def remapped(self, clients: tuple[str, ...], instances: tuple[str, ...]) -> RouteState:
        """The same state over another set of client sites / instances (new names start empty)."""
        if clients == self.clients and instances == self.instances:
            return self
        ci = {c: k for k, c in enumerate(self.clients)}
        ii = {c: k for k, c in enumerate(self.instances)}
        rows = np.array([ci.get(c, -1) for c in clients], dtype=np.int64)
        cols = np.array([ii.get(c, -1) for c in instances], dtype=np.int64)
        known = (rows >= 0)[:, None] & (cols >= 0)[None, :]
        gather = (np.maximum(rows, 0)[:, None], np.maximum(cols, 0)[None, :])

        def carry(a: F, fill: float) -> F:
            if a.shape != self.weights.shape or not a.size:
                return np.full(known.shape, fill)
            return np.where(known, a[gather], fill)

        w = carry(self.weights, 0.0)
        since = carry(self.valid_since, np.inf)
        recent = carry(self.recent_until, -np.inf)
        t = np.where(rows >= 0, self.changed_at[np.maximum(rows, 0)] if self.changed_at.size else -np.inf, -np.inf)
        sums = w.sum(axis=1, keepdims=True)
        w = np.where(sums > 0, w / np.where(sums > 0, sums, 1.0), 0.0)  # an instance left: renormalise
        return RouteState(clients, instances, w, t, self.changes, valid_since=since, recent_until=recent)


@dataclass(frozen=True, slots=True)
class _Arrays:
    """What choosing reads, for one service (C, I) or a chunk of them (S, C, I)."""

    metric: F
    valid: B
    valid_enter: B
    key: F
    goodness: F
    balanced: B  # broadcastable: (S, 1, 1) or a scalar
    size: NDArray[np.int64]  # balanced: at most this many instances per row, broadcastable like ``balanced``
    ties: bool  # the key can tie (cost, load): break ties by the metric
    worsened: F  # when each instance's cluster last got worse (hold-down counts from then too)

    @classmethod
    def of(cls, ev: ServiceEval | Chunk) -> _Arrays:
        if isinstance(ev, Chunk):
            balanced = np.array([p.output == "balanced" for p in ev.plans])[:, None, None]
            size = np.array([p.balanced_size for p in ev.plans])[:, None, None]
            ties = any(p.strategy != "experienceFirst" for p in ev.plans)
        else:
            balanced = np.array(ev.plan.output == "balanced")
            size = np.array(ev.plan.balanced_size)
            ties = ev.plan.strategy != "experienceFirst"
        return cls(ev.metric, ev.valid, ev.valid_enter, ev.key, ev.goodness, balanced, size, ties, ev.worsened)

    def rows(self, rows: tuple[NDArray[np.int64], ...], shape: tuple[int, ...]) -> _Arrays:
        """The same arrays at some (…, client site) rows only: (rows, instances)."""

        def at(x: NDArray[Any], last: int) -> NDArray[Any]:
            return np.broadcast_to(x, (*shape[:-1], last))[rows]

        n_i = shape[-1]
        return _Arrays(at(self.metric, n_i), at(self.valid, n_i), at(self.valid_enter, n_i), at(self.key, n_i),
                       at(self.goodness, n_i), at(self.balanced, 1), at(self.size, 1), self.ties,
                       at(self.worsened, n_i))


@dataclass(frozen=True, slots=True)
class _Fallback:
    """Where no instance is eligible: the best raw metric (published as MAX). Depends only on the
    metric, so one step computes it once for both of its choices."""

    best: NDArray[np.int64]  # (…, client sites): the instance with the best raw metric
    reachable: B  # the row has an instance with a finite metric

    @classmethod
    def of(cls, metric: F, finite: B | None = None) -> _Fallback:
        if metric.shape[-1] == 0:
            return cls(np.zeros(metric.shape[:-1], dtype=np.int64), np.zeros(metric.shape[:-1], dtype=bool))
        finite = np.isfinite(metric) if finite is None else finite
        return cls(np.argmin(metric, axis=-1), np.asarray(finite.any(axis=-1), dtype=bool))


def _at(a: NDArray[Any], shape: tuple[int, ...], index: NDArray[np.int64]) -> NDArray[Any]:
    """``a`` (broadcast to ``shape``) at one instance per row."""
    return np.take_along_axis(np.broadcast_to(a, shape), index[..., None], axis=-1)[..., 0]


@dataclass(frozen=True, slots=True)
class _Choice:
    """Routes (…, client sites, instances) and their `_score`; ``best``: where each row uses one
    instance at weight 1 (a preferred route), that instance, -1 for no route (None: balanced)."""

    weights: F
    score: F
    best: NDArray[np.int64] | None = None

    def at(self, rows: tuple[NDArray[np.int64], ...]) -> _Choice:
        return _Choice(self.weights[rows], self.score[rows], None if self.best is None else self.best[rows])


def _one_hot(best: NDArray[np.int64], n_i: int) -> F:
    """Rows of weight 1 at ``best`` (none where it is -1)."""
    weights = np.zeros((*best.shape, n_i))
    np.put_along_axis(weights, np.maximum(best, 0)[..., None], (best >= 0)[..., None].astype(np.float64), axis=-1)
    return weights


def _choose(a: _Arrays, eligible: B, fb: _Fallback | None = None) -> _Choice:
    """The strategy's pick among ``eligible`` — or the best raw metric where nothing is eligible
    (published as MAX)."""
    n_i = a.metric.shape[-1]
    if n_i == 0:
        return _Choice(np.zeros(a.metric.shape), np.full(a.metric.shape[:-1], np.inf))
    fb = fb or _Fallback.of(a.metric)
    row_ok: B = np.asarray(eligible.any(axis=-1), dtype=bool)
    fallback = ~row_ok & fb.reachable
    if a.balanced.all():
        g = np.where(eligible, a.goodness, 0.0)
        if n_i > int(a.size.min()):  # keep the ``size`` best (by goodness) of each row, ties by position
            size = np.broadcast_to(np.minimum(a.size, n_i), (*g.shape[:-1], 1))
            kth = np.take_along_axis(-np.sort(-g, axis=-1), size - 1, axis=-1)
            greater, equal = g > kth, g == kth
            room = size - greater.sum(axis=-1, keepdims=True)
            g = np.where(greater | (equal & (np.cumsum(equal, axis=-1) <= room)), g, 0.0)
        sums = g.sum(axis=-1, keepdims=True)
        weights = np.where(sums > 0, g / np.where(sums > 0, sums, 1.0), 0.0)
        if fallback.any():
            best_raw = np.arange(n_i) == fb.best[..., None]
            weights = np.asarray(np.where(fallback[..., None], best_raw, weights), dtype=np.float64)
        return _Choice(weights, _score(weights, a.key, a.valid))
    # One instance per row: its score is its key, read at that instance instead of summed over all.
    k = np.where(eligible, a.key, np.inf)
    if a.ties:
        kmin = k.min(axis=-1, keepdims=True)
        tie = k <= kmin + 1e-9 * np.maximum(1.0, np.abs(np.where(np.isfinite(kmin), kmin, 0.0)))
        k = np.where(tie, a.metric, np.inf)
    has = row_ok | fallback
    best = np.where(has, np.where(fallback, fb.best, np.argmin(k, axis=-1)), -1)
    shape = np.broadcast_shapes(a.metric.shape, eligible.shape)
    at = np.maximum(best, 0)
    score = np.where(has & _at(a.valid, shape, at), _at(a.key, shape, at), np.inf)
    return _Choice(_one_hot(best, n_i), score, best)


def choose(ev: ServiceEval, eligible: B) -> tuple[F, B]:
    """Weights (client sites x instances) and which rows met the SLA (no history, no damping)."""
    return _choose(_Arrays.of(ev), eligible).weights, np.asarray(eligible.any(axis=-1), dtype=bool)


def _score(weights: F, key: F, valid: B, used: B | None = None) -> F:
    """A route's strategy key (weighted), +inf when an instance it uses breaks the SLA or none
    (``used``: ``weights > 0``, when the caller has it)."""
    used = weights > 0 if used is None else used
    ok = used.any(axis=-1) & ~(used & ~valid).any(axis=-1)
    with np.errstate(invalid="ignore"):
        s = (weights * np.where(used, key, 0.0)).sum(axis=-1)
    return np.where(ok, s, np.inf)


@dataclass(frozen=True, slots=True)
class StepResult:
    state: RouteState
    changed: B  # (clients,) whose route changed
    recheck_at: float | None  # when a held-back change may become allowed (None: nothing held)


@dataclass(frozen=True, slots=True)
class _Next:
    weights: F
    changed_at: F
    valid_since: F
    change: B
    held: B
    recheck_at: F  # per service (or a 0-d array): +inf nothing to wait for
    best: NDArray[np.int64] | None  # preferred routes: the instance of each row, -1 none (see `_Choice`)


def _calm_unless_urgent(a: _Arrays, eligible: B, fb: _Fallback, urgent: B, rush: _Choice) -> _Choice:
    """The candidate routes: ``rush`` where a row is urgent, else the calm choice among ``eligible``
    (made for those rows only when they are few enough to gather)."""
    if urgent.all():
        return rush
    if urgent.sum() * 4 < urgent.size:  # few urgent rows: choose calmly over all rows, then put rush back
        rows = np.nonzero(urgent)
        out, part = _choose(a, eligible, fb), rush.at(rows)
    else:
        rows = np.nonzero(~urgent)
        part = _choose(a.rows(rows, rush.weights.shape), eligible[rows], _Fallback(fb.best[rows], fb.reachable[rows]))
        out = _Choice(rush.weights.copy(), rush.score.copy(), None if rush.best is None else rush.best.copy())
    out.weights[rows], out.score[rows] = part.weights, part.score
    if out.best is not None and part.best is not None:
        out.best[rows] = part.best
    return out


@dataclass(frozen=True, slots=True)
class _Current:
    """The routes a step starts from."""

    held: B  # (…, C, I): the instances in use
    has_route: B
    best: NDArray[np.int64] | None  # every row uses at most one instance, at weight 1: that one (-1 none)

    @classmethod
    def of(cls, weights0: F) -> _Current:
        held = weights0 > 0
        count = held.sum(axis=-1)
        has_route = count > 0
        best = None
        if weights0.shape[-1] and int(count.max(initial=0)) <= 1:
            index = np.argmax(held, axis=-1)
            if (_at(weights0, weights0.shape, index)[has_route] == 1.0).all():
                best = np.where(has_route, index, -1)
        return cls(held, has_route, best)


def _differs(cand: _Choice, weights0: F, cur: _Current) -> B:
    if cand.best is not None and cur.best is not None:
        return np.asarray(cand.best != cur.best)
    return np.asarray((np.abs(cand.weights - weights0) > 1e-6).any(axis=-1))


def _step(a: _Arrays, weights0: F, changed_at0: F, since0: F, now: float, damping: Damping) -> _Next:
    """The damped step over (…, C, I) arrays (see the module docstring)."""
    valid_since = np.where(a.valid_enter, np.minimum(since0, now), np.inf)
    calm_since = np.maximum(valid_since, a.worsened)
    cur = _Current.of(weights0)
    held, has_route = cur.held, cur.has_route
    keep = held & a.valid
    settled = a.valid_enter & (now - calm_since >= damping.minIntervalSeconds)
    finite = np.isfinite(a.metric)
    fb = _Fallback.of(a.metric, finite)
    rush = _choose(a, keep | a.valid_enter, fb)
    shape = np.broadcast_shapes(a.metric.shape, weights0.shape)
    if cur.best is not None:  # one instance per row: its key, read at that instance
        at = np.maximum(cur.best, 0)
        with np.errstate(invalid="ignore"):
            cur_score = np.where(has_route & _at(a.valid, shape, at),
                                 _at(weights0, shape, at) * _at(a.key, shape, at), np.inf)
    else:
        cur_score = _score(weights0, a.key, a.valid, held)
    # Usable = no instance it uses has become unreachable (a MAX route stays usable best effort).
    reachable = ~(held & ~finite).any(axis=-1)
    urgent = ~has_route | ~reachable | (~np.isfinite(cur_score) & np.isfinite(rush.score))
    cand = _calm_unless_urgent(a, keep | settled, fb, urgent, rush)
    new_score = cand.score
    differs = _differs(cand, weights0, cur)
    elapsed = (now - changed_at0) >= damping.minIntervalSeconds
    both_max = ~np.isfinite(cur_score) & ~np.isfinite(new_score)
    if both_max.any():  # neither meets the SLA: compare raw metrics so a best-effort route can improve
        with np.errstate(invalid="ignore"):
            cur_raw = (weights0 * np.where(held, a.metric, 0.0)).sum(axis=-1)
            new_raw = (cand.weights * np.where(cand.weights > 0, a.metric, 0.0)).sum(axis=-1)
        cur_score = np.where(both_max, cur_raw, cur_score)
        new_score = np.where(both_max, new_raw, new_score)
    with np.errstate(invalid="ignore"):
        improve = new_score < cur_score * (1.0 - damping.changeThreshold)
    change = differs & (urgent | (elapsed & improve))
    best = None
    if cand.best is not None and cur.best is not None:
        best = np.where(change, cand.best, cur.best)
        weights = _one_hot(best, weights0.shape[-1])
    else:
        weights = np.where(change[..., None], cand.weights, weights0)
    changed_at = np.where(change, now, changed_at0)
    # Held back: a better route exists (or soon will, once an instance has been calm long enough). A row
    # that did not change kept weights0; only those that neither changed nor differ are compared again.
    unchanged = ~change & ~differs
    held_rows = ~change & differs
    if rush.best is not None and cur.best is not None:
        held_rows |= unchanged & (rush.best != cur.best)
    elif unchanged.sum() * 4 > unchanged.size:  # most rows: one pass over all of them is cheaper than gathering
        held_rows |= unchanged & (np.abs(rush.weights - weights0) > 1e-6).any(axis=-1)
    elif unchanged.any():
        same = np.nonzero(unchanged)
        held_rows[same] = (np.abs(rush.weights[same] - weights0[same]) > 1e-6).any(axis=-1)
    # The earliest moment the time-based rules stop holding a row back (read on the held rows only).
    calm_at = np.full(held_rows.shape, np.inf)
    rows = np.nonzero(held_rows)
    if len(rows[0]) and weights.shape[-1]:
        def on_held(x: NDArray[Any]) -> NDArray[Any]:
            return np.broadcast_to(x, weights.shape)[rows]

        waiting = on_held(a.valid_enter) & ~on_held(settled) & ~(on_held(weights) > 0)
        calm_at[rows] = np.where(waiting, on_held(calm_since), np.inf).min(axis=-1)
    row_at = np.maximum(changed_at, np.where(np.isfinite(calm_at), calm_at, -np.inf)) + damping.minIntervalSeconds
    recheck = np.where(held_rows & (row_at > now), row_at, np.inf).min(axis=-1) if held_rows.shape[-1] else \
        np.full(held_rows.shape[:-1], np.inf)
    return _Next(weights, changed_at, valid_since, change, held_rows, np.asarray(recheck), best)


def _fresh(ev: ServiceEval | ServicePlan) -> RouteState:
    plan = ev if isinstance(ev, ServicePlan) else ev.plan
    shape = (len(plan.clients), len(plan.instances))
    return RouteState(plan.clients, plan.instances, np.zeros(shape), np.full(shape[0], -np.inf),
                      valid_since=np.full(shape, np.inf))


def _recent(state: RouteState) -> F:
    r = state.recent_until
    return r if r.shape == state.weights.shape else np.full(state.weights.shape, -np.inf)


def _since(state: RouteState) -> F:
    return state.valid_since if state.valid_since.shape == state.weights.shape else np.full(state.weights.shape, np.inf)


def step(ev: ServiceEval, state: RouteState | None, now: float, damping: Damping) -> StepResult:
    """One service's next published state, which client sites' routes changed, and when to look again."""
    state = _fresh(ev) if state is None else state.remapped(ev.plan.clients, ev.plan.instances)
    n = _step(_Arrays.of(ev), state.weights, state.changed_at, _since(state), now, damping)
    recheck = float(n.recheck_at)
    recent = np.where(n.weights > 0, now + ev.plan.affinity_seconds, _recent(state))
    nxt = RouteState(state.clients, state.instances, n.weights, n.changed_at, state.changes + int(n.change.sum()),
                     held=n.held, valid_since=n.valid_since, recent_until=recent)
    return StepResult(nxt, n.change, recheck if np.isfinite(recheck) else None)


@dataclass(frozen=True, slots=True)
class ChunkStep:
    """`step_chunk`'s results per service, and the chunk-wide arrays they are views of."""

    results: list[StepResult]
    weights: F  # (S, C, I)
    recent_until: F  # (S, C, I)
    held: B  # (S, C)
    changed_at: F  # (S, C)
    used: tuple[NDArray[np.int64], ...]  # (service, client site, instance) of every weight > 0, sorted
    recent: tuple[NDArray[np.int64], ...]  # … of every pair used recently (recent_until > now)
    eligible: tuple[NDArray[np.int64], ...]  # … of the recent pairs meeting the SLA now: flows may stay on them

    @classmethod
    def of(cls, state: RouteState, now: float, valid: B) -> ChunkStep:
        """One service's state as a chunk of one (for rendering it); ``valid``: its pairs meeting the SLA."""
        changed = np.zeros(state.weights.shape[0], dtype=bool)
        weights, recent = state.weights[None], _recent(state)[None]
        return cls([StepResult(state, changed, None)], weights, recent, _held(state)[None], state.changed_at[None],
                   np.nonzero(weights > 0), *_recent_pairs(recent, now, valid[None]))


def _recent_pairs(recent_until: F, now: float, valid: B) -> tuple[tuple[NDArray[np.int64], ...], ...]:
    """The positions of the pairs used recently, and of those of them meeting the SLA now."""
    recent = np.nonzero(recent_until > now)
    meets = np.broadcast_to(valid, recent_until.shape)[recent]
    return recent, tuple(a[meets] for a in recent)


def _held(state: RouteState) -> B:
    return state.held if state.held.shape == state.weights.shape[:1] else np.zeros(state.weights.shape[0], dtype=bool)


def step_chunk(chunk: Chunk, states: list[RouteState | None], now: float, damping: Damping) -> ChunkStep:
    """`step` for every service of a chunk at once (states in the chunk's order)."""
    shape = chunk.metric.shape
    w0 = np.zeros(shape)
    t0 = np.full(shape[:2], -np.inf)
    s0 = np.full(shape, np.inf)
    r0 = np.full(shape, -np.inf)
    current: list[RouteState] = []
    for s, (plan, st) in enumerate(zip(chunk.plans, states, strict=True)):
        st = _fresh(plan) if st is None else st.remapped(plan.clients, plan.instances)
        current.append(st)
        nc, ni = len(plan.clients), len(plan.instances)
        w0[s, :nc, :ni] = st.weights
        t0[s, :nc] = st.changed_at
        s0[s, :nc, :ni] = _since(st)
        r0[s, :nc, :ni] = _recent(st)
    n = _step(_Arrays.of(chunk), w0, t0, s0, now, damping)
    affinity = np.array([p.affinity_seconds for p in chunk.plans])
    if n.best is not None:  # one instance per row: the pairs in use are read off the index
        rows = np.nonzero(n.best >= 0)
        used = (*rows, n.best[rows])
        recent = r0
        recent[used] = now + affinity[used[0]]
    else:
        used = np.nonzero(n.weights > 0)
        recent = np.where(n.weights > 0, now + affinity[:, None, None], r0)
    counts = n.change.sum(axis=-1)
    out: list[StepResult] = []
    for s, st in enumerate(current):
        nc, ni = len(st.clients), len(st.instances)
        recheck = float(n.recheck_at[s])
        nxt = RouteState(st.clients, st.instances, n.weights[s, :nc, :ni], n.changed_at[s, :nc],
                         st.changes + int(counts[s]), held=n.held[s, :nc], valid_since=n.valid_since[s, :nc, :ni],
                         recent_until=recent[s, :nc, :ni])
        out.append(StepResult(nxt, n.change[s, :nc], recheck if np.isfinite(recheck) else None))
    return ChunkStep(out, n.weights, recent, n.held, n.changed_at, used, *_recent_pairs(recent, now, chunk.valid))


def broken_text(ev: ServiceEval, r: int, j: int) -> str:
    code = ev.broken(r, j)
    sla = ev.plan.sla
    if code == "unreachable":
        return "no network status or a saturated instance"
    if code == "delay":
        return f"delay {ev.delay[r, j]:.1f} ms > {sla.maxDelayMs:g} ms"
    if code == "load":
        return f"load {ev.load[r, j] * 100:.0f} % > {sla.maxLoadPercent:g} %"
    if code == "cost":
        return f"cost {ev.cost[r, j]:.2f}/h > {sla.maxCostPerHour:g}/h"
    if code == "jitter":  # the measured value, as delay's (it said "jitter threshold 1.0 broken")
        return f"jitter {ev.jitter[r, j]:.1f} ms > {sla.maxJitterMs:g} ms"
    if code == "loss":
        return f"loss {ev.loss[r, j]:.2f} % > {sla.maxLossPercent:g} %"
    if code == "bandwidth":
        return f"bandwidth {ev.bandwidth[r, j]:.1f} Mbit/s < {sla.minBandwidthMbps:g} Mbit/s"
    return f"{code} threshold broken"


def render(ev: ServiceEval, state: RouteState, changed_at_text: list[str | None],
           now: float = 0.0) -> list[dict[str, object]]:
    """One service's published routes (see `render_chunk`)."""
    return render_chunk(Chunk.of(ev), ChunkStep.of(state, now, ev.valid), [0], [changed_at_text])[0].routes


def _site_weights(vals: F, site: NDArray[np.int64]) -> F:
    """Rounded weights that still sum to 1 per client site (``site`` sorted): its largest takes the remainder."""
    starts = np.flatnonzero(np.r_[True, site[1:] != site[:-1]]) if len(site) else np.zeros(0, dtype=np.int64)
    if len(starts) == len(vals):  # one instance per site (a preferred route)
        return np.ones(len(vals))
    group = np.repeat(np.arange(len(starts)), np.diff(np.r_[starts, len(vals)]))
    top = np.lexsort((-vals, group))[starts]  # the first largest of each site
    rest = vals.copy()
    rest[top] = 0.0
    out = vals.copy()
    out[top] = np.round(1.0 - np.add.reduceat(rest, starts), 3)
    return out


@dataclass(frozen=True, slots=True)
class Rendered:
    """A service's routes as rendered, and per client site a digest of what its route was made from.

    A busy cluster's saturation rewrites every service using it, but moves only the client sites
    that used it: the next render of the service reuses (shares) a site's route whose digest is
    unchanged and renders the others."""

    routes: list[dict[str, object]]
    digests: NDArray[np.uint64]  # (client sites,)


@dataclass(frozen=True, slots=True)
class _Pairs:
    """The picked services' (service, client site, instance) pairs in use, with what their routes
    show, and the pairs their flows may stay on; ``*_row`` are flat (service, client site) rows."""

    s: NDArray[np.int64]
    r: NDArray[np.int64]
    j: NDArray[np.int64]
    weight: F  # rounded, summing to 1 per site
    valid: B
    metric: F  # rounded
    facts: F  # (pairs, 5): delay, network, processing, cost, load (what a reason reads)
    row: NDArray[np.int64]
    eligible: tuple[NDArray[np.int64], NDArray[np.int64], NDArray[np.int64]]  # recently used, meeting the SLA
    eligible_row: NDArray[np.int64]

    @classmethod
    def of(cls, chunk: Chunk, stepped: ChunkStep, chosen: B) -> _Pairs:
        shape = chunk.metric.shape
        use_s, use_r, use_j = _picked(stepped.used, chosen)
        rounded = np.round(stepped.weights[use_s, use_r, use_j], 3)
        shown = rounded > 0
        use_s, use_r, use_j, rounded = use_s[shown], use_r[shown], use_j[shown], rounded[shown]

        def at(a: NDArray[Any]) -> NDArray[Any]:
            return np.broadcast_to(a, shape)[use_s, use_r, use_j]

        row = use_s * shape[1] + use_r
        facts = np.stack([at(chunk.delay), at(chunk.network), at(chunk.processing), at(chunk.cost), at(chunk.load)],
                         axis=-1, dtype=np.float64)
        el_s, el_r, el_j = _picked(stepped.eligible, chosen)
        return cls(use_s, use_r, use_j, _site_weights(rounded, row), at(chunk.valid), np.round(at(chunk.metric), 3),
                   facts, row, (el_s, el_r, el_j), el_s * shape[1] + el_r)

    def digests(self, stepped: ChunkStep) -> NDArray[np.uint64]:
        """Per (service, client site): a digest of everything its rendered route reads (MAX aside)."""
        n_rows = stepped.held.size
        return row_digests(n_rows, [
            (self.row, digest([self.j, self.weight, self.valid, self.metric, *self.facts.T], 1)),
            (self.eligible_row, digest([self.eligible[2]], 2)),
            (np.arange(n_rows), digest([stepped.held.ravel(), stepped.changed_at.ravel()], 3)),
        ]).reshape(stepped.held.shape)


def _rows_to_build(chunk: Chunk, pairs: _Pairs, digests: NDArray[np.uint64], picks: list[int],
                   previous: list[Rendered | None]) -> tuple[B, NDArray[np.int64]]:
    """Which (flat) rows need a route (not reusable from the service's previous render), and per
    row the one whose route it shares (itself when it is built)."""
    plans, n_rows = chunk.plans, digests.size
    fresh = np.zeros(digests.shape, dtype=bool)
    fresh[picks] = True
    for s, prev in zip(picks, previous, strict=True):
        nc = len(plans[s].clients)
        if prev is not None and len(prev.routes) == nc:
            fresh[s, :nc] = prev.digests != digests[s, :nc]
    has_max = np.zeros(n_rows, dtype=bool)  # a MAX reason reads more than the digest covers
    has_max[pairs.row[~pairs.valid]] = True
    fresh_rows = fresh.ravel() | has_max
    first = plans[picks[0]] if picks else None
    same_names = first is not None and all(plans[s].clients == first.clients and plans[s].instances == first.instances
                                           for s in picks)
    lead = _leaders(fresh_rows & ~has_max, digests.ravel(), digests.shape[1]) if same_names else np.arange(n_rows)
    return fresh_rows, lead


def render_chunk(chunk: Chunk, stepped: ChunkStep, picks: list[int], changed_at_text: list[list[str | None]],
                 previous: list[Rendered | None] | None = None) -> list[Rendered]:
    """The published routes of the chunk's services ``picks`` (``changed_at_text[k]`` and
    ``previous[k]``, that service's last render or None, are those of ``picks[k]``): per client site
    the instances in use with weight, metric and why, and ``eligible``: the instances its flows may
    stay pinned to (used by the route within the affinity timeout, and meeting the SLA now).

    A site whose digest is that of the service's previous render keeps its route; when the services
    have the same client sites and instances, sites with equal digests share one route (services of
    one strategy on one fleet mostly choose the same instance per site); one pass over the pairs of
    the others builds their instances, one reason text per distinct set of facts."""
    plans = chunk.plans
    chosen = np.zeros(len(plans), dtype=bool)
    chosen[picks] = True
    pairs = _Pairs.of(chunk, stepped, chosen)
    digests = pairs.digests(stepped)
    prev_of: list[Rendered | None] = list(previous) if previous is not None else [None] * len(picks)
    fresh_rows, lead = _rows_to_build(chunk, pairs, digests, picks, prev_of)
    built = fresh_rows & (lead == np.arange(lead.size))
    keep = built[pairs.row]
    ss, rows, cols = pairs.s[keep].tolist(), pairs.r[keep].tolist(), pairs.j[keep].tolist()
    weight_of, valid_of = pairs.weight[keep].tolist(), pairs.valid[keep].tolist()
    metric_of = pairs.metric[keep].tolist()
    facts = pairs.facts[keep]
    first, fact_index = _equal_rows(facts)
    distinct, fact_of = facts[first], fact_index.tolist()
    held_of = stepped.held.tolist()
    routes_of: list[list[list[dict[str, object]]]] = [[] for _ in plans]
    eligible_of: list[list[list[str]]] = [[] for _ in plans]
    for s in picks:
        routes_of[s] = [[] for _ in plans[s].clients]
        eligible_of[s] = [[] for _ in plans[s].clients]
    el_s, el_r, el_j = pairs.eligible
    el_keep = built[pairs.eligible_row]
    for s, r, j in zip(el_s[el_keep].tolist(), el_r[el_keep].tolist(), el_j[el_keep].tolist(), strict=True):
        eligible_of[s][r].append(plans[s].instances[j])
    strategy = plans[0].strategy if plans else ""  # a chunk's services share strategy and evaluation
    plain_why = f"{strategy}: best {plans[0].evaluation}; " if plans else ""
    damped = "; a better route is held back by damping"
    reasons: list[str | None] = [None] * len(distinct)
    evals: dict[int, ServiceEval] = {}  # a service's own arrays, for the reasons of its MAX routes
    for n, s in enumerate(ss):
        r, f = rows[n], fact_of[n]
        metric_shown: object
        if valid_of[n]:
            reason = reasons[f]
            if reason is None:
                reason = reasons[f] = _why(strategy, plain_why, *distinct[f].tolist())
            if held_of[s][r]:
                reason += damped
            metric_shown = metric_of[n]
        else:
            ev = evals.get(s)
            if ev is None:
                ev = evals[s] = chunk.service(s)
            broken = broken_text(ev, r, cols[n])
            reason = f"MAX: no instance meets the SLA ({broken}); best effort; {_parts(*distinct[f].tolist()[:3])}"
            metric_shown = "MAX"
        routes_of[s][r].append({"cluster": plans[s].instances[cols[n]], "weight": weight_of[n],
                                "metric": metric_shown, "reason": reason})
    n_c, lead_of, row_of = digests.shape[1], lead.tolist(), {s: k for k, s in enumerate(picks)}
    made: dict[int, dict[str, object]] = {}

    def route(row: int) -> dict[str, object]:
        """The route of a (flat) row this render builds."""
        done = made.get(row)
        if done is None:
            s, r = divmod(row, n_c)
            done = made[row] = {"clientSite": plans[s].clients[r], "instances": routes_of[s][r],
                                "changedAt": changed_at_text[row_of[s]][r], "eligible": eligible_of[s][r]}
        return done

    out: list[Rendered] = []
    for k, s in enumerate(picks):
        nc, prev = len(plans[s].clients), prev_of[k]
        reused = (~fresh_rows[s * n_c:s * n_c + nc]).tolist()
        before = prev.routes if prev is not None else []
        out.append(Rendered([before[r] if reused[r] else route(lead_of[s * n_c + r]) for r in range(nc)],
                            digests[s, :nc].copy()))
    return out


def _leaders(rows: B, digests: NDArray[np.uint64], n_c: int) -> NDArray[np.int64]:
    """Per (flat) row, the first of ``rows`` with its client site and digest: itself if none."""
    lead = np.arange(len(rows))
    at = np.flatnonzero(rows)
    if len(at) > 1:
        first, group = _equal_rows(np.stack([(at % n_c).astype(np.uint64), digests[at]], axis=-1))
        lead[at] = at[first[group]]
    return lead


def _equal_rows(a: NDArray[Any]) -> tuple[NDArray[np.int64], NDArray[np.int64]]:
    """Groups of equal rows of a 2-D array, compared by their bytes (a sort of one key per row):
    each group's first row, and each row's group."""
    keys = np.ascontiguousarray(a)
    _, first, group = np.unique(keys.view(np.dtype((np.void, keys.dtype.itemsize * keys.shape[1]))).ravel(),
                                return_index=True, return_inverse=True)
    return first, group.reshape(-1)


def _parts(delay: float, network: float, processing: float) -> str:
    return f"delay {delay:.1f} ms = network {network:.1f} + processing {processing:.1f}"


def _why(strategy: str, plain: str, delay: float, network: float, processing: float, cost: float,
         load: float) -> str:
    """The reason of a route meeting the SLA (without damping's note)."""
    if strategy == "costFirst":
        why = f"costFirst: cheapest meeting the SLA ({cost:.2f}/h); "
    elif strategy == "resourceFirst":
        why = f"resourceFirst: most headroom meeting the SLA (load {load * 100:.0f} %); "
    else:
        why = plain
    return why + _parts(delay, network, processing)


def _picked(where: tuple[NDArray[np.int64], ...], chosen: B) -> tuple[NDArray[np.int64], ...]:
    """The (service, client site, instance) positions of the chosen services only."""
    keep = chosen[where[0]]
    return tuple(a[keep] for a in where)
