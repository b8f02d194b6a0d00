"""Automatic operations policy (SPEC A4 "triggers automated operations", F5, F6, S11).

Three triggers, one guard rail:

* **evacuate** — a cluster stayed above its water-level limit for ``sustainedSeconds`` (a
  ``/events/sustained/<cluster>/`` event): move a share of its replicas elsewhere, gracefully;
* **preallocate** — the forecaster predicts a cluster's water level reaches the threshold within
  ``preallocateHorizonMinutes`` while it is below it now: place capacity elsewhere before the peak;
* **restore** — a cluster replicas were moved away from has been calm (below its limit minus the
  hysteresis, no peak forecast) for ``restoreAfterSeconds``: offer it those replicas back.
* **failback** — a cluster failover (S11) moved replicas off is Ready again and has stayed Ready and
  calm for ``failbackAfterSeconds`` (the damping window): re-place the bindings that failed over from
  it, so the scheduler moves them back where the policy (users, latency, water level) wants them,
  gracefully and within the fleet's ``maxMovesPerMinute`` budget; recorded as a ``Rebalance``.
* **peakshave** — a cluster stood above the fleet's achievable level by more than ``peakshaveMargin``
  for ``peakshaveAfterSeconds``: move the fewest replicas to clusters with room (`drods.scheduler.peakshave`),
  paced like fail-back by the move budget; recorded as a ``Rebalance`` with the levels before and after.
  The same pass returns replicas to clusters near their users once those have room again
  (``peakshaveReturn``, ``peakshaveReturnMinGainMs``): a ``peakshave`` on the receiving cluster.

Before acting, `AutoOps.decide` checks the policy: enabled, per-cluster cooldown, fleet-wide
actions-per-hour rate limit, and (to move load away) that at least ``minAvailableClusters`` other
active clusters are below their limit (somewhere to move to). The cooldown is shared by the three
actions, so a cluster's replicas never come back sooner than ``cooldownSeconds`` after they left.
Every decision — executed, skipped and why, or waiting for a hook — is recorded in
``/history/operations/`` with its reason (`drods.monitor.history`).

The action itself is a `RescheduleRequest` handed to the process's `Rescheduler`
(`drods.controllers.rescheduler`); without one, decisions are recorded with outcome ``"no-hook"``.
"""

from __future__ import annotations

import logging
from collections import deque
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from drods.model.reschedule import Action, RescheduleRequest, RescheduleResult
from drods.scheduler.rebalance import TrafficRebalancePolicy

log = logging.getLogger(__name__)

KIND: dict[str, str] = {"evacuate": "Evacuate", "preallocate": "PreAllocate", "restore": "Restore",
                        "failback": "Rebalance", "peakshave": "Rebalance"}


