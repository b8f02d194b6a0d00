"""The autoscaler controller (SPEC F5, F6, H3): FederatedHPA and CronFederatedHPA → a total replica count.

Single-active (lease ``autoscaler``), level-triggered: every autoscaler is evaluated when it changes
and again every ``sync_seconds``. One evaluation reads

* the workload's Binding (``spec.replicas`` = the current total, ``status.placement`` = where the
  replicas are) — the Binding the resource detector derives, `drods.controllers.detector`;
* the workload's own pods' use in each member (``status.clusters[].usage`` on the Binding, measured
  from metrics.k8s.io PodMetrics by the work-status controller or the pull agent): Karmada's
  average utilisation, Σ use of the ready pods ÷ Σ their requests; a member without metrics is
  named in the ``MetricsUnavailable`` condition and left out of the ratio, its pods counted as
  Kubernetes' replica calculator counts missing pods (`resource_replicas`), and no metric means no
  decision;
* each placed cluster's status document (``/status/clusters/<name>``), for the water-level
  forecast only (pre-scaling);
* the application's latest feedback (``/feedback/<namespace>/<kind>/<name>``, H3), or its
  ``spec.feedback.promql`` queries evaluated against Prometheus (`drods.autoscaling.promql_feedback`);
* a count adopted from a pull-mode agent's local decisions (``status.autonomy``,
  `drods.autoscaling.autonomy`), which stands for ``adopt_hold_s`` before the rule decides again;
* the CronFederatedHPAs that drive it (their rule in effect bounds min/max);

and writes the decision on the autoscaler's own ``status`` (``desiredReplicas``, ``currentReplicas``,
``currentMetrics``, ``conditions``, ``lastScaleTime``, and the window state the behaviour needs —
so a new leader resumes where the last one stopped). The resource detector reads
``status.desiredReplicas`` of the workload's one autoscaler (`drods.model.autoscaling.owner`) as the
Binding's total instead of the template's ``spec.replicas``, which stays the user's; the scheduler
then divides the new total by water level, so a burst spills to other clusters by itself (F6).
A change of desired replicas is recorded with its inputs in the journal ``/history/autoscaling/`` and told
as Kubernetes' HPA tells it: a ``SuccessfulRescale`` Event on the FederatedHPA (``New size: N; reason: …``);
a cron run that could not scale its target is a ``ScaleFailed`` warning on the CronFederatedHPA, as
Karmada's cron controller records it.

A CronFederatedHPA whose target is a workload sets ``desiredReplicas`` to its rule in effect; one
whose target is a FederatedHPA records the bounds it imposes and that FederatedHPA applies them.
"""

from __future__ import annotations

import json
import logging
import math
import time
from collections.abc import Callable, Hashable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from pydantic import ValidationError

from drods.autoscaling import cron, custom_metrics
from drods.autoscaling.autonomy import REASON_ADOPTED
from drods.autoscaling.cluster_weights import WeightSettings, rebalance
from drods.autoscaling.feedback import FeedbackSettings, LoopState, Observation
from drods.autoscaling.feedback import step as feedback_step
from drods.autoscaling.promql_feedback import PromQLFeedback
from drods.errors import AlreadyExists, Conflict, NotFound
from drods.machinery.controller import Controller
from drods.machinery.event_log import EventLog
from drods.machinery.informer import Informer, subscribed, wait_synced
from drods.machinery.journal import Journal
from drods.machinery.manager import Manager
from drods.model import member_status as ms
from drods.model import scaling
from drods.model.autoscaling import (
    CRON_KIND,
    CronFederatedHPASpec,
    CronRule,
    FederatedHPASpec,
    FeedbackQueries,
    OwnerIndex,
    scaled_workload,
)
from drods.model.conditions import condition, kept_transitions
from drods.model.detection import binding_is_for, binding_name
from drods.model.keys import AUTOSCALING_PREFIX, FEEDBACK_PREFIX, STATUS_PREFIX, feedback_key
from drods.model.kinds import BINDING, CLUSTER, CRON_FEDERATED_HPA, FEDERATED_HPA, Kind, by_kind
from drods.model.timefmt import parse_rfc3339, rfc3339_ms
from drods.model.workload_usage import WorkloadUsage
from drods.model.workload_usage import total as workload_total
from drods.monitor.series import PrometheusError
from drods.registry.objects import ObjectRegistry, decode_binding_kept, decode_stored
from drods.store import KeyValue, Store

log = logging.getLogger(__name__)

LEASE = "autoscaler"
WATER_LEVEL = "waterLevel"
# (cluster, seconds ahead) → forecast water level (0..1), None without a model.
Forecast = Callable[[str, float], float | None]


@dataclass(frozen=True, slots=True)
class AutoscalerSettings:
    sync_seconds: float = 15.0  # Kubernetes' HPA sync period
    history_retention_s: float = 7 * 86400.0
    # Pre-scaling: scale now for the utilisation forecast this far ahead (0: off).
    forecast_horizon_s: float = 600.0
    # A count adopted from a pull-mode agent's local decisions stands this long before the
    # autoscaler decides again (M2: no fight with what the agent just did).
    adopt_hold_s: float = 60.0
    # Prometheus for ``spec.feedback.promql`` (H3); None: such queries are not evaluated.
    feedback_prometheus_url: str | None = None
    # Prometheus for Pods/Object/External metrics; None: the feedback one
    custom_metrics_prometheus_url: str | None = None
    feedback: FeedbackSettings = field(default_factory=FeedbackSettings)
    weights: WeightSettings = field(default_factory=WeightSettings)


def decode_utilisation(kv: KeyValue) -> dict[str, float] | None:
    """A status document → ``{"cpu": %, "memory": %, "waterLevel": …}`` (`scaling.cluster_utilisation`)."""
    try:
        view = json.loads(kv.value).get("status") or {}
    except (ValueError, AttributeError):
        return None
    if not isinstance(view, dict):
        return None
    out = scaling.cluster_utilisation(view)
    wl = view.get(ms.WATER_LEVEL)
    if isinstance(wl, (int, float)):
        out[WATER_LEVEL] = float(wl)
    return out


def decode_not_ready(kv: KeyValue) -> str | None:
    """A Cluster → why it is not Ready (its Ready condition False), None while it is (or Unknown)."""
    try:
        cond = condition(json.loads(kv.value))
    except (ValueError, AttributeError):
        return None
    if cond is None or cond.get("status") != "False":
        return None
    return f"cluster NotReady ({cond.get('reason') or 'no reason'}): its last reading is not used"


