"""The autoscaler kinds (SPEC F5, F6, H3): ``FederatedHPA`` and ``CronFederatedHPA``.

Karmada's field names: ``scaleTargetRef``, ``minReplicas``, ``maxReplicas``, ``metrics`` (the
``autoscaling/v2`` MetricSpec: ``Resource`` on cpu and memory with a ``Utilization`` or
``AverageValue`` target, ``Pods``, ``Object`` and ``External``), ``behavior`` (stabilisation
windows and rate policies, as autoscaling/v2); a cron's ``rules: [{name, schedule, targetReplicas |
targetMinReplicas | targetMaxReplicas}]``.
DRO-DS adds ``spec.feedback`` (application targets, H3).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from drods.model.quantity import quantity

_STRICT = ConfigDict(extra="forbid", strict=True)


class ScaleTargetRef(BaseModel):
    model_config = _STRICT

    apiVersion: str = Field(min_length=1)
    kind: str = Field(min_length=1)
    name: str = Field(min_length=1)


METRIC_NAME = r"^[a-zA-Z_:][a-zA-Z0-9_:]*$"  # a Prometheus metric name: what the custom metrics are read as


class MetricTarget(BaseModel):
    """autoscaling/v2 MetricTarget: ``Utilization`` (Resource only), ``Value`` (Object, External) or
    ``AverageValue`` (any source); the field of the type is required, quantities as Kubernetes writes them."""

    model_config = _STRICT

    type: Literal["Utilization", "Value", "AverageValue"] = "Utilization"
    averageUtilization: int | None = Field(default=None, ge=1, le=100)
    value: str | int | float | None = None
    averageValue: str | int | float | None = None

    @model_validator(mode="after")
    def _the_field_of_the_type(self) -> MetricTarget:
        want = {"Utilization": "averageUtilization", "Value": "value", "AverageValue": "averageValue"}[self.type]
        got = getattr(self, want)
        if got is None:
            raise ValueError(f"target type {self.type} needs {want}")
        if want != "averageUtilization":
            try:
                amount = quantity(got)
            except (ValueError, ArithmeticError) as e:
                raise ValueError(f"{want}: {got!r} is not a Kubernetes quantity") from e
            if amount <= 0:
                raise ValueError(f"{want} must be positive")
        return self

    def amount(self) -> float:
        """The Value or AverageValue target as a number (cores for cpu, bytes for memory)."""
        return float(quantity(self.value if self.type == "Value" else self.averageValue))


class ResourceMetricSource(BaseModel):
    model_config = _STRICT

    name: Literal["cpu", "memory"]
    target: MetricTarget

    @model_validator(mode="after")
    def _no_value(self) -> ResourceMetricSource:
        if self.target.type == "Value":
            raise ValueError("a Resource metric's target is Utilization or AverageValue")
        return self


class LabelSelectorRequirement(BaseModel):
    model_config = _STRICT

    key: str = Field(pattern=r"^[a-zA-Z_][a-zA-Z0-9_]*$")  # a Prometheus label name
    operator: Literal["In", "NotIn", "Exists", "DoesNotExist"]
    values: list[str] = Field(default_factory=list)


class MetricSelector(BaseModel):
    """The series a custom metric is read from: label equalities and set expressions (PromQL matchers)."""

    model_config = _STRICT

    matchLabels: dict[str, str] = Field(default_factory=dict)
    matchExpressions: list[LabelSelectorRequirement] = Field(default_factory=list)


class MetricIdentifier(BaseModel):
    model_config = _STRICT

    name: str = Field(pattern=METRIC_NAME, max_length=200)
    selector: MetricSelector | None = None


class CrossVersionObjectReference(BaseModel):
    model_config = _STRICT

    apiVersion: str | None = None
    kind: str = Field(min_length=1)
    name: str = Field(min_length=1)


class PodsMetricSource(BaseModel):
    """A per-pod metric of the workload's pods, averaged (``AverageValue``)."""

    model_config = _STRICT

    metric: MetricIdentifier
    target: MetricTarget

    @model_validator(mode="after")
    def _average(self) -> PodsMetricSource:
        if self.target.type != "AverageValue":
            raise ValueError("a Pods metric's target is AverageValue")
        return self


