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
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from drods.model.steering import NormalisationChoice, Output, Sla, Strategy
from drods.steering.evaluation import EVALUATIONS, B, Inputs
from drods.steering.metrics import F

I64 = NDArray[np.int64]
I8 = NDArray[np.int8]

STRATEGIES: tuple[Strategy, ...] = ("experienceFirst", "costFirst", "resourceFirst")
#: Codes of ``ServiceEval.broken``: which SLA threshold broke first (0 = none).
BROKEN = ("", "unreachable", "delay", "jitter", "loss", "bandwidth", "cost", "load")
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


@dataclass(frozen=True, slots=True)
class ServiceEval:
    """One service's arrays, (its client sites) x (its instances)."""

    plan: ServicePlan
    metric: F  # the evaluation function's value; +inf unreachable
    valid: B  # every SLA threshold holds
    valid_enter: B  # holds with the hysteresis margin (what a new choice must meet)
    key: F  # the strategy's ranking key, smaller is better
    goodness: F  # > 0: balanced output's weight basis
    broken: I8  # index into BROKEN of the first threshold broken
    delay: F
    network: F
    processing: F
    cost: F
    load: F


@dataclass(frozen=True, slots=True)
class Chunk:
    """Services evaluated together: the same arrays as `ServiceEval`, stacked and padded to
    (services, most client sites, most instances); padding is never a candidate."""

    plans: list[ServicePlan]
    positions: list[int]  # index of each plan in what `evaluate_chunks` was given
    metric: F
    valid: B
    valid_enter: B
    key: F
    goodness: F
    broken: I8
    delay: F
    network: F
    processing: F
    cost: F
    load: F

    def service(self, s: int) -> ServiceEval:
        p = self.plans[s]
        cut = (s, slice(0, len(p.clients)), slice(0, len(p.instances)))
        return ServiceEval(p, self.metric[cut], self.valid[cut], self.valid_enter[cut], self.key[cut],
                           self.goodness[cut], self.broken[cut], self.delay[cut], self.network[cut],
                           self.processing[cut], self.cost[cut], self.load[cut])


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
    """Evaluate every plan against ``fleet``, in chunks of services sharing an evaluation function."""
    c_index = {c: i for i, c in enumerate(fleet.clients)}
    i_index = {c: i for i, c in enumerate(fleet.clusters)}
    groups: dict[tuple[str, tuple[str, str, str]], list[int]] = defaultdict(list)
    for n, p in enumerate(plans):
        norm = p.normalisation
        groups[(p.evaluation, (norm.communication, norm.computing, norm.service))].append(n)
    out: list[Chunk] = []
    for (name, norm_key), members in groups.items():
        fn = EVALUATIONS[name]
        normalisation = dict(zip(("communication", "computing", "service"), norm_key, strict=True))
        for start in range(0, len(members), _CHUNK):
            part = members[start:start + _CHUNK]
            out.append(_evaluate_chunk(fleet, [plans[n] for n in part], part, c_index, i_index, fn, normalisation,
                                       hysteresis))
    return out


def _index(names: Sequence[tuple[str, ...]], index: dict[str, int], width: int) -> tuple[I64, B]:
    """Padded index matrix (services x width) into the fleet's axis, and which entries are real
    (a name the fleet does not know is no candidate)."""
    idx = np.zeros((len(names), max(width, 1)), dtype=np.int64)
    mask = np.zeros((len(names), max(width, 1)), dtype=bool)
    for s, row in enumerate(names):
        for j, name in enumerate(row):
            k = index.get(name)
            if k is not None:
                idx[s, j] = k
                mask[s, j] = True
    return idx, mask