def decode_feedback(kv: KeyValue) -> Observation | None:
    try:
        doc = json.loads(kv.value)
        m = doc["metrics"]
        at = parse_rfc3339(doc["timestamp"])
    except (ValueError, KeyError, TypeError):
        return None
    if at is None:
        return None
    return Observation(m.get("latencyP99Ms"), m.get("throughput"), m.get("errorRate"), at)


def _condition(type_: str, ok: bool, reason: str, message: str, now: float) -> dict[str, Any]:
    return {"type": type_, "status": "True" if ok else "False", "reason": reason, "message": message,
            "lastTransitionTime": rfc3339_ms(now)}


def _window(status: Mapping[str, Any]) -> scaling.Window:
    w = scaling.Window()
    for r in status.get("recommendations") or []:
        t = parse_rfc3339(r.get("time"))
        if t is not None and isinstance(r.get("replicas"), int):
            w.recommendations.append((t, r["replicas"]))
    for e in status.get("scaleEvents") or []:
        t = parse_rfc3339(e.get("time"))
        if t is not None and isinstance(e.get("change"), int):
            w.events.append((t, e["change"]))
    return w


@dataclass(slots=True)
class _HPATurn:
    """What one FederatedHPA evaluation read and decided, handed from one named step to the next."""

    spec: FederatedHPASpec
    ns: str
    name: str
    current: int
    placement: dict[str, int]
    lo: int
    hi: int
    rule: str | None
    observations: list[tuple[float, float]] = field(default_factory=list)
    current_metrics: list[dict[str, Any]] = field(default_factory=list)
    recommendation: int = 0
    forecast_info: dict[str, Any] | None = None
    state: LoopState = field(default_factory=LoopState)
    feedback_info: dict[str, Any] | None = None
    weights: dict[str, float] | None = None
    weights_info: dict[str, Any] | None = None
    holding: bool = False
    resource_proposals: list[int] = field(default_factory=list)  # each Resource metric's count (resource_replicas)
    usage: dict[str, WorkloadUsage] = field(default_factory=dict)  # cluster → its pods' use
    unavailable: dict[str, str] = field(default_factory=dict)  # cluster → why its metrics are missing
    ready_pods: int = 0  # ready pods measured, plus the unmeasured members' pods: a custom metric's rule multiplies
    resource_metrics: int = 0  # the first observations are the Resource metrics (the forecast scales those)
    pods: PodCounts = field(default_factory=lambda: PodCounts(0, 0, 0))  # the Resource metrics' pods, grouped


@dataclass(frozen=True, slots=True)
class PodCounts:
    """The workload's pods as Kubernetes' replica calculator groups them (``groupPods``): ready with a
    measurement, missing (ready, or of unknown readiness, with no measurement: an unmeasured member's),
    and unready (not ready yet: in the measured members and, by their last report, in the others)."""

    measured: int
    missing: int
    unready: int


def workload_usage(binding: Mapping[str, Any],
                   not_ready: Callable[[str], str | None] = lambda _: None) -> dict[str, WorkloadUsage]:
    """Cluster → the workload's own measured use there (``status.clusters[].usage``). A cluster holding
    replicas that has reported none yet is unmeasured, with its replicas as (ready) pods: they run, or
    will, and nothing was read of them. A NotReady cluster's last reading is no measurement (its member
    may run other counts now): unmeasured, with ``not_ready``'s reason and the pods it last reported."""
    out: dict[str, WorkloadUsage] = {}
    for e in (binding.get("status") or {}).get("clusters") or []:
        if isinstance(e, dict) and e.get("cluster"):
            u = WorkloadUsage.from_doc(e.get("usage"))
            if u is not None and (why := not_ready(str(e["cluster"]))) is not None:
                u = WorkloadUsage(pods=u.pods, ready_pods=u.ready_pods, unavailable=[why])
            replicas = int(e.get("replicas") or 0)
            if u is None and replicas > 0:
                u = WorkloadUsage(pods=replicas, ready_pods=replicas, unavailable=["no usage reported yet"])
            if u is not None:
                out[str(e["cluster"])] = u
    return out


def _observe(turn: _HPATurn) -> None:
    """Each resource metric as Karmada's FederatedHPA reads it: Σ use of the workload's ready pods
    in every member ÷ Σ their requests. A member without the metrics (API missing or failing, NotReady,
    or no report yet) is named in ``turn.unavailable`` and left out of the ratio — its pods are
    *missing* pods for `resource_replicas`; with no member measured the metric gives nothing (and no
    decision is taken on it)."""
    measured = {c: u for c, u in turn.usage.items() if u.measured}
    unmeasured = {c: u for c, u in sorted(turn.usage.items()) if c not in measured and (u.pods > 0 or u.unavailable)}
    turn.unavailable = {c: "; ".join(u.unavailable) or "not measured" for c, u in unmeasured.items()}
    summed = workload_total(measured) if measured else None
    ready = summed.ready_pods if summed is not None else 0
    turn.pods = PodCounts(
        measured=ready, missing=sum(min(u.ready_pods, u.pods) for u in unmeasured.values()),
        unready=sum(max(u.pods - u.ready_pods, 0) for u in (*measured.values(), *unmeasured.values())))
    # a custom metric's rule: the pods of members without metrics still run, so they are counted
    turn.ready_pods = ready + sum(u.pods for u in unmeasured.values())
    for m in turn.spec.metrics:
        if m.resource is None or summed is None or (seen := summed.observe(m.resource)) is None:
            continue
        value, target, current = seen
        turn.observations.append((value, target))
        turn.current_metrics.append({"type": "Resource", "resource": {"name": m.resource.name, "current": current}})
        # a missing pod on a scale-down uses its request (100 %), or the target when that is higher
        fill = max(100.0, target) / target if m.resource.target.type == "Utilization" and target > 0 else 1.0
        turn.resource_proposals.append(resource_replicas(turn.current, value / target if target > 0 else 1.0,
                                                         turn.pods, fill))
    turn.resource_metrics = len(turn.observations)


