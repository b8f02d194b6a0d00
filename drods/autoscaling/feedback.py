"""Application feedback (SPEC H3): a damped PI loop from how the application does to its replicas.

The application reports latency p99, throughput and error rate (``PUT /api/v1/feedback``); its
FederatedHPA says what it must achieve (``spec.feedback``). The error is the worst normalised miss,
positive when the application needs more capacity::

    e = max(latency / latencyP99Ms - 1,  1 - throughput / minThroughput,  errorRate / maxErrorRate - 1)

* ``-deadband <= e <= tolerance`` — the target is met (within the measurement noise ``tolerance``)
  with little slack: **no move** (and the integral decays), so a met target stops the loop;
* otherwise, out: ``u = kp·e + ki·Σe`` (the sum clamped, and not accumulated while the step is
  saturated: no wind-up); in: ``u = kp_down·e`` (proportional only); the step is
  ``round(current · u)``, at least one replica in the direction of ``e`` and at most
  ``max(max_step, max_step_fraction · current)`` replicas;
* **cool-down**: no step within ``cooldown_s`` of the previous one, and a report measured before
  the previous step (it describes the old replica count) is not used at all.

Scaling in is deliberately slower than out (``kp_down``) and waits for ``confirm_down`` consecutive
reports with slack (one noisy dip is not slack): an over-provisioned application is a cost, an
under-provisioned one an outage. State (integral, time of the last step) is the caller's — the
controller keeps it in the autoscaler's status.
"""

from __future__ import annotations

from dataclasses import dataclass

from drods.model.autoscaling import FeedbackTargets


@dataclass(frozen=True, slots=True)
class FeedbackSettings:
    kp: float = 0.6
    kp_down: float = 0.3
    ki: float = 0.1
    integral_limit: float = 2.0
    deadband: float = 0.25  # slack below the target that is left alone
    tolerance: float = 0.05  # a miss this small is noise, not a reason to move
    max_step: int = 4  # replicas per step at least this far …
    max_step_fraction: float = 0.25  # … or this fraction of the current count, whichever is more
    cooldown_s: float = 30.0
    max_age_s: float = 120.0  # older reports are ignored
    confirm_down: int = 2  # consecutive reports with slack before a step in (a noise dip is not slack)


@dataclass(frozen=True, slots=True)
class Observation:
    latencyP99Ms: float | None
    throughput: float | None
    errorRate: float | None
    at: float


@dataclass(frozen=True, slots=True)
class LoopState:
    integral: float = 0.0
    last_step_at: float | None = None
    slack_reports: int = 0  # consecutive reports below the dead band


@dataclass(frozen=True, slots=True)
class Step:
    replicas: int  # the loop's recommendation
    error: float | None  # None: no usable report
    state: LoopState
    reason: str


def error(targets: FeedbackTargets, obs: Observation) -> float | None:
    """The worst normalised miss (positive: more capacity needed); None when nothing comparable."""
    parts: list[float] = []
    if targets.latencyP99Ms is not None and obs.latencyP99Ms is not None:
        parts.append(obs.latencyP99Ms / targets.latencyP99Ms - 1.0)
    if targets.minThroughput is not None and obs.throughput is not None:
        parts.append(1.0 - obs.throughput / targets.minThroughput)
    if targets.maxErrorRate is not None and obs.errorRate is not None:
        parts.append(obs.errorRate / targets.maxErrorRate - 1.0)
    return max(parts) if parts else None


def step(targets: FeedbackTargets, obs: Observation | None, current: int, state: LoopState, now: float,
         settings: FeedbackSettings, lo: int, hi: int) -> Step:
    """One turn of the loop: the replicas it recommends and its next state."""
    if obs is None or now - obs.at > settings.max_age_s:
        return Step(current, None, state, "no recent feedback")
    if state.last_step_at is not None and obs.at <= state.last_step_at:
        return Step(current, None, state, "feedback predates the last step")
    e = error(targets, obs)
    if e is None:
        return Step(current, None, state, "feedback has no metric the targets name")
    if state.last_step_at is not None and now - state.last_step_at < settings.cooldown_s:
        return Step(current, e, state, "cool-down")
    if -settings.deadband <= e <= settings.tolerance:
        return Step(current, e, LoopState(state.integral * 0.5, state.last_step_at), "target met")
    if e < 0 and state.slack_reports + 1 < settings.confirm_down:
        return Step(current, e, LoopState(state.integral, state.last_step_at, state.slack_reports + 1),
                    "slack, waiting for confirmation")
    if e > 0:
        integral = min(max(state.integral + e, -settings.integral_limit), settings.integral_limit)
        u = settings.kp * e + settings.ki * integral
    else:  # in: proportional only, the integral decays — an undershoot is an outage
        integral = state.integral * 0.5
        u = settings.kp_down * e
    raw = round(current * u)
    bound = max(settings.max_step, int(current * settings.max_step_fraction))
    if abs(raw) > bound:  # saturated: the integral would only wind up (conditional integration)
        integral = state.integral
    delta = min(max(raw, 1), bound) if e > 0 else max(min(raw, -1), -bound)
    target = min(max(current + delta, lo), hi)
    if target == current:
        return Step(current, e, LoopState(integral, state.last_step_at), "at a bound")
    return Step(target, e, LoopState(integral, now), "above target" if e > 0 else "slack below target")
