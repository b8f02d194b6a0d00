"""Evaluation functions (SPEC C6, the draft's ``Function1()``, ``Function2()``): small pure functions
registered by name, each turning the attributes of every (service, client site, instance) into ONE
metric value, smaller is better. SLA checking and ``MAX`` are the engine's, not theirs.

A registration names one in ``spec.evaluation``; a third party adds its own with `register`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from drods.steering.metrics import ATTRIBUTES, F, l1_attribute, l2

B = NDArray[np.bool_]


@dataclass(frozen=True, slots=True)
class Inputs:
    """L0 values broadcastable to (services, client sites, instances); NaN = not a candidate,
    +inf delay = unreachable."""

    delay: F  # end-to-end: network legs + processing, ms
    network: F  # the network legs alone, ms
    processing: F  # estimated processing delay, ms
    jitter: F  # ms (0 when not measured)
    loss: F  # percent (0 when not measured)
    bandwidth: F  # Mbit/s (+inf when not measured)
    cost: F  # per hour
    load: F  # CPU utilisation 0..1 of the instance's cluster
    sensitive: dict[str, B]  # attribute → (services, 1, 1) mask: which services named it
    normalisation: dict[str, str]  # category → method


Evaluation = Callable[[Inputs], F]
EVALUATIONS: dict[str, Evaluation] = {}


def unknown_evaluation(name: str) -> str:
    """Why ``spec.evaluation: name`` is refused (admission) or Invalid (the controller)."""
    return f"unknown evaluation function {name!r}; known: {', '.join(sorted(EVALUATIONS))}"


def register(name: str) -> Callable[[Evaluation], Evaluation]:
    def add(fn: Evaluation) -> Evaluation:
        EVALUATIONS[name] = fn
        return fn
    return add


@register("e2eDelay")
def e2e_delay(x: Inputs) -> F:
    """The end-to-end delay in ms (network legs + processing)."""
    return x.delay


def _value(x: Inputs, attribute: str) -> F:
    return {"delay": x.delay, "jitter": x.jitter, "loss": x.loss, "bandwidth": x.bandwidth, "cost": x.cost,
            "load": x.load}[attribute]


@register("composite")
def composite(x: Inputs) -> F:
    """The L2 score (0..100) over the service's sensitive attributes: each normalised to an L1
    contribution by its category's method, averaged per category, categories averaged."""
    shape = np.broadcast_shapes(x.delay.shape, x.cost.shape, x.load.shape)
    per_category: dict[str, list[F]] = {}
    for name, spec in ATTRIBUTES.items():
        mask = x.sensitive.get(name)
        if mask is None or not mask.any():
            continue
        values = np.broadcast_to(_value(x, name), shape).astype(np.float64)
        score = l1_attribute(values, name, x.normalisation.get(spec.category, "sigmoid"))
        per_category.setdefault(spec.category, []).append(np.where(mask, score, np.nan))
    if not per_category:
        return np.broadcast_to(x.delay, shape).astype(np.float64)
    with np.errstate(invalid="ignore"):
        l1 = [np.nanmean(np.stack(scores), axis=0) for scores in per_category.values()]
    out = l2(l1)
    return np.where(np.isinf(np.broadcast_to(x.delay, shape)), np.inf, out)


@register("weightedDelay")
def weighted_delay(x: Inputs) -> F:
    """Delay plus penalties in ms-equivalents: jitter x 2, 10 ms per loss percent, and 50 ms per unit
    of load above 0.5 — for services that feel jitter and loss more than raw distance."""
    load_penalty = np.maximum(x.load - 0.5, 0.0) * 50.0
    return np.asarray(x.delay + 2.0 * x.jitter + 10.0 * x.loss + load_penalty, dtype=np.float64)