def resource_replicas(current: int, ratio: float, pods: PodCounts, fill: float = 1.0) -> int:
    """Kubernetes' (and Karmada's FederatedHPA's) replica calculator for one resource metric, ``ratio`` =
    the measured value ÷ its target over the ``pods.measured`` ready pods. Without missing pods (and
    without unready ones on a scale-up): ``ceil(ratio × measured)``, the count unchanged within the
    tolerance. Otherwise the ratio is computed again with the missing pods at 0 % of their request
    when it says scale up and at ``fill`` × the target (100 % of the request, or the target if higher)
    when it says scale down, and with the unready pods at 0 % on a scale-up; a missing or unready pod
    is taken to request what a measured one does. If the new ratio is within the tolerance or points
    the other way, the count stays — a busy measured pod beside unmeasured ones does not scale up on
    a guess that they are as busy (nor idle ones scale down)."""
    n = pods.measured
    if n <= 0:
        return current
    up, down = ratio > 1.0, ratio < 1.0
    if not (up and pods.unready > 0) and pods.missing == 0:
        return current if abs(ratio - 1.0) <= scaling.TOLERANCE else math.ceil(ratio * n - 1e-9)
    counted = n + (pods.missing if up or down else 0) + (pods.unready if up else 0)
    new = (ratio * n + (pods.missing * fill if down else 0.0)) / counted
    if abs(new - 1.0) <= scaling.TOLERANCE or (down and new > 1.0) or (up and new < 1.0):
        return current  # within the tolerance, or the direction reversed: no scale
    proposal = math.ceil(new * counted - 1e-9)
    if (new < 1.0 and proposal > current) or (new > 1.0 and proposal < current):
        return current
    return proposal


def _observe_custom(turn: _HPATurn, readings: dict[int, float | str]) -> None:
    """The Pods/Object/External metrics read from Prometheus, after the Resource ones."""
    custom = custom_metrics.observe(turn.spec, readings, turn.ready_pods or turn.current)
    turn.observations += custom.observations
    turn.current_metrics += custom.current
    turn.unavailable.update(custom.unavailable)


def _metric_name(entry: Mapping[str, Any]) -> str:
    source = entry.get(str(entry.get("type") or "").lower()) or {}
    return str(source.get("name") or (source.get("metric") or {}).get("name") or "")


def _hpa_status(turn: _HPATurn, outcome: scaling.Outcome, window: scaling.Window, status: Mapping[str, Any],
                now: float) -> dict[str, Any]:
    """The FederatedHPA's new ``status``: the decision, the window state a new leader resumes from,
    and the conditions saying whether metrics were read and whether a limit applied."""
    current = turn.current
    out: dict[str, Any] = {
        "currentReplicas": current, "desiredReplicas": outcome.desired,
        "currentMetrics": turn.current_metrics, "minReplicas": turn.lo, "maxReplicas": turn.hi,
        "recommendations": [{"time": rfc3339_ms(t), "replicas": r} for t, r in window.recommendations],
        "scaleEvents": [{"time": rfc3339_ms(t), "change": c} for t, c in window.events],
    }
    state = turn.state
    if turn.spec.feedback is not None:
        out["feedback"] = {"integral": round(state.integral, 6), "slackReports": state.slack_reports,
                           **({"lastStepTime": rfc3339_ms(state.last_step_at)} if state.last_step_at else {}),
                           **(turn.feedback_info or {})}
    if turn.weights:
        out["clusterWeights"] = turn.weights
        moved_at = (turn.weights_info or {}).get("lastMoveTime") or status.get("clusterWeightsTime")
        if moved_at:
            out["clusterWeightsTime"] = moved_at
    if turn.weights_info is not None:
        out.setdefault("feedback", {})["weights"] = turn.weights_info
    if turn.rule:
        out["cronRule"] = turn.rule
    autonomy = status.get("autonomy") or {}
    if autonomy:
        out["autonomy"] = autonomy
    if turn.forecast_info is not None:
        out["forecast"] = turn.forecast_info
    out["lastScaleTime"] = (rfc3339_ms(now) if outcome.desired != current and not turn.holding
                            else status.get("lastScaleTime"))
    if out["lastScaleTime"] is None:
        out.pop("lastScaleTime")
    able = bool(turn.observations) or (turn.feedback_info is not None and turn.feedback_info["error"] is not None)
    out["conditions"] = [
        _condition("ScalingActive", able, "ValidMetricFound" if able else "NoMetrics",
                   "metrics read" if able else "no placed cluster reports the metrics yet", now),
        _able_to_scale(outcome, turn.recommendation, current, now),
        _scaling_limited(outcome, turn.lo, turn.hi, now)]
    if turn.unavailable:
        out["conditions"].append(_condition(
            "MetricsUnavailable", True, "MetricsUnavailable",
            "; ".join(f"{c}: {why}" for c, why in turn.unavailable.items())[:1000], now))
    return out


# the HorizontalPodAutoscaler's ScalingLimited reasons and messages for the outcome's limit
_LIMITED: dict[str, tuple[str, str]] = {
    "maxReplicas": ("TooManyReplicas", "the desired replica count is more than the maximum replica count ({hi})"),
    "minReplicas": ("TooFewReplicas", "the desired replica count is less than the minimum replica count ({lo})"),
    "scale-up rate limit": ("ScaleUpLimit", "the desired replica count is increasing faster than the maximum "
                                            "scale rate"),
    "scale-down rate limit": ("ScaleDownLimit", "the desired replica count is decreasing faster than the maximum "
                                                "scale rate"),
}


def _able_to_scale(outcome: scaling.Outcome, recommendation: int, current: int, now: float) -> dict[str, Any]:
    """``AbleToScale`` as Kubernetes' HPA says it: a stabilisation window holding the count, a count adopted
    from a member's agent (M2), or ready for the next change."""
    if outcome.reason == "stabilisation window":
        if outcome.stabilised > recommendation:
            return _condition("AbleToScale", True, "ScaleDownStabilized", "recent recommendations were higher than "
                              "the current one, applying the highest recent recommendation", now)
        return _condition("AbleToScale", True, "ScaleUpStabilized", "recent recommendations were lower than the "
                          "current one, applying the lowest recent recommendation", now)
    if outcome.reason == REASON_ADOPTED:
        return _condition("AbleToScale", True, "AdoptedFromAgent", "the count a member's agent decided while it "
                          "could not reach the control plane is kept until the central loop resumes", now)
    if outcome.desired != current:
        return _condition("AbleToScale", True, "SucceededRescale",
                          f"the HPA controller was able to update the target scale to {outcome.desired}", now)
    return _condition("AbleToScale", True, "ReadyForNewScale", "recommended size matches current size", now)


def _scaling_limited(outcome: scaling.Outcome, lo: int, hi: int, now: float) -> dict[str, Any]:
    """``ScalingLimited`` as Kubernetes' HPA says it (a stabilisation window does not limit the count:
    it shows in the decision's reason, as kube's ``AbleToScale`` tells it apart)."""
    limit = _LIMITED.get(outcome.reason)
    if limit is None:
        return _condition("ScalingLimited", False, "DesiredWithinRange",
                          "the desired count is within the acceptable range"
                          + (f" ({outcome.reason})" if outcome.reason else ""), now)
    return _condition("ScalingLimited", True, limit[0], limit[1].format(lo=lo, hi=hi), now)


