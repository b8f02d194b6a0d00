"""ORC (SPEC C6): every (service, client site, instance) evaluated at once, with NumPy.

`evaluate` takes the status view (`Fleet`: site-to-cluster network arrays, per-cluster load and
price) and the compiled registrations (`ServicePlan`), and returns per service the arrays a route is
chosen from: the metric value, whether the SLA holds (and holds with the hysteresis margin), the
strategy's ranking key, the balanced-output goodness, and which threshold broke. Services are
evaluated in chunks as (services, client sites, instances) arrays; no Python loop over pairs.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
from numpy.typing import NDArray

from drods.model.steering import NormalisationChoice, Output, Sla, Strategy
from drods.steering.evaluation import EVALUATIONS, B, Inputs
from drods.steering.metrics import F

I64 = NDArray[np.int64]

STRATEGIES: tuple[Strategy, ...] = ("experienceFirst", "costFirst", "resourceFirst")
_SATURATED = 0.999  # utilisation at which the queue never drains: processing delay is infinite
_CHUNK = 64


@dataclass(frozen=True, slots=True)
class Fleet:
    """The status view in arrays: ``clients`` x ``clusters`` network legs (+inf delay = no status),
    and per cluster its CPU utilisation (NaN unknown) and price per core-hour."""

    clusters: tuple[str, ...]
    clients: tuple[str, ...]
    delay: F
    jitter: F
    loss: F
    bandwidth: F
    utilisation: F
    core_cost: F
    # Per cluster: when its status last got worse (clock time; -inf never). An instance counts as calm
    # for the hold-down only from then on, though the services not using it were not evaluated then.
    worsened_at: F = field(default_factory=lambda: np.zeros(0))


@dataclass(frozen=True, slots=True)
class ServicePlan:
    """One registration compiled for evaluation; ``instances`` are its workload's clusters."""

    service_id: str
    strategy: Strategy
    output: Output
    evaluation: str
    sensitive: tuple[str, ...]
    sla: Sla
    service_time_ms: float
    cores: float
    normalisation: NormalisationChoice
    clients: tuple[str, ...]
    instances: tuple[str, ...]
    balanced_size: int = 3
    affinity_seconds: float = 300.0  # flows stay pinned to an instance used this recently


@dataclass(frozen=True, slots=True)
class ServiceEval:
    """One service's arrays, (its client sites) x (its instances)."""

    plan: ServicePlan
    metric: F  # the evaluation function's value; +inf unreachable
    valid: B  # every SLA threshold holds
    valid_enter: B  # holds with the hysteresis margin (what a new choice must meet)
    key: F  # the strategy's ranking key, smaller is better
    goodness: F  # > 0: balanced output's weight basis
    delay: F
    network: F
    processing: F
    cost: F
    load: F
    jitter: F
    loss: F
    bandwidth: F
    worsened: F  # (1 or S, 1, I): when each instance's cluster last got worse

    def broken(self, r: int, j: int) -> str:
        """Which SLA threshold the pair breaks first ('' none): for the published reason."""
        sla = self.plan.sla
        limits = (("unreachable", not np.isfinite(self.delay[r, j])),
                  ("delay", sla.maxDelayMs is not None and self.delay[r, j] > sla.maxDelayMs),
                  ("jitter", sla.maxJitterMs is not None and self.jitter[r, j] > sla.maxJitterMs),
                  ("loss", sla.maxLossPercent is not None and self.loss[r, j] > sla.maxLossPercent),
                  ("bandwidth", sla.minBandwidthMbps is not None and self.bandwidth[r, j] < sla.minBandwidthMbps),
                  ("cost", sla.maxCostPerHour is not None and self.cost[r, j] > sla.maxCostPerHour),
                  ("load", sla.maxLoadPercent is not None and self.load[r, j] * 100 > sla.maxLoadPercent))
        return next((name for name, hit in limits if hit), "")