class ExternalMetricSource(BaseModel):
    """A metric from outside the cluster (a queue's length)."""

    model_config = _STRICT

    metric: MetricIdentifier
    target: MetricTarget

    @model_validator(mode="after")
    def _value(self) -> ExternalMetricSource:
        if self.target.type == "Utilization":
            raise ValueError(f"an {'Object' if hasattr(self, 'describedObject') else 'External'} metric's "
                             "target is Value or AverageValue")
        return self


class ObjectMetricSource(ExternalMetricSource):
    """A metric describing one object in the workload's namespace (an Ingress's request rate)."""

    describedObject: CrossVersionObjectReference


class MetricSpec(BaseModel):
    """autoscaling/v2 MetricSpec: ``Resource`` metrics from the workload's pods' measured use, ``Pods`` /
    ``Object`` / ``External`` ones from Prometheus (`drods.autoscaling.custom_metrics`); the source
    named by ``type`` is required. ``ContainerResource`` is refused, not ignored."""

    model_config = _STRICT

    type: Literal["Resource", "Pods", "Object", "External"]
    resource: ResourceMetricSource | None = None
    pods: PodsMetricSource | None = None
    object: ObjectMetricSource | None = None
    external: ExternalMetricSource | None = None

    @model_validator(mode="after")
    def _one_source(self) -> MetricSpec:
        field = self.type.lower()
        if getattr(self, field) is None:
            raise ValueError(f"a {self.type} metric needs {field}")
        others = [f for f in ("resource", "pods", "object", "external") if f != field and getattr(self, f) is not None]
        if others:
            raise ValueError(f"a {self.type} metric sets only {field}, not {', '.join(others)}")
        return self


class ScalingPolicy(BaseModel):
    model_config = _STRICT

    type: Literal["Pods", "Percent"]
    value: int = Field(ge=1)
    periodSeconds: int = Field(ge=1, le=1800)


class ScalingRules(BaseModel):
    model_config = _STRICT

    stabilizationWindowSeconds: int | None = Field(default=None, ge=0, le=3600)
    selectPolicy: Literal["Max", "Min", "Disabled"] = "Max"
    policies: list[ScalingPolicy] | None = None


class Behavior(BaseModel):
    model_config = _STRICT

    scaleUp: ScalingRules | None = None
    scaleDown: ScalingRules | None = None


class FeedbackQueries(BaseModel):
    """PromQL reading how the application does (H3), instead of ``PUT /api/v1/feedback``: each an
    instant query answering one number (latency in ms, throughput, error rate 0..1)."""

    model_config = _STRICT

    latencyP99Ms: str | None = Field(default=None, min_length=1, max_length=4000)
    throughput: str | None = Field(default=None, min_length=1, max_length=4000)
    errorRate: str | None = Field(default=None, min_length=1, max_length=4000)

    @model_validator(mode="after")
    def _some(self) -> FeedbackQueries:
        if self.latencyP99Ms is None and self.throughput is None and self.errorRate is None:
            raise ValueError("set at least one of latencyP99Ms, throughput, errorRate")
        return self


class FeedbackTargets(BaseModel):
    """What the application must achieve (H3); at least one target."""

    model_config = _STRICT

    latencyP99Ms: float | None = Field(default=None, gt=0)
    minThroughput: float | None = Field(default=None, gt=0)
    maxErrorRate: float | None = Field(default=None, gt=0, le=1)
    promql: FeedbackQueries | None = None  # read from Prometheus (autoscaling.feedback.prometheusUrl)

    @model_validator(mode="after")
    def _some(self) -> FeedbackTargets:
        if self.latencyP99Ms is None and self.minThroughput is None and self.maxErrorRate is None:
            raise ValueError("set at least one of latencyP99Ms, minThroughput, maxErrorRate")
        return self


DEFAULT_CPU_UTILISATION = 80  # a FederatedHPA without metrics (or feedback) scales on this, as Karmada's