def _hpa_record(turn: _HPATurn, outcome: scaling.Outcome, status: Mapping[str, Any]) -> dict[str, Any] | None:
    """The journal record of a changed count or moved per-cluster weights, with the inputs that led
    to it; None when neither changed."""
    ref, ns, current = turn.spec.scaleTargetRef, turn.ns, turn.current
    record = None
    if outcome.desired != current and not turn.holding:
        record = {"autoscaler": f"{FEDERATED_HPA.kind}/{ns}/{turn.name}",
                  "workload": f"{ref.kind}/{ns}/{ref.name}", "from": current, "to": outcome.desired,
                  "recommendation": turn.recommendation, "reason": outcome.reason or "recommendation",
                  "bounds": [turn.lo, turn.hi], "placement": turn.placement,
                  "metrics": [{"type": m["type"], "name": _metric_name(m), "value": v, "target": t}
                              for m, (v, t) in zip(turn.current_metrics, turn.observations, strict=True)],
                  **({"feedback": turn.feedback_info} if turn.feedback_info else {}),
                  **({"forecast": turn.forecast_info} if turn.forecast_info else {}),
                  **({"cronRule": turn.rule} if turn.rule else {})}
    if turn.weights_info is not None and turn.weights_info.get("moved"):
        record = record or {"autoscaler": f"{FEDERATED_HPA.kind}/{ns}/{turn.name}",
                            "workload": f"{ref.kind}/{ns}/{ref.name}", "from": current, "to": outcome.desired,
                            "reason": "per-cluster weights from feedback", "placement": turn.placement}
        record["clusterWeights"] = {"from": status.get("clusterWeights"), "to": turn.weights,
                                    "errors": turn.weights_info["errors"]}
    return record


def rescale_reason(record: Mapping[str, Any]) -> str:
    """Why a FederatedHPA's count changed, in the words of Kubernetes' HPA events: the metrics above their
    target (or all below), else what set the count (a bound, a stabilisation window, a cron rule)."""
    if record.get("reason") not in (None, "recommendation"):
        return str(record["reason"])
    above = [m for m in record.get("metrics") or [] if _above(m)]
    if int(record.get("to") or 0) > int(record.get("from") or 0) and above:
        return ", ".join(f"{m['name']} resource utilization (percentage of request) above target"
                         if m.get("type") == "Resource" else f"{m['type'].lower()} metric {m['name']} above target"
                         for m in above)
    return "All metrics below target"


def _above(metric: Mapping[str, Any]) -> bool:
    try:
        return float(metric["value"]) > float(metric["target"])
    except (KeyError, TypeError, ValueError):
        return False


def _next_run(status: Mapping[str, Any]) -> float | None:
    """The earliest ``nextExecutionTime`` a CronFederatedHPA's status records (None: no rule will run)."""
    fires = [t for h in status.get("executionHistories") or [] if isinstance(h, Mapping)
             and (t := parse_rfc3339(h.get("nextExecutionTime"))) is not None]
    return min(fires) if fires else None


def _new_failures(before: Mapping[str, Any], after: Mapping[str, Any]) -> list[str]:
    """The messages of a cron's failed runs recorded by this evaluation (not in ``before``)."""
    seen = {(h.get("ruleName"), e.get("scheduleTime"))
            for h in before.get("executionHistories") or [] if isinstance(h, dict)
            for e in h.get("failedExecutions") or [] if isinstance(e, dict)}
    return [f"rule {h.get('ruleName')}: {e.get('message')}"
            for h in after.get("executionHistories") or [] if isinstance(h, dict)
            for e in h.get("failedExecutions") or []
            if isinstance(e, dict) and (h.get("ruleName"), e.get("scheduleTime")) not in seen]


def _recommend(turn: _HPATurn) -> int:
    """Kubernetes' replica calculator, the largest over the metrics: each Resource metric by
    `resource_replicas` (missing and unready pods as Kubernetes counts them); each custom metric
    ``ceil(ratio × ready pods)``, the count unchanged within the tolerance."""
    if not turn.observations:
        return turn.current
    base = turn.ready_pods if turn.ready_pods > 0 else turn.current
    proposals = list(turn.resource_proposals)
    for obs in turn.observations[turn.resource_metrics:]:
        proposal = scaling.recommend(base, [obs])
        proposals.append(turn.current if proposal == base else proposal)
    return max(proposals)