@dataclass(frozen=True, slots=True)
class Chunk:
    """Services evaluated together: the same arrays as `ServiceEval`, stacked and padded to
    (services, most client sites, most instances) — or (1, C, I) where every service of the chunk
    shares it; padding is never a candidate."""

    plans: list[ServicePlan]
    positions: list[int]  # index of each plan in what `evaluate_chunks` was given
    metric: F
    valid: B
    valid_enter: B
    key: F
    goodness: F
    delay: F
    network: F
    processing: F
    cost: F
    load: F
    jitter: F
    loss: F
    bandwidth: F
    worsened: F

    @classmethod
    def of(cls, ev: ServiceEval) -> Chunk:
        """One service as a chunk of one."""
        return cls([ev.plan], [0], ev.metric[None], ev.valid[None], ev.valid_enter[None], ev.key[None],
                   ev.goodness[None], ev.delay[None], ev.network[None], ev.processing[None], ev.cost[None],
                   ev.load[None], ev.jitter[None], ev.loss[None], ev.bandwidth[None], ev.worsened[None])

    def service(self, s: int) -> ServiceEval:
        p = self.plans[s]
        shape = self.metric.shape
        cut = (s, slice(0, len(p.clients)), slice(0, len(p.instances)))

        def part(a: F) -> F:
            return np.broadcast_to(a, shape)[cut]

        return ServiceEval(p, self.metric[cut], self.valid[cut], self.valid_enter[cut], self.key[cut],
                           part(self.goodness), part(self.delay), part(self.network), part(self.processing),
                           part(self.cost), part(self.load), part(self.jitter), part(self.loss), part(self.bandwidth),
                           part(self.worsened))


def _limit(v: float | None, default: float) -> float:
    return default if v is None else float(v)


def evaluate(fleet: Fleet, plans: Sequence[ServicePlan], hysteresis: float = 0.1) -> list[ServiceEval]:
    """Evaluate every plan against ``fleet``; results in the order of ``plans``."""
    out: list[ServiceEval | None] = [None] * len(plans)
    for chunk in evaluate_chunks(fleet, plans, hysteresis):
        for s, n in enumerate(chunk.positions):
            out[n] = chunk.service(s)
    return [ev for ev in out if ev is not None]


def evaluate_chunks(fleet: Fleet, plans: Sequence[ServicePlan], hysteresis: float = 0.1) -> list[Chunk]:
    """Evaluate every plan against ``fleet``, in chunks of services sharing an evaluation function,
    strategy and output form; services with the same client sites and instances are kept together, so a
    chunk of them reads the fleet's arrays once instead of gathering them per service."""
    c_index = {c: i for i, c in enumerate(fleet.clients)}
    i_index = {c: i for i, c in enumerate(fleet.clusters)}
    groups: dict[tuple[str, tuple[str, str, str], str, str], list[int]] = defaultdict(list)
    for n, p in enumerate(plans):
        norm = p.normalisation
        groups[(p.evaluation, (norm.communication, norm.computing, norm.service), p.output, p.strategy)].append(n)
    memo: dict[tuple[str, ...], tuple[I64, B]] = {}
    out: list[Chunk] = []
    for (name, norm_key, _output, _strategy), members in groups.items():
        fn = EVALUATIONS[name]
        normalisation = dict(zip(("communication", "computing", "service"), norm_key, strict=True))
        members.sort(key=lambda n: (plans[n].clients, plans[n].instances))
        for start in range(0, len(members), _CHUNK):
            part = members[start:start + _CHUNK]
            out.append(_evaluate_chunk(fleet, [plans[n] for n in part], part, c_index, i_index, memo, fn,
                                       normalisation, hysteresis))
    return out


def _row(names: tuple[str, ...], index: dict[str, int], memo: dict[tuple[str, ...], tuple[I64, B]]) -> tuple[I64, B]:
    hit = memo.get(names)
    if hit is None:
        idx = np.array([index.get(n, 0) for n in names], dtype=np.int64)
        mask = np.array([n in index for n in names], dtype=bool)
        hit = memo[names] = (idx, mask)
    return hit


def _index(names: Sequence[tuple[str, ...]], index: dict[str, int], width: int,
           memo: dict[tuple[str, ...], tuple[I64, B]]) -> tuple[I64, B]:
    """Padded index matrix (services x width) into the fleet's axis, and which entries are real
    (a name the fleet does not know is no candidate)."""
    idx = np.zeros((len(names), width), dtype=np.int64)
    mask = np.zeros((len(names), width), dtype=bool)
    for s, row in enumerate(names):
        i, m = _row(row, index, memo)
        idx[s, :len(row)] = i
        mask[s, :len(row)] = m
    return idx, mask