class FederatedHPASpec(BaseModel):
    model_config = _STRICT

    scaleTargetRef: ScaleTargetRef
    minReplicas: int = Field(default=1, ge=1)
    maxReplicas: int = Field(ge=1)
    metrics: list[MetricSpec] = Field(default_factory=list)
    behavior: Behavior | None = None
    feedback: FeedbackTargets | None = None

    @model_validator(mode="after")
    def _bounds(self) -> FederatedHPASpec:
        if self.minReplicas > self.maxReplicas:
            raise ValueError("minReplicas must not exceed maxReplicas")
        self.minReplicas = self.minReplicas  # stored as defaulted (Karmada's webhook writes 1)
        if not self.metrics and self.feedback is None:
            # Karmada's default: 80 % average CPU utilisation
            self.metrics = [MetricSpec(type="Resource", resource=ResourceMetricSource(
                name="cpu", target=MetricTarget(type="Utilization", averageUtilization=DEFAULT_CPU_UTILISATION)))]
        return self


class CronRule(BaseModel):
    model_config = _STRICT

    name: str = Field(min_length=1)
    schedule: str = Field(min_length=1)
    targetReplicas: int | None = Field(default=None, ge=0)
    targetMinReplicas: int | None = Field(default=None, ge=1)
    targetMaxReplicas: int | None = Field(default=None, ge=1)
    suspend: bool = False
    timeZone: str | None = None
    # Karmada's bounds on the executions kept in status (executionHistories[].successful/failedExecutions)
    successfulHistoryLimit: int = Field(default=3, ge=0, le=32)
    failedHistoryLimit: int = Field(default=3, ge=0, le=32)

    @field_validator("schedule")
    @classmethod
    def _cron(cls, v: str) -> str:
        from croniter import CroniterBadDateError, croniter  # only where autoscalers are validated

        if not croniter.is_valid(v) or len(v.split()) != 5:
            raise ValueError(f"{v!r} is not a cron expression (five fields: minute hour day month weekday)")
        try:
            croniter(v, 0.0).get_next(float)
        except CroniterBadDateError as e:
            raise ValueError(f"{v!r} never fires") from e
        return v

    @model_validator(mode="after")
    def _one_target(self) -> CronRule:
        self.successfulHistoryLimit, self.failedHistoryLimit = self.successfulHistoryLimit, self.failedHistoryLimit
        if self.targetReplicas is None and self.targetMinReplicas is None and self.targetMaxReplicas is None:
            raise ValueError("set targetReplicas, targetMinReplicas or targetMaxReplicas")
        if self.targetMinReplicas is not None and self.targetMaxReplicas is not None and \
                self.targetMinReplicas > self.targetMaxReplicas:
            raise ValueError(f"targetMinReplicas ({self.targetMinReplicas}) must not exceed targetMaxReplicas "
                             f"({self.targetMaxReplicas})")
        return self

    @field_validator("timeZone")
    @classmethod
    def _zone(cls, v: str | None) -> str | None:
        from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

        if v is not None:
            try:
                ZoneInfo(v)
            except (ZoneInfoNotFoundError, ValueError) as e:
                raise ValueError(f"timeZone {v!r} is not an IANA time zone (e.g. Asia/Shanghai)") from e
        return v


class CronFederatedHPASpec(BaseModel):
    model_config = _STRICT

    scaleTargetRef: ScaleTargetRef
    rules: list[CronRule] = Field(min_length=1)

    @model_validator(mode="after")
    def _rules_fit_target(self) -> CronFederatedHPASpec:
        names = [r.name for r in self.rules]
        if len(set(names)) != len(names):
            raise ValueError("rule names must be unique")
        on_hpa = self.scaleTargetRef.kind == "FederatedHPA"
        for r in self.rules:
            if on_hpa and r.targetReplicas is not None:
                raise ValueError(f"rule {r.name}: a FederatedHPA target takes targetMinReplicas/targetMaxReplicas")
            if not on_hpa and r.targetReplicas is None:
                raise ValueError(f"rule {r.name}: a workload target takes targetReplicas")
        return self