class Autoscaler:
    """Evaluates every FederatedHPA and CronFederatedHPA (see the module docstring)."""

    def __init__(self, registry: ObjectRegistry, store: Store, *, hpas: Informer, crons: Informer,
                 bindings: Informer, clusters: Informer, feedback: Informer, members: Informer,
                 settings: AutoscalerSettings | None = None, clock: Callable[[], float] = time.time,
                 forecast: Forecast | None = None) -> None:
        self.registry = registry
        self.forecast = forecast
        self.settings = settings or AutoscalerSettings()
        self.clock = clock
        self.hpas, self.crons, self.bindings, self.clusters, self.feedback = hpas, crons, bindings, clusters, feedback
        self.members = members  # Cluster → why it is NotReady (None: Ready or Unknown)
        self.history = Journal(store, AUTOSCALING_PREFIX, retention_s=self.settings.history_retention_s, clock=clock)
        self.events = EventLog(store, "drods-autoscaler")
        self.controller = Controller(LEASE, self.reconcile, workers=2)
        url = self.settings.feedback_prometheus_url
        self.promql = PromQLFeedback(url) if url else None
        self.custom = custom_metrics.CustomMetricsReader(self.settings.custom_metrics_prometheus_url or url)
        self.owners = OwnerIndex()
        # (namespace, FederatedHPA name) → the crons that drive it, by key
        self.drivers: dict[tuple[str, str], dict[str, Mapping[str, Any]]] = {}
        self._driven: dict[str, tuple[str, str]] = {}
        # (namespace, kind, name) → cluster → that cluster's latest report (per-cluster weights)
        self.cluster_feedback: dict[tuple[str, str, str], dict[str, Observation]] = {}
        self._util_at = -1
        self._util: dict[str, dict[str, float]] = {"cpu": {}, "memory": {}}
        self._released: dict[str, Mapping[str, Any]] = {}  # key → an autoscaler deleted while it set a count

    @staticmethod
    def informers(manager: Manager) -> dict[str, Informer]:
        return {"hpas": manager.informer(FEDERATED_HPA.key_prefix(), decode_stored),
                "crons": manager.informer(CRON_FEDERATED_HPA.key_prefix(), decode_stored),
                "bindings": manager.informer(BINDING.key_prefix(), decode_binding_kept),
                "clusters": manager.informer(STATUS_PREFIX, decode_utilisation),
                "feedback": manager.informer(FEEDBACK_PREFIX, decode_feedback),
                "members": manager.informer(CLUSTER.key_prefix(), decode_not_ready)}

    def _feedback_changed(self, key: str, old: Any, new: Any) -> None:
        parts = key[len(FEEDBACK_PREFIX):].split("/")
        if len(parts) != 4:  # a whole-workload report: read from the cache directly
            return
        workload, cluster = (parts[0], parts[1], parts[2]), parts[3]
        if new is None:
            self.cluster_feedback.get(workload, {}).pop(cluster, None)
        else:
            self.cluster_feedback.setdefault(workload, {})[cluster] = new

    def _hpa_changed(self, key: str, old: Any, new: Any) -> None:
        self.owners.update(key, new)
        self._note_release(key, old, new)
        self.controller.queue.add(key)

    def _note_release(self, key: str, old: Any, new: Any) -> None:
        """An autoscaler that set its workload's count is gone: its turn journals the count going back."""
        if new is None and isinstance(old, Mapping) and scaled_workload(old) is not None and \
                isinstance((old.get("status") or {}).get("desiredReplicas"), int):
            self._released[key] = old

    def _index_driver(self, key: str, obj: Mapping[str, Any] | None) -> None:
        old = self._driven.pop(key, None)
        if old is not None:
            self.drivers.get(old, {}).pop(key, None)
        ref = ((obj or {}).get("spec") or {}).get("scaleTargetRef") or {}
        if obj is not None and isinstance(ref, dict) and ref.get("kind") == FEDERATED_HPA.kind and ref.get("name"):
            hpa = ((obj.get("metadata") or {}).get("namespace") or "default", str(ref["name"]))
            self._driven[key] = hpa
            self.drivers.setdefault(hpa, {})[key] = obj

    def _cron_changed(self, key: str, old: Any, new: Any) -> None:
        self.owners.update(key, new)
        self._note_release(key, old, new)
        self._index_driver(key, new)
        self.controller.queue.add(key)
        for obj in (old, new):  # a cron driving a FederatedHPA: evaluate that one too
            ref = ((obj or {}).get("spec") or {}).get("scaleTargetRef") or {}
            if isinstance(ref, dict) and ref.get("kind") == FEDERATED_HPA.kind and ref.get("name"):
                ns = (obj.get("metadata") or {}).get("namespace") or "default"
                self.controller.queue.add(FEDERATED_HPA.key(str(ref["name"]), ns))

    async def run(self) -> None:
        with subscribed((self.hpas, self._hpa_changed), (self.crons, self._cron_changed),
                        (self.feedback, self._feedback_changed)):
            await wait_synced(self.hpas, self.crons, self.bindings, self.clusters, self.feedback, self.members)
            self.sync_index()
            for inf in (self.hpas, self.crons):
                for key in inf.cache:
                    self.controller.queue.add(key)
            await self.controller.run()

    # ------------------------------------------------------------------ reconcile
    async def reconcile(self, item: Hashable) -> float | None:
        key = str(item)
        kind: Kind = FEDERATED_HPA if key.startswith(FEDERATED_HPA.key_prefix()) else CRON_FEDERATED_HPA
        inf = self.hpas if kind is FEDERATED_HPA else self.crons
        obj = inf.cache.get(key)
        if obj is None and (gone := self._released.pop(key, None)) is not None:
            await self._journal_release(gone)
        if obj is None or (obj.get("metadata") or {}).get("deletionTimestamp"):
            return None
        now = self.clock()
        status = dict(obj.get("status") or {})
        period = self.settings.sync_seconds
        last = parse_rfc3339(status.get("lastEvaluatedTime"))
        same_gen = status.get("observedGeneration") == (obj.get("metadata") or {}).get("generation")
        cron_moved = kind is FEDERATED_HPA and self._cron_bounds(obj, now)[2] != status.get("cronRule")
        due = _next_run(status) if kind is CRON_FEDERATED_HPA else None  # a rule's next fire
        if same_gen and not cron_moved and last is not None and 0 <= now - last < period and \
                (due is None or now < due):
            # evaluated this period already (e.g. our own status write); a cron looks again when a rule fires
            return period - (now - last) if due is None else max(0.05, min(period - (now - last), due - now + 0.01))
        try:
            if kind is FEDERATED_HPA:
                new_status, record = self._evaluate_hpa(obj, status, now, await self._promql(obj, now),
                                                        await self._custom_metrics(obj, now))
            else:
                new_status, record = self._evaluate_cron(obj, status, now)
        except ValidationError as e:  # stored before a schema change: report, don't crash the loop
            new_status, record = {**status, "conditions": [_condition("ScalingActive", False, "InvalidSpec",
                                                                      str(e).splitlines()[0], now)]}, None
        new_status["observedGeneration"] = (obj.get("metadata") or {}).get("generation")
        new_status["lastEvaluatedTime"] = rfc3339_ms(now)
        if isinstance(new_status.get("conditions"), list):
            new_status["conditions"] = kept_transitions(status.get("conditions"), new_status["conditions"])
        meta = obj["metadata"]
        try:
            await self.registry.update_status(kind, meta["name"], new_status, meta.get("namespace"),
                                              resource_version=int(meta["resourceVersion"]))
        except (Conflict, AlreadyExists):
            return 0.05
        except NotFound:
            return None
        if record is not None:
            await self.history.append(record, ts=now)
        self._tell(obj, status, new_status, record)
        if kind is CRON_FEDERATED_HPA and (due := _next_run(new_status)) is not None:
            return max(0.05, min(period, due - now + 0.01))  # look again when the next rule fires
        return period

    def _tell(self, obj: Mapping[str, Any], before: Mapping[str, Any], after: Mapping[str, Any],
              record: Mapping[str, Any] | None) -> None:
        """The Events ``kubectl describe`` shows for this evaluation: a rescale, or cron runs that failed."""
        meta = obj.get("metadata") or {}
        involved = {"apiVersion": obj.get("apiVersion"), "kind": obj.get("kind"), "name": meta.get("name"),
                    "namespace": meta.get("namespace") or "default", "uid": meta.get("uid")}
        if record is not None and record.get("to") != record.get("from") and obj.get("kind") == FEDERATED_HPA.kind:
            self.events.tell(involved, "Normal", "SuccessfulRescale",
                             f"New size: {record.get('to')}; reason: {rescale_reason(record)}")
        for message in _new_failures(before, after):
            self.events.tell(involved, "Warning", "ScaleFailed", message)

    async def _journal_release(self, gone: Mapping[str, Any]) -> None:
        """The decision a deletion makes: the workload's count goes back to its template's ``spec.replicas``
        (or to the autoscaler that owns it now), journalled as any other change of count."""
        workload = scaled_workload(gone)
        assert workload is not None
        api_version, kind_name, ns, name = workload
        meta = gone.get("metadata") or {}
        was = int((gone.get("status") or {})["desiredReplicas"])
        heir = self.owners.owner(workload)
        if heir is not None:
            now_count: int | None = self.owners.owned_replicas(workload)
            why = f"{gone.get('kind')} deleted: {heir.get('kind')} {(heir.get('metadata') or {}).get('name')} owns " \
                "the count"
        else:
            kind = by_kind(api_version, kind_name)
            template = await self.registry.try_get(kind, name, ns) if kind is not None else None
            now_count = ((template or {}).get("spec") or {}).get("replicas", 1) if template is not None else None
            why = f"{gone.get('kind')} deleted: the template's spec.replicas holds again"
        if now_count is None or now_count == was:
            return
        await self.history.append({"autoscaler": f"{gone.get('kind')}/{ns}/{meta.get('name')}",
                                   "workload": f"{kind_name}/{ns}/{name}", "from": was, "to": now_count,
                                   "reason": why}, ts=self.clock())

    def sync_index(self) -> None:
        """Index every autoscaler in the informers (changes keep it current afterwards)."""
        for inf in (self.hpas, self.crons):
            for key, obj in list(inf.cache.items()):
                self.owners.update(key, obj)
        for key, obj in list(self.crons.cache.items()):
            self._index_driver(key, obj)
        for key, fb in list(self.feedback.cache.items()):
            self._feedback_changed(key, None, fb)

    def _utilisation(self) -> dict[str, dict[str, float]]:
        """cpu / memory → cluster → utilisation, rebuilt only when a status document changed."""
        if self._util_at != self.clusters.revision or not self.clusters.revision:
            util: dict[str, dict[str, float]] = {"cpu": {}, "memory": {}, WATER_LEVEL: {}}
            for ckey, u in self.clusters.cache.items():
                for res, v in (u or {}).items():
                    util[res][ckey[len(STATUS_PREFIX):]] = v
            self._util, self._util_at = util, self.clusters.revision
        return self._util

    def _target(self, obj: Mapping[str, Any]) -> tuple[str, str, str, str] | None:
        return scaled_workload(obj)

    def _ambiguous(self, obj: Mapping[str, Any], status: dict[str, Any], now: float) -> dict[str, Any] | None:
        """The status of an autoscaler that is not its workload's owner (a second one), else None."""
        target = self._target(obj)
        if target is None:
            return None
        first = self.owners.owner(target)
        if first is None or (first.get("metadata") or {}).get("uid") == (obj.get("metadata") or {}).get("uid"):
            return None
        other = f"{first.get('kind')}/{(first.get('metadata') or {}).get('name')}"
        out = {k: v for k, v in status.items() if k not in ("desiredReplicas",)}
        out["conditions"] = [_condition("ScalingActive", False, "AmbiguousTarget",
                                        f"{target[1]}/{target[3]} is already scaled by {other}", now)]
        return out

    def _cron_bounds(self, hpa: Mapping[str, Any], now: float) -> tuple[int | None, int | None, str | None]:
        """(min, max, rule) imposed on ``hpa`` by the CronFederatedHPAs that drive it."""
        meta = hpa.get("metadata") or {}
        ns = meta.get("namespace") or "default"
        best: tuple[float, int | None, int | None, str] | None = None
        for c in self.drivers.get((ns, str(meta.get("name"))), {}).values():
            cmeta = c.get("metadata") or {}
            if cmeta.get("deletionTimestamp"):
                continue
            try:
                spec = CronFederatedHPASpec.model_validate(c.get("spec") or {})
            except ValidationError:
                continue
            fired = cron.in_effect(spec.rules, now, parse_rfc3339(cmeta.get("creationTimestamp")) or 0.0,
                                   cron.recorded_fires(c.get("status")))
            if fired is not None and (best is None or fired.at >= best[0]):
                best = (fired.at, fired.rule.targetMinReplicas, fired.rule.targetMaxReplicas,
                        f"{CRON_KIND}/{cmeta.get('name')}:{fired.rule.name}")
        return (best[1], best[2], best[3]) if best else (None, None, None)

    async def _promql(self, obj: Mapping[str, Any], now: float) -> tuple[Observation | None, str] | None:
        """The application's feedback read from Prometheus when the spec asks for it (else None):
        (observation, "") or (None, why not)."""
        fb = (obj.get("spec") or {}).get("feedback")
        if not isinstance(fb, dict) or not fb.get("promql"):
            return None
        if self.promql is None:
            return None, "no Prometheus configured (autoscaling.feedback.prometheusUrl)"
        try:
            queries = FeedbackQueries.model_validate(fb["promql"])
            return await self.promql.observe(queries, now), ""
        except (PrometheusError, ValidationError) as e:
            return None, str(e).splitlines()[0][:300]

    async def _custom_metrics(self, obj: Mapping[str, Any], now: float) -> dict[int, float | str]:
        try:
            spec = FederatedHPASpec.model_validate(obj.get("spec") or {})
        except ValidationError:
            return {}  # the evaluation reports it
        return await self.custom.read(spec, str((obj.get("metadata") or {}).get("namespace") or "default"), now)

    def _evaluate_hpa(self, obj: Mapping[str, Any], status: dict[str, Any], now: float,
                      promql: tuple[Observation | None, str] | None = None,
                      custom: dict[int, float | str] | None = None,
                      ) -> tuple[dict[str, Any], dict[str, Any] | None]:
        """One FederatedHPA turn as named steps (observe, recommend, feedback, weights, decide), then
        the status it writes and the journal record of a change."""
        spec = FederatedHPASpec.model_validate(obj.get("spec") or {})
        meta = obj.get("metadata") or {}
        ns = meta.get("namespace") or "default"
        ambiguous = self._ambiguous(obj, status, now)
        if ambiguous is not None:
            return ambiguous, None
        ref = spec.scaleTargetRef
        binding = self._binding_of(ref.kind, ns, ref.name)
        if binding is None:  # as a CronFederatedHPA says it, and AbleToScale in Karmada's FederatedHPA's words
            missing = _no_binding(ref.kind, ns, ref.name)
            waiting = {**status, "conditions": [
                _condition("ScalingActive", False, "TargetNotFound", missing, now),
                _condition("AbleToScale", False, "FailedGetBinding",
                           f"the HPA controller was unable to get the binding by scaleTargetRef: {missing}", now)]}
            return waiting, None
        current = int((binding.get("spec") or {}).get("replicas", 1))
        placement = {p["cluster"]: int(p["replicas"]) for p in (binding.get("status") or {}).get("placement") or []
                     if isinstance(p, dict) and "cluster" in p}
        lo, hi = spec.minReplicas, spec.maxReplicas
        cmin, cmax, rule = self._cron_bounds(obj, now)
        lo, hi = (cmin if cmin is not None else lo), (cmax if cmax is not None else hi)
        turn = _HPATurn(spec, ns, str(meta.get("name")), current, placement, min(lo, hi), hi, rule,
                        usage=workload_usage(binding, lambda c: self.members.cache.get(CLUSTER.key(c))))
        _observe(turn)
        _observe_custom(turn, custom or {})
        turn.recommendation = _recommend(turn)
        turn.forecast_info = self._forecast(turn, self._utilisation())
        if turn.forecast_info is not None and turn.forecast_info["recommended"] > turn.recommendation:
            turn.recommendation = turn.forecast_info["recommended"]
        self._feedback_step(turn, status, promql, now)
        turn.weights, turn.weights_info = self._weights(spec, (ns, ref.kind, ref.name), placement, status, now)
        raw = turn.recommendation
        turn.recommendation = min(max(raw, turn.lo), turn.hi)
        outcome, window = self._decide(turn, status, now)
        if outcome.reason in ("", "minReplicas", "maxReplicas") and outcome.desired == turn.recommendation != raw:
            # the bounds (a cron rule's, or the spec's) made the count, not the metrics: ScalingLimited says
            # so, by the side the metrics' count was clamped from (behave saw the clamped one)
            outcome = replace(outcome, reason="minReplicas" if raw < turn.lo else "maxReplicas")
        return _hpa_status(turn, outcome, window, status, now), _hpa_record(turn, outcome, status)

    def _feedback_step(self, turn: _HPATurn, status: Mapping[str, Any],
                       promql: tuple[Observation | None, str] | None, now: float) -> None:
        """Run the application-feedback loop one step (H3) and let it raise the recommendation —
        or set it, when no resource metric was read."""
        loop = status.get("feedback") or {}
        turn.state = LoopState(float(loop.get("integral", 0.0)), parse_rfc3339(loop.get("lastStepTime")),
                               int(loop.get("slackReports", 0)))
        spec, ref = turn.spec, turn.spec.scaleTargetRef
        if spec.feedback is None:
            return
        obs = self.feedback.cache.get(feedback_key(turn.ns, ref.kind, ref.name)) if promql is None else promql[0]
        fb = feedback_step(spec.feedback, obs, turn.current, turn.state, now, self.settings.feedback,
                           turn.lo, turn.hi)
        turn.state = fb.state
        if fb.error is not None or turn.observations == []:
            turn.recommendation = max(turn.recommendation, fb.replicas) if turn.observations else fb.replicas
        info: dict[str, Any] = {"error": None if fb.error is None else round(fb.error, 4),
                                "recommended": fb.replicas, "reason": fb.reason}
        if promql is not None:
            info["source"] = "promql"
            if promql[1]:
                info["sourceError"] = promql[1]
            elif obs is not None:
                info["observed"] = {k: v for k, v in (("latencyP99Ms", obs.latencyP99Ms),
                                                      ("throughput", obs.throughput),
                                                      ("errorRate", obs.errorRate)) if v is not None}
        turn.feedback_info = info

    def _decide(self, turn: _HPATurn, status: Mapping[str, Any],
                now: float) -> tuple[scaling.Outcome, scaling.Window]:
        """The desired count: an agent's just-adopted count stands for ``adopt_hold_s`` (M2);
        otherwise the recommendation through the behaviour's stabilisation and rate limits."""
        autonomy = status.get("autonomy") or {}
        adopted_at = parse_rfc3339(autonomy.get("adoptedAt"))
        held = autonomy.get("adoptedReplicas")
        turn.holding = (adopted_at is not None and isinstance(held, int)
                        and 0 <= now - adopted_at < self.settings.adopt_hold_s)
        if turn.holding and isinstance(held, int):  # an agent's count was just adopted: keep it
            kept = min(max(held, turn.lo), turn.hi)
            return scaling.Outcome(kept, kept, REASON_ADOPTED), _window(status)
        return scaling.behave(turn.current, turn.recommendation, _window(status), turn.spec.behavior, now,
                              turn.lo, turn.hi)

    def _weights(self, spec: FederatedHPASpec, workload: tuple[str, str, str], placement: Mapping[str, int],
                 status: Mapping[str, Any], now: float) -> tuple[dict[str, float] | None, dict[str, Any] | None]:
        """Per-cluster weights from per-cluster feedback (`cluster_weights`): (weights to keep on the
        status, what the turn saw) — (None, None) without per-cluster reports."""
        previous = status.get("clusterWeights") if isinstance(status.get("clusterWeights"), dict) else None
        reports = self.cluster_feedback.get(workload)
        if spec.feedback is None or not reports:
            return previous, None
        loop = status.get("feedback") or {}
        last_move = parse_rfc3339((loop.get("weights") or {}).get("lastMoveTime"))
        turn = rebalance(spec.feedback, reports, placement, previous, last_move, now, self.settings.weights)
        info: dict[str, Any] = {"errors": {c: round(e, 4) for c, e in sorted(turn.errors.items())},
                                "reason": turn.reason}
        if turn.weights is not None:
            info["moved"] = True
            info["lastMoveTime"] = rfc3339_ms(now)
            return turn.weights, info
        if last_move is not None:
            info["lastMoveTime"] = rfc3339_ms(last_move)
        return previous, info

    def _forecast(self, turn: _HPATurn, util: Mapping[str, Mapping[str, float]]) -> dict[str, Any] | None:
        """Pre-scaling (F6): the workload's measured utilisation scaled by its placed clusters' forecast
        growth in water level over the horizon (replica-weighted), through the same HPA rule; only
        ever raises the count."""
        spec, placement, current = turn.spec, turn.placement, turn.current
        horizon = self.settings.forecast_horizon_s
        if self.forecast is None or horizon <= 0 or not turn.resource_metrics:
            return None
        growth: dict[str, float] = {}
        for c, n in placement.items():
            now_wl = util[WATER_LEVEL].get(c)
            if n <= 0 or now_wl is None or now_wl <= 0:
                continue
            ahead = self.forecast(c, horizon)
            if ahead is not None:
                growth[c] = max(ahead / now_wl, 1.0)
        if not growth or max(growth.values()) <= 1.0:
            return None
        factor = scaling.weighted_utilisation(placement, {c: growth.get(c, 1.0) for c in placement}) or 1.0
        future = [(value * factor, target) for value, target in turn.observations[:turn.resource_metrics]]
        if not future:
            return None
        recommended = min(max(scaling.recommend(current, future), spec.minReplicas), spec.maxReplicas)
        return {"horizonSeconds": horizon, "recommended": recommended,
                "utilisation": [round(v, 2) for v, _ in future],
                "growth": {c: round(g, 4) for c, g in sorted(growth.items())}}

    def _evaluate_cron(self, obj: Mapping[str, Any], status: dict[str, Any],
                       now: float) -> tuple[dict[str, Any], dict[str, Any] | None]:
        spec = CronFederatedHPASpec.model_validate(obj.get("spec") or {})
        meta = obj.get("metadata") or {}
        ns = meta.get("namespace") or "default"
        since = parse_rfc3339(meta.get("creationTimestamp")) or 0.0
        frozen = cron.recorded_fires(status)
        fired = cron.in_effect(spec.rules, now, since, frozen)
        missing = self._cron_target_missing(spec, ns)
        out: dict[str, Any] = {k: v for k, v in status.items() if k in ("desiredReplicas",)}
        before = {h["ruleName"]: h for h in status.get("executionHistories") or []
                  if isinstance(h, dict) and isinstance(h.get("ruleName"), str)}
        out["executionHistories"] = [_execution_history(r, before.get(r.name) or {}, now, since, frozen, missing)
                                     for r in spec.rules]
        ambiguous = self._ambiguous(obj, out, now)
        if ambiguous is not None:
            return ambiguous, None
        suspended = [r.name for r in spec.rules if r.suspend]
        if fired is not None and missing is not None:
            active = _condition("ScalingActive", False, "TargetNotFound",
                                f"rule {fired.rule.name} fired at {rfc3339_ms(fired.at)}, but {missing}", now)
        elif fired is not None:
            active = _condition("ScalingActive", True, "RuleInEffect",
                                f"rule {fired.rule.name} fired at {rfc3339_ms(fired.at)}"
                                + (" (suspended since: no further runs)" if fired.rule.suspend else ""), now)
        else:
            active = _condition("ScalingActive", False, "NoRuleFired",
                                "no rule has fired since creation" +
                                (f" (suspended: {', '.join(suspended)})" if suspended else ""), now)
        out["conditions"] = [active]
        record = None
        if fired is not None and missing is None:
            out["activeRule"] = fired.rule.name
            if spec.scaleTargetRef.kind != FEDERATED_HPA.kind and fired.rule.targetReplicas is not None:
                ref = spec.scaleTargetRef
                was = status.get("desiredReplicas")
                if was is None:  # the rule's first count: what the workload's Binding held before it
                    bound = self._binding_of(ref.kind, ns, ref.name)
                    was = (bound.get("spec") or {}).get("replicas") if bound is not None else None
                out["desiredReplicas"] = fired.rule.targetReplicas
                if status.get("desiredReplicas") != fired.rule.targetReplicas:
                    record = {"autoscaler": f"{CRON_KIND}/{ns}/{meta.get('name')}",
                              "workload": f"{ref.kind}/{ns}/{ref.name}", "from": was,
                              "to": fired.rule.targetReplicas, "reason": "cron rule",
                              "cronRule": fired.rule.name, "firedAt": rfc3339_ms(fired.at)}
        return out, record

    def _cron_target_missing(self, spec: CronFederatedHPASpec, ns: str) -> str | None:
        """Why the cron's target cannot be scaled (None: it can): its FederatedHPA does not exist, or its
        workload has no Binding."""
        ref = spec.scaleTargetRef
        if ref.kind == FEDERATED_HPA.kind:
            hpa = self.hpas.cache.get(FEDERATED_HPA.key(ref.name, ns))
            if hpa is None or (hpa.get("metadata") or {}).get("deletionTimestamp"):
                return f"FederatedHPA {ns}/{ref.name} does not exist"
            return None
        if self._binding_of(ref.kind, ns, ref.name) is None:
            return _no_binding(ref.kind, ns, ref.name)
        return None

    def _binding_of(self, kind: str, ns: str, name: str) -> dict[str, Any] | None:
        """The workload's Binding; None when there is none, or the one under its name places another
        object (names collide across namespaces: `drods.model.detection.binding_is_for`)."""
        binding: dict[str, Any] | None = self.bindings.cache.get(BINDING.key(binding_name(kind, ns, name)))
        return binding if binding_is_for(binding, kind, ns, name) else None