def _evaluate_chunk(fleet: Fleet, plans: list[ServicePlan], positions: list[int], c_index: dict[str, int],
                    i_index: dict[str, int], memo: dict[tuple[str, ...], tuple[I64, B]], fn: object,
                    normalisation: dict[str, str], hysteresis: float) -> Chunk:
    assert callable(fn)
    uniform = all(p.clients == plans[0].clients and p.instances == plans[0].instances for p in plans)
    if uniform:  # one (C, I) view shared by the chunk: no per-service gather
        ci, cmask = (a[None] for a in _row(plans[0].clients, c_index, memo))
        ii, imask = (a[None] for a in _row(plans[0].instances, i_index, memo))
    else:
        ci, cmask = _index([p.clients for p in plans], c_index, max(len(p.clients) for p in plans), memo)
        ii, imask = _index([p.instances for p in plans], i_index, max(len(p.instances) for p in plans), memo)
    n_c, n_i = ci.shape[1], ii.shape[1]
    if fleet.delay.size and n_c and n_i:
        gather = (ci[:, :, None], ii[:, None, :])
        network, jitter = fleet.delay[gather], fleet.jitter[gather]
        loss, bandwidth = fleet.loss[gather], fleet.bandwidth[gather]
    else:
        base = (ci.shape[0], n_c, n_i)
        network, jitter, loss, bandwidth = np.full(base, np.inf), np.zeros(base), np.zeros(base), np.full(base, np.inf)
    candidate = cmask[:, :, None] & imask[:, None, :]
    network = np.where(candidate, network, np.inf)
    util_raw = fleet.utilisation[ii] if fleet.utilisation.size else np.full(ii.shape, np.nan)
    util = np.nan_to_num(util_raw, nan=0.0)[:, None, :]
    service_time = np.array([p.service_time_ms for p in plans])[:, None, None]
    with np.errstate(divide="ignore", invalid="ignore"):
        processing = np.where(util >= _SATURATED, np.inf, service_time / np.maximum(1.0 - util, 1e-9))
    delay = network + processing  # (S, C, I)
    cores = np.array([p.cores for p in plans])[:, None, None]
    core_cost = fleet.core_cost[ii] if fleet.core_cost.size else np.zeros(ii.shape)
    cost = core_cost[:, None, :] * cores  # (S, 1, I)

    def limits(attr: str, default: float) -> F:
        return np.array([_limit(getattr(p.sla, attr), default) for p in plans])[:, None, None]

    max_delay, max_jitter = limits("maxDelayMs", np.inf), limits("maxJitterMs", np.inf)
    max_loss, min_bw = limits("maxLossPercent", np.inf), limits("minBandwidthMbps", 0.0)
    max_cost = limits("maxCostPerHour", np.inf)
    max_load = limits("maxLoadPercent", np.inf) / 100.0
    m = 1.0 - hysteresis

    def within(scale: float) -> B:
        """Every threshold holds, the maxima scaled by ``scale`` (the minimum divided by it); the
        terms without a client-site axis are combined before they are broadcast."""
        per_instance = (cost <= max_cost * scale) & (util <= max_load * scale)  # (S, 1, I)
        ok = (delay <= max_delay * scale) & np.isfinite(delay)  # no delay known: no route, with or without an SLA
        if np.isfinite(max_jitter).any():
            ok &= jitter <= max_jitter * scale
        if np.isfinite(max_loss).any():
            ok &= loss <= max_loss * scale
        if (min_bw > 0).any():
            ok &= bandwidth >= min_bw / scale
        return ok & per_instance & candidate

    valid = within(1.0)  # delay is +inf where unreachable: False there
    valid_enter = valid & within(m)
    sensitive = {a: np.array([a in p.sensitive for p in plans])[:, None, None]
                 for a in ("delay", "jitter", "loss", "bandwidth", "cost", "load")}
    inputs = Inputs(delay=delay, network=network, processing=processing, jitter=jitter, loss=loss,
                    bandwidth=bandwidth, cost=cost, load=util, sensitive=sensitive, normalisation=normalisation)
    metric = np.asarray(fn(inputs), dtype=np.float64)
    if metric is not delay:
        metric = np.where(np.isfinite(delay), metric, np.inf)
    metric = np.broadcast_to(metric, delay.shape)
    codes = [STRATEGIES.index(p.strategy) for p in plans]
    if len(set(codes)) == 1:
        key = (metric, np.broadcast_to(cost, delay.shape), np.broadcast_to(util, delay.shape))[codes[0]]
    else:
        code = np.array(codes)[:, None, None]
        key = np.where(code == 0, metric, np.where(code == 1, cost, util))
    if plans[0].output == "balanced":  # chunks are homogeneous in output
        code = np.array(codes)[:, None, None]
        with np.errstate(divide="ignore"):
            goodness = np.where(code == 0, 1.0 / np.maximum(metric, 1e-6),
                                np.where(code == 1, 1.0 / np.maximum(cost, 1e-6), np.maximum(1.0 - util, 1e-6)))
    else:
        goodness = np.ones((1, 1, 1))
    worsened = (fleet.worsened_at[ii] if fleet.worsened_at.size else np.full(ii.shape, -np.inf))[:, None, :]
    return Chunk(plans, positions, metric, valid, valid_enter, key, goodness, delay, network, processing, cost,
                 util, jitter, loss, bandwidth, worsened)
