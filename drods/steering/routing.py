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

import numpy as np

from drods.steering.engine import BROKEN, ServiceEval
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

    def remapped(self, clients: tuple[str, ...], instances: tuple[str, ...]) -> RouteState:
        """The same state over another set of client sites / instances (new names start empty)."""
        if clients == self.clients and instances == self.instances:
            return self
        w = np.zeros((len(clients), len(instances)))
        since = np.full((len(clients), len(instances)), np.inf)
        t = np.full(len(clients), -np.inf)
        ci = {c: k for k, c in enumerate(self.clients)}
        ii = {c: k for k, c in enumerate(self.instances)}
        cols = [(j, ii[name]) for j, name in enumerate(instances) if name in ii]
        for r, name in enumerate(clients):
            k = ci.get(name)
            if k is None:
                continue
            t[r] = self.changed_at[k]
            for j, old in cols:
                w[r, j] = self.weights[k, old]
                if self.valid_since.shape == self.weights.shape:
                    since[r, j] = self.valid_since[k, old]
        sums = w.sum(axis=1, keepdims=True)
        w = np.where(sums > 0, w / np.where(sums > 0, sums, 1.0), 0.0)  # an instance left: renormalise
        return RouteState(clients, instances, w, t, self.changes, valid_since=since)


def choose(ev: ServiceEval, eligible: B) -> tuple[F, B]:
    """Weights (client sites x instances) and which rows met the SLA."""
    n_c, n_i = ev.metric.shape
    weights = np.zeros((n_c, n_i))
    if n_i == 0:
        return weights, np.zeros(n_c, dtype=bool)
    row_ok: B = np.asarray(eligible.any(axis=1), dtype=bool)
    if ev.plan.output == "balanced":
        g = np.where(eligible, ev.goodness, 0.0)
        sums = g.sum(axis=1, keepdims=True)
        weights = np.where(sums > 0, g / np.where(sums > 0, sums, 1.0), 0.0)
    else:
        k = np.where(eligible, ev.key, np.inf)
        kmin = k.min(axis=1, keepdims=True)
        tie = eligible & (k <= kmin + 1e-9 * np.maximum(1.0, np.abs(np.where(np.isfinite(kmin), kmin, 0.0))))
        best = np.argmin(np.where(tie, ev.metric, np.inf), axis=1)
        rows = np.flatnonzero(row_ok)
        weights[rows, best[rows]] = 1.0
    # No instance meets the SLA: best effort on the best raw metric (published as MAX).
    fallback = ~row_ok & np.isfinite(ev.metric).any(axis=1)
    if fallback.any():
        rows = np.flatnonzero(fallback)
        weights[rows] = 0.0
        weights[rows, np.argmin(ev.metric[rows], axis=1)] = 1.0
    return weights, row_ok


def _score(weights: F, key: F, valid: B) -> F:
    """A route's strategy key (weighted), +inf when an instance it uses breaks the SLA or none."""
    used = weights > 0
    ok = used.any(axis=1) & ~(used & ~valid).any(axis=1)
    with np.errstate(invalid="ignore"):
        s = (weights * np.where(used, key, 0.0)).sum(axis=1)
    return np.where(ok, s, np.inf)


@dataclass(frozen=True, slots=True)
class StepResult:
    state: RouteState
    changed: B  # (clients,) whose route changed
    recheck_at: float | None  # when a held-back change may become allowed (None: nothing held)


