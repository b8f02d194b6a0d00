"""The federated autoscaler's arithmetic: pure functions over numbers, no I/O (SPEC F5, F6).

Below both of its users: the central autoscaler (`drods.autoscaling.controller`) and the pull-mode
agent deciding alone while cut off from the control plane (`drods.members.autonomy`).

* **Utilisation of a workload** — per cluster, the cluster's utilisation from its status document,
  weighted by the workload's replicas there (a workload with 9 of its 10 replicas in a hot cluster
  sees mostly that cluster). It is a proxy: member clusters report whole-cluster usage, not per-pod.
* **Recommendation** — Kubernetes' HPA rule per metric, ``ceil(current × value / target)``, left at
  ``current`` inside a ±10 % tolerance; the largest over the metrics wins.
* **Behaviour** — autoscaling/v2's: the recommendation is stabilised over its window (scale up: the
  lowest recommendation of the window; scale down: the highest), then limited by the rate policies
  (``Pods``/``Percent`` per ``periodSeconds``, measured from the replicas at the period's start,
  ``selectPolicy`` Max/Min/Disabled), then clamped to the bounds. Defaults are Kubernetes':
  scale up at once by max(100 %, 4 pods) per 15 s; scale down after 300 s, by up to 100 % per 15 s.

The window state (recommendations and scale events, each with its time) is carried by the caller
— the controller keeps it in the autoscaler's status, so a new leader resumes with it.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np

from drods.model.autoscaling import Behavior, ScalingPolicy, ScalingRules

TOLERANCE = 0.1
_UP_DEFAULT = ScalingRules(stabilizationWindowSeconds=0, selectPolicy="Max",
                           policies=[ScalingPolicy(type="Percent", value=100, periodSeconds=15),
                                     ScalingPolicy(type="Pods", value=4, periodSeconds=15)])
_DOWN_DEFAULT = ScalingRules(stabilizationWindowSeconds=300, selectPolicy="Max",
                             policies=[ScalingPolicy(type="Percent", value=100, periodSeconds=15)])


def cluster_utilisation(view: Mapping[str, object]) -> dict[str, float]:
    """A cluster's status view → ``{"cpu": %, "memory": %}``: use relative to what pods request
    (Kubernetes' meaning of utilisation, which falls as replicas are added) when the cluster reports
    its allocation, else relative to capacity. The use is ``measured`` when present (metrics.k8s.io);
    a view from Kubernetes without it has no measurement (its ``used`` is the requests standing in
    for one, which would read as 100 %) and gives nothing; other sources' ``used`` is measured."""
    out: dict[str, float] = {}
    from_requests = view.get("source") == "kubernetes"
    for res in ("cpu", "memory"):
        part = view.get(res)
        if not isinstance(part, Mapping):
            continue
        used = part.get("measured")
        if used is None and not from_requests:
            used = part.get("used")
        base = part.get("allocated")
        if not isinstance(base, (int, float)) or base <= 0:
            base = part.get("capacity")
        if isinstance(base, (int, float)) and isinstance(used, (int, float)) and base > 0:
            out[res] = 100.0 * float(used) / float(base)
    return out


def weighted_utilisation(placement: Mapping[str, int], utilisation: Mapping[str, float]) -> float | None:
    """Replica-weighted mean of the clusters' utilisation (percent); clusters without a measurement
    are left out, None when no replica sits in a measured cluster."""
    names = [c for c, n in placement.items() if n > 0 and c in utilisation]
    if not names:
        return None
    w = np.fromiter((placement[c] for c in names), dtype=np.float64, count=len(names))
    u = np.fromiter((utilisation[c] for c in names), dtype=np.float64, count=len(names))
    return float(w @ u / w.sum())


def recommend(current: int, observations: Sequence[tuple[float, float]]) -> int:
    """The HPA recommendation over ``(value, target)`` pairs: the largest per-metric proposal."""
    if current <= 0:
        return max(current, 1) if observations else current
    out: int | None = None
    for value, target in observations:
        ratio = value / target
        proposal = current if abs(ratio - 1.0) <= TOLERANCE else math.ceil(current * ratio - 1e-9)
        out = proposal if out is None else max(out, proposal)
    return current if out is None else out


@dataclass
class Window:
    """What the behaviour needs to remember: ``(time, replicas)`` recommendations and
    ``(time, change)`` scale events."""

    recommendations: list[tuple[float, int]] = field(default_factory=list)
    events: list[tuple[float, int]] = field(default_factory=list)


@dataclass(frozen=True, slots=True)
class Outcome:
    desired: int
    stabilised: int
    reason: str  # why desired differs from the recommendation ("" when it does not)


def _rules(behavior: Behavior | None) -> tuple[ScalingRules, ScalingRules]:
    up = (behavior.scaleUp if behavior else None) or _UP_DEFAULT
    down = (behavior.scaleDown if behavior else None) or _DOWN_DEFAULT
    up_window = up.stabilizationWindowSeconds if up.stabilizationWindowSeconds is not None else 0
    down_window = down.stabilizationWindowSeconds if down.stabilizationWindowSeconds is not None else 300
    up = up.model_copy(update={"stabilizationWindowSeconds": up_window,
                               "policies": up.policies if up.policies is not None else _UP_DEFAULT.policies})
    down = down.model_copy(update={"stabilizationWindowSeconds": down_window,
                                   "policies": down.policies if down.policies is not None else _DOWN_DEFAULT.policies})
    return up, down


def _limit(current: int, events: Sequence[tuple[float, int]], rules: ScalingRules, now: float, up: bool) -> int:
    """The furthest the replicas may go this period under ``rules`` (Kubernetes' rate limit)."""
    if rules.selectPolicy == "Disabled":
        return current
    proposals: list[int] = []
    for p in rules.policies or []:
        moved = sum(c for t, c in events if now - t < p.periodSeconds and (c > 0) == up)
        start = current - moved  # replicas at the start of the period
        if up:
            proposals.append(start + p.value if p.type == "Pods" else math.ceil(start * (1 + p.value / 100)))
        else:
            proposals.append(start - p.value if p.type == "Pods" else math.ceil(start * (1 - p.value / 100)))
    if not proposals:
        return current
    # "Max" picks the policy allowing the largest change.
    pick = max if (rules.selectPolicy == "Max") == up else min
    return pick(proposals)


def behave(current: int, recommendation: int, window: Window, behavior: Behavior | None, now: float,
           lo: int, hi: int) -> tuple[Outcome, Window]:
    """Stabilise ``recommendation`` and limit its rate; returns the outcome and the next window."""
    up_rules, down_rules = _rules(behavior)
    up_w = float(up_rules.stabilizationWindowSeconds or 0)
    down_w = float(down_rules.stabilizationWindowSeconds or 0)
    recs = [*window.recommendations, (now, recommendation)]
    up_rec = min([r for t, r in recs if now - t <= up_w] or [recommendation])
    down_rec = max([r for t, r in recs if now - t <= down_w] or [recommendation])
    stabilised = current
    if stabilised < up_rec:
        stabilised = up_rec
    if stabilised > down_rec:
        stabilised = down_rec
    desired, reason = stabilised, ""
    if stabilised != recommendation:
        reason = "stabilisation window"
    if desired > current:
        allowed = min(max(_limit(current, window.events, up_rules, now, True), current), hi)
        if desired > allowed:
            desired, reason = allowed, "scale-up rate limit" if allowed < hi else "maxReplicas"
    elif desired < current:
        allowed = max(min(_limit(current, window.events, down_rules, now, False), current), lo)
        if desired < allowed:
            desired, reason = allowed, "scale-down rate limit" if allowed > lo else "minReplicas"
    clamped = min(max(desired, lo), hi)
    if clamped != desired:  # by the side it was clamped from (min and max may be equal)
        desired, reason = clamped, "maxReplicas" if desired > hi else "minReplicas"
    keep = max(up_w, down_w)
    longest = max((p.periodSeconds for r in (up_rules, down_rules) for p in r.policies or []), default=0)
    events = [(t, c) for t, c in window.events if now - t < longest]
    if desired != current:
        events.append((now, desired - current))
    return (Outcome(desired, stabilised, reason),
            Window([(t, r) for t, r in recs if now - t <= keep], events))