# ---------------------------------------------------------------------- who owns a workload's replicas
# Read by the resource detector (which writes the Binding) and the autoscaler (which decides), so
# both agree on one owner without talking to each other.
HPA_KIND = "FederatedHPA"
CRON_KIND = "CronFederatedHPA"


def scaled_workload(obj: Mapping[str, Any]) -> tuple[str, str, str, str] | None:
    """(apiVersion, kind, namespace, name) of the workload an autoscaler owns the replicas of; None
    for a cron that drives a FederatedHPA (an input of that one) or an object being deleted."""
    meta = obj.get("metadata") or {}
    ref = (obj.get("spec") or {}).get("scaleTargetRef") or {}
    if meta.get("deletionTimestamp") or not isinstance(ref, dict) or ref.get("kind") in (None, HPA_KIND):
        return None
    return (str(ref.get("apiVersion")), str(ref["kind"]), meta.get("namespace") or "default", str(ref.get("name")))


def owner(autoscalers: Iterable[Mapping[str, Any]], workload: tuple[str, str, str, str]) -> Mapping[str, Any] | None:
    """The one autoscaler of ``workload``: the oldest (creation time, kind, name) that targets it.
    Admission refuses a second; this rule settles a race between two creations."""
    best: Mapping[str, Any] | None = None
    best_order: tuple[str, str, str] | None = None
    for a in autoscalers:
        if scaled_workload(a) != workload:
            continue
        meta = a.get("metadata") or {}
        order = (str(meta.get("creationTimestamp") or ""), str(a.get("kind")), str(meta.get("name")))
        if best_order is None or order < best_order:
            best, best_order = a, order
    return best


def owned_replicas(autoscalers: Iterable[Mapping[str, Any]], workload: tuple[str, str, str, str]) -> int | None:
    """The total replicas the workload's autoscaler decided (``status.desiredReplicas``), if any."""
    a = owner(autoscalers, workload)
    v = ((a or {}).get("status") or {}).get("desiredReplicas")
    return v if isinstance(v, int) and not isinstance(v, bool) and v >= 0 else None


def owned_weights(autoscalers: Iterable[Mapping[str, Any]],
                  workload: tuple[str, str, str, str]) -> tuple[dict[str, float], str | None]:
    """The per-cluster weights the workload's autoscaler set from feedback (``status.clusterWeights``)
    and when they last moved (``status.clusterWeightsTime``)."""
    status = (owner(autoscalers, workload) or {}).get("status") or {}
    w = status.get("clusterWeights")
    if not isinstance(w, dict):
        return {}, None
    at = status.get("clusterWeightsTime")
    return ({str(c): float(v) for c, v in w.items() if isinstance(v, int | float) and not isinstance(v, bool)
             and v > 0}, at if isinstance(at, str) else None)


class OwnerIndex:
    """`owner` kept up to date from informer changes: workload → its autoscalers, so finding a
    workload's owner costs what that workload has, not a scan of every autoscaler."""

    def __init__(self) -> None:
        self._where: dict[str, tuple[str, str, str, str]] = {}
        self._by_workload: dict[tuple[str, str, str, str], dict[str, Mapping[str, Any]]] = {}

    def update(self, key: str, obj: Mapping[str, Any] | None) -> None:
        old = self._where.pop(key, None)
        if old is not None:
            entries = self._by_workload.get(old, {})
            entries.pop(key, None)
            if not entries:
                self._by_workload.pop(old, None)
        target = scaled_workload(obj) if obj is not None else None
        if obj is not None and target is not None:
            self._where[key] = target
            self._by_workload.setdefault(target, {})[key] = obj

    def owner(self, workload: tuple[str, str, str, str]) -> Mapping[str, Any] | None:
        return owner(self._by_workload.get(workload, {}).values(), workload)

    def owned_replicas(self, workload: tuple[str, str, str, str]) -> int | None:
        return owned_replicas(self._by_workload.get(workload, {}).values(), workload)

    def owned_weights(self, workload: tuple[str, str, str, str]) -> tuple[dict[str, float], str | None]:
        return owned_weights(self._by_workload.get(workload, {}).values(), workload)