def _evaluate_chunk(fleet: Fleet, plans: list[ServicePlan], positions: list[int], c_index: dict[str, int],
                    i_index: dict[str, int], fn: object, normalisation: dict[str, str], hysteresis: float) -> Chunk:
    assert callable(fn)
    n_c = max(len(p.clients) for p in plans)
    n_i = max(len(p.instances) for p in plans)
    ci, cmask = _index([p.clients for p in plans], c_index, n_c)
    ii, imask = _index([p.instances for p in plans], i_index, n_i)
    if fleet.delay.size:
        gather = (ci[:, :, None], ii[:, None, :])
        network = fleet.delay[gather]
        jitter = fleet.jitter[gather]
        loss = fleet.loss[gather]
        bandwidth = fleet.bandwidth[gather]
    else:
        shape = (len(plans), ci.shape[1], ii.shape[1])
        network = np.full(shape, np.inf)
        jitter, loss, bandwidth = np.zeros(shape), np.zeros(shape), np.full(shape, np.inf)
    candidate = cmask[:, :, None] & imask[:, None, :]
    network = np.where(candidate, network, np.inf)
    util_raw = fleet.utilisation[ii] if fleet.utilisation.size else np.full(ii.shape, np.nan)
    util = np.nan_to_num(util_raw, nan=0.0)[:, None, :]
    service_time = np.array([p.service_time_ms for p in plans])[:, None, None]
    with np.errstate(divide="ignore", invalid="ignore"):
        processing = np.where(util >= _SATURATED, np.inf, service_time / np.maximum(1.0 - util, 1e-9))
    delay = network + processing
    cores = np.array([p.cores for p in plans])[:, None, None]
    core_cost = fleet.core_cost[ii] if fleet.core_cost.size else np.zeros(ii.shape)
    cost = core_cost[:, None, :] * cores

    def limits(attr: str, default: float) -> F:
        return np.array([_limit(getattr(p.sla, attr), default) for p in plans])[:, None, None]

    max_delay, max_jitter = limits("maxDelayMs", np.inf), limits("maxJitterMs", np.inf)
    max_loss, min_bw = limits("maxLossPercent", np.inf), limits("minBandwidthMbps", 0.0)
    max_cost = limits("maxCostPerHour", np.inf)
    max_load = limits("maxLoadPercent", np.inf) / 100.0
    checks = [~np.isfinite(delay), delay > max_delay, jitter > max_jitter, loss > max_loss,
              bandwidth < min_bw, np.broadcast_to(cost > max_cost, delay.shape),
              np.broadcast_to(util > max_load, delay.shape)]
    broken = np.select(checks, list(range(1, len(BROKEN))), 0).astype(np.int8)
    valid = (broken == 0) & candidate
    m = 1.0 - hysteresis
    valid_enter = valid & (delay <= max_delay * m) & (jitter <= max_jitter * m) & (loss <= max_loss * m) \
        & (bandwidth >= min_bw / m) & (cost <= max_cost * m) & (util <= max_load * m)
    sensitive = {a: np.array([a in p.sensitive for p in plans])[:, None, None]
                 for a in ("delay", "jitter", "loss", "bandwidth", "cost", "load")}
    inputs = Inputs(delay=delay, network=network, processing=processing, jitter=jitter, loss=loss,
                    bandwidth=bandwidth, cost=cost, load=util, sensitive=sensitive, normalisation=normalisation)
    metric = np.asarray(fn(inputs), dtype=np.float64)
    metric = np.where(candidate, np.where(np.isfinite(delay), metric, np.inf), np.inf)
    code = np.array([STRATEGIES.index(p.strategy) for p in plans])[:, None, None]
    cost_b = np.broadcast_to(cost, delay.shape)
    load_b = np.broadcast_to(util, delay.shape)
    key = np.where(code == 0, metric, np.where(code == 1, cost_b, load_b))
    with np.errstate(divide="ignore"):
        goodness = np.where(code == 0, 1.0 / np.maximum(metric, 1e-6),
                            np.where(code == 1, 1.0 / np.maximum(cost_b, 1e-6), np.maximum(1.0 - load_b, 1e-6)))
    return Chunk(plans, positions, metric, valid, valid_enter, key, goodness, broken, delay, network,
                 np.broadcast_to(processing, delay.shape), cost_b, load_b)