def _no_binding(kind: str, ns: str, name: str) -> str:
    return f"{kind} {ns}/{name} has no Binding (it does not exist, or no policy places it)"


def _execution_history(rule: CronRule, before: Mapping[str, Any], now: float, since: float,
                       frozen: Mapping[str, float], missing: str | None) -> dict[str, Any]:
    """One rule's ``executionHistories`` entry (Karmada's shape): its next and last run, and the runs
    that scaled its target or could not (newest first, as many as the rule's history limits keep). A
    suspended rule has no next run and keeps its last."""
    out: dict[str, Any] = {"ruleName": rule.name}
    if not rule.suspend and (nxt := cron.next_fire(rule, now)) is not None:
        out["nextExecutionTime"] = rfc3339_ms(nxt)
    last = cron.fired_at(rule, now, frozen)
    ok = [e for e in before.get("successfulExecutions") or [] if isinstance(e, dict)]
    failed = [e for e in before.get("failedExecutions") or [] if isinstance(e, dict)]
    if last is not None and last >= since:
        out["lastExecutionTime"] = rfc3339_ms(last)
        if not rule.suspend and frozen.get(rule.name) != last:  # a run since the last look
            run: dict[str, Any] = {"scheduleTime": rfc3339_ms(last), "executionTime": rfc3339_ms(now)}
            if missing is not None:
                failed = [{**run, "message": missing}, *failed]
            else:
                applied = {"appliedReplicas": rule.targetReplicas, "appliedMinReplicas": rule.targetMinReplicas,
                           "appliedMaxReplicas": rule.targetMaxReplicas}
                ok = [{**run, **{k: v for k, v in applied.items() if v is not None}}, *ok]
    if ok[:rule.successfulHistoryLimit]:
        out["successfulExecutions"] = ok[:rule.successfulHistoryLimit]
    if failed[:rule.failedHistoryLimit]:
        out["failedExecutions"] = failed[:rule.failedHistoryLimit]
    return out