class AutoOpsPolicy(BaseModel):
    """Policy knobs: the ``autoops`` section of the configuration file (docs/configuration.md)."""

    model_config = ConfigDict(extra="forbid")

    enabled: bool = True
    evacuate: bool = True
    evacuateFraction: float = Field(default=0.25, gt=0, le=1)  # share of the cluster's replicas per action
    minAvailability: float = Field(default=1.0, ge=0, le=1)  # share of each workload kept available while moving
    cooldownSeconds: float = Field(default=900.0, ge=0)  # per cluster, between two actions
    maxActionsPerHour: int = Field(default=10, ge=0)  # fleet-wide
    minAvailableClusters: int = Field(default=1, ge=0)  # other active clusters below their limit
    preallocate: bool = True
    preallocateHorizonMinutes: float = Field(default=30.0, gt=0)
    preallocateThreshold: float | None = Field(default=None, gt=0, le=1)  # default: the cluster's limit
    preallocateFraction: float = Field(default=0.2, gt=0, le=1)  # headroom to create elsewhere
    restore: bool = True
    restoreAfterSeconds: float = Field(default=600.0, ge=0)  # calm this long before replicas may come back
    failback: bool = True
    # Ready and calm this long after a NotReady episode before failed-over replicas are moved back
    failbackAfterSeconds: float = Field(default=300.0, ge=0)
    # peak shaving (`drods.scheduler.peakshave`): a cluster above the fleet's achievable level by more
    # than the margin for the damping window gives the fewest replicas to clusters with room
    peakshave: bool = True
    peakshaveMargin: float = Field(default=0.01, ge=0, le=1)  # above the achievable level (water level)
    peakshaveAfterSeconds: float = Field(default=1800.0, ge=0)  # hot this long in a row first
    peakshaveMinGain: float = Field(default=0.03, ge=0, le=1)  # the cluster must drop at least this much
    # a cluster at least this far above the level its replicas could reach (None: none) is shaved after
    # the shorter window: that far above, its level is no passing noise, and the fleet's peak is there
    peakshaveSevereMargin: float | None = Field(default=0.05, gt=0, le=1)
    peakshaveSevereAfterSeconds: float = Field(default=300.0, ge=0)
    # a receiving cluster ends at least this far under its water-level limit: one at its limit is a
    # noise step from a breach (and from an evacuation undoing the move)
    peakshaveHeadroom: float = Field(default=0.03, ge=0, le=1)
    # replicas farther from their users than a cluster near them with room under the achievable level
    # go back (`drods.scheduler.peakshave.homeward`) when it is this much nearer
    peakshaveReturn: bool = True
    peakshaveReturnMinGainMs: float = Field(default=20.0, ge=0)
    # H1: move a placed workload nearer the traffic peers that arrived after it (`drods.scheduler.rebalance`)
    trafficRebalance: TrafficRebalancePolicy = Field(default_factory=TrafficRebalancePolicy)


@dataclass(frozen=True, slots=True)
class Decision:
    act: bool
    reason: str  # why not, when not acting


class AutoOps:
    """Pure policy state: cooldowns and the rate limit (time is passed in)."""

    def __init__(self, policy: AutoOpsPolicy) -> None:
        self.policy = policy
        self._last: dict[str, float] = {}
        self._recent: deque[float] = deque()

    def decide(self, action: Action, cluster: str, now: float, *, candidates: int) -> Decision:
        p = self.policy
        if not p.enabled or not getattr(p, action):
            return Decision(False, "disabled by policy")
        last = self._last.get(cluster)
        if last is not None and now - last < p.cooldownSeconds:
            return Decision(False, f"cooldown: last action {now - last:.0f}s ago (< {p.cooldownSeconds:.0f}s)")
        while self._recent and now - self._recent[0] >= 3600:
            self._recent.popleft()
        # fail-back and peak shaving are paced by the scheduler's move budget, not the hourly actions (nor do they
        # count in them or start a cooldown): a recovered region of 200 clusters would otherwise
        # wait 20 hours for its replicas
        if action not in ("failback", "peakshave") and len(self._recent) >= p.maxActionsPerHour:
            return Decision(False, f"rate limit: {len(self._recent)} actions in the last hour")
        if action not in ("restore", "failback") and candidates < p.minAvailableClusters:
            return Decision(False, f"only {candidates} other active cluster(s) below their limit "
                                   f"(need {p.minAvailableClusters})")
        return Decision(True, "")

    def ready_at(self, cluster: str) -> float:
        """When the cluster's cooldown ends (0 when it has none)."""
        last = self._last.get(cluster)
        return 0.0 if last is None else last + self.policy.cooldownSeconds

    def record(self, cluster: str, now: float) -> None:
        self._last[cluster] = now
        self._recent.append(now)

    def state(self) -> dict[str, Any]:
        """What the decisions depend on, for the next leader (A6): last action per cluster and the
        actions of the last hour."""
        return {"lastAction": dict(self._last), "recentActions": list(self._recent)}

    def restore(self, state: Mapping[str, Any] | None, now: float) -> None:
        """Take over ``state`` (from ``state()``), dropping what no longer counts at ``now``."""
        if not state:
            return
        horizon = max(self.policy.cooldownSeconds, 3600.0)
        last = state.get("lastAction") or {}
        self._last = {str(c): float(t) for c, t in last.items()
                      if isinstance(t, int | float) and now - float(t) < horizon}
        recent = [float(t) for t in state.get("recentActions") or [] if isinstance(t, int | float)]
        self._recent = deque(sorted(t for t in recent if now - t < 3600.0))

    def request(self, action: Action, cluster: str, reason: str, details: Mapping[str, Any]) -> RescheduleRequest:
        p = self.policy
        fraction = p.preallocateFraction if action == "preallocate" else p.evacuateFraction
        return RescheduleRequest(action, cluster, reason, fraction, p.minAvailability, details)