def step(ev: ServiceEval, state: RouteState | None, now: float, damping: Damping) -> StepResult:
    """The next published state, which client sites' routes changed, and when to look again."""
    clients, instances = ev.plan.clients, ev.plan.instances
    shape = ev.metric.shape
    if state is None:
        state = RouteState(clients, instances, np.zeros(shape), np.full(len(clients), -np.inf),
                           valid_since=np.full(shape, np.inf))
    else:
        state = state.remapped(clients, instances)
    since_prev = state.valid_since if state.valid_since.shape == shape else np.full(shape, np.inf)
    valid_since = np.where(ev.valid_enter, np.minimum(since_prev, now), np.inf)
    held = state.weights > 0
    keep = held & ev.valid
    settled = ev.valid_enter & (now - valid_since >= damping.minIntervalSeconds)
    calm, _ = choose(ev, keep | settled)
    rush, _ = choose(ev, keep | ev.valid_enter)
    cur_score = _score(state.weights, ev.key, ev.valid)
    has_route = held.any(axis=1)
    # Usable = no instance it uses has become unreachable (a MAX route stays usable best effort).
    reachable = ~(held & ~np.isfinite(ev.metric)).any(axis=1)
    rush_score = _score(rush, ev.key, ev.valid)
    urgent = ~has_route | ~reachable | (~np.isfinite(cur_score) & np.isfinite(rush_score))
    cand = np.where(urgent[:, None], rush, calm)
    new_score = _score(cand, ev.key, ev.valid)
    differs = (np.abs(cand - state.weights) > 1e-6).any(axis=1)
    elapsed = (now - state.changed_at) >= damping.minIntervalSeconds
    both_max = ~np.isfinite(cur_score) & ~np.isfinite(new_score)
    if both_max.any():  # neither meets the SLA: compare raw metrics so a best-effort route can improve
        cur_raw = (state.weights * np.where(held, ev.metric, 0.0)).sum(axis=1)
        new_raw = (cand * np.where(cand > 0, ev.metric, 0.0)).sum(axis=1)
        cur_score = np.where(both_max, cur_raw, cur_score)
        new_score = np.where(both_max, new_raw, new_score)
    with np.errstate(invalid="ignore"):
        improve = new_score < cur_score * (1.0 - damping.changeThreshold)
    change = differs & (urgent | (elapsed & improve))
    weights = np.where(change[:, None], cand, state.weights)
    changed_at = np.where(change, now, state.changed_at)
    # Held back: a better route exists (or soon will, once an instance has been calm long enough).
    rush_differs = (np.abs(rush - weights) > 1e-6).any(axis=1)
    held_rows = ~change & (differs | rush_differs)
    recheck_at: float | None = None
    if held_rows.any():  # the earliest moment the time-based rules stop holding a row back
        waiting = ev.valid_enter & ~settled & ~(weights > 0) & held_rows[:, None]
        calm_at = np.where(waiting, valid_since, np.inf).min(axis=1)
        row_at = np.maximum(changed_at, np.where(np.isfinite(calm_at), calm_at, -np.inf)) \
            + damping.minIntervalSeconds
        future = row_at[held_rows & (row_at > now)]
        recheck_at = float(future.min()) if future.size else None
    nxt = RouteState(clients, instances, weights, changed_at, state.changes + int(change.sum()),
                     held=held_rows, valid_since=valid_since)
    return StepResult(nxt, change, recheck_at)


def _fmt(v: float) -> float:
    return float(round(v, 3))


def _broken_text(ev: ServiceEval, r: int, j: int) -> str:
    code = BROKEN[int(ev.broken[r, j])]
    sla = ev.plan.sla
    if code == "unreachable":
        return "no network status or a saturated instance"
    if code == "delay":
        return f"delay {ev.delay[r, j]:.1f} ms > {sla.maxDelayMs:g} ms"
    if code == "load":
        return f"load {ev.load[r, j] * 100:.0f} % > {sla.maxLoadPercent:g} %"
    if code == "cost":
        return f"cost {ev.cost[r, j]:.2f}/h > {sla.maxCostPerHour:g}/h"
    limits = {"jitter": sla.maxJitterMs, "loss": sla.maxLossPercent, "bandwidth": sla.minBandwidthMbps}
    return f"{code} threshold {limits.get(code)} broken"


def render(ev: ServiceEval, state: RouteState, changed_at_text: list[str | None]) -> list[dict[str, object]]:
    """The published routes: per client site the instances in use with weight, metric and why."""
    p = ev.plan
    routes: list[dict[str, object]] = []
    for r, client in enumerate(p.clients):
        instances: list[dict[str, object]] = []
        used = [int(j) for j in np.flatnonzero(state.weights[r] > 0)]
        weights = [_fmt(float(state.weights[r, j])) for j in used]
        if len(weights) > 1:  # rounded weights still sum to 1
            weights[0] = _fmt(1.0 - sum(weights[1:]))
        for j, weight in zip(used, weights, strict=True):
            ok = bool(ev.valid[r, j])
            parts = f"delay {ev.delay[r, j]:.1f} ms = network {ev.network[r, j]:.1f} + processing " \
                    f"{ev.processing[r, j]:.1f}"
            if ok:
                why = {"experienceFirst": f"best {p.evaluation}",
                       "costFirst": f"cheapest meeting the SLA ({ev.cost[r, j]:.2f}/h)",
                       "resourceFirst": f"most headroom meeting the SLA (load {ev.load[r, j] * 100:.0f} %)"}
                reason = f"{p.strategy}: {why[p.strategy]}; {parts}"
                if bool(state.held[r]):
                    reason += "; a better route is held back by damping"
                metric: float | str = _fmt(float(ev.metric[r, j]))
            else:
                reason = f"MAX: no instance meets the SLA ({_broken_text(ev, r, j)}); best effort; {parts}"
                metric = "MAX"
            instances.append({"cluster": p.instances[j], "weight": weight, "metric": metric, "reason": reason})
        routes.append({"clientSite": client, "instances": instances, "changedAt": changed_at_text[r]})
    return routes