async def execute(ops: AutoOps, action: Action, cluster: str, reason: str, now: float, *, candidates: int,
                  details: Mapping[str, Any], hook: Callable[[RescheduleRequest], Awaitable[RescheduleResult]] | None,
                  record: Callable[..., Awaitable[Any]],
                  persist: Callable[[], Awaitable[None]] | None = None) -> tuple[str, RescheduleResult | None]:
    """Decide, call the scheduler's hook when allowed, record the outcome; returns it and the result.
    ``persist`` saves the policy state once an action is decided, before it is carried out, so a
    leader that dies mid-action leaves its cooldown behind (A6)."""
    decision = ops.decide(action, cluster, now, candidates=candidates)
    kind = KIND[action]
    result: RescheduleResult | None = None
    info: dict[str, Any] = {"action": action, "trigger": dict(details), "candidates": candidates}
    if not decision.act:
        outcome = "skipped"
        info["skipReason"] = decision.reason
    else:
        req = ops.request(action, cluster, reason, details)
        info["request"] = {"fraction": req.fraction, "minAvailability": req.min_availability}
        if action not in ("failback", "peakshave"):  # paced by the move budget; a blip must not start a cooldown
            ops.record(cluster, now)
        if persist is not None:
            await persist()
        if hook is None:
            outcome = "no-hook"
            info["note"] = "no rescheduler in this process"
        else:
            try:
                result = await hook(req)
            except Exception as e:  # noqa: BLE001 - a failing hook is recorded, not fatal
                log.exception("reschedule hook failed for %s", cluster)
                outcome = "failed"
                info["error"] = f"{type(e).__name__}: {e}"
            else:
                outcome = "executed" if result.accepted else "refused"
                info["result"] = {"accepted": result.accepted, "moved": result.moved, "message": result.message,
                                  "bindings": list(result.bindings),
                                  **({"offered": result.offered} if result.offered else {}),
                                  **({"considered": [{"binding": b, "replicas": n} for b, n in result.considered],
                                      "omitted": result.omitted} if result.considered else {})}
    info["outcome"] = outcome
    await record(kind, reason, cluster=cluster, ts=now, details=info)
    return outcome, result


class RestoreWatch:
    """Which clusters replicas were moved away from are due to be offered them back (pure, time
    passed in): a cluster must be calm for ``after`` seconds in a row (``restoreAfterSeconds``, or
    ``failbackAfterSeconds`` for fail-back) and out of its cooldown. The descheduler and the what-if
    simulator both decide with it."""

    def __init__(self, ops: AutoOps, after: float | None = None) -> None:
        self.ops = ops
        self.after = ops.policy.restoreAfterSeconds if after is None else after  # the damping window
        self.calm_since: dict[str, float | None] = {}  # cluster → since when calm (None: not calm)

    def moved(self, cluster: str) -> None:
        """Replicas left ``cluster``: watch it (again) from not calm."""
        self.calm_since[cluster] = None

    def forget(self, cluster: str) -> None:
        self.calm_since.pop(cluster, None)

    def due(self, cluster: str, calm: bool, now: float) -> float | None:
        """Record whether ``cluster`` is calm now; since when it has been, if a restore is due now."""
        since = self.calm_since.get(cluster)
        if not calm:
            self.calm_since[cluster] = None
            return None
        if since is None:
            self.calm_since[cluster] = now
            return None
        if now < max(since + self.after, self.ops.ready_at(cluster)):
            return None
        return since

    def done(self, cluster: str, outcome: str, now: float) -> None:
        """After a restore attempt: rate-limited or no rescheduler → ask again after another calm
        period; otherwise (done, or nothing to restore — a refusal is recorded) stop watching."""
        if outcome in ("skipped", "failed", "no-hook"):
            self.calm_since[cluster] = now
        else:
            self.calm_since.pop(cluster, None)
