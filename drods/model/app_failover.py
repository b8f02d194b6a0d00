"""Karmada's application failover (``spec.failover.application`` of a propagation policy).

A copy of a workload that stays unhealthy in one member for longer than ``decisionConditions.
tolerationSeconds`` is moved off that cluster: the Binding gets a graceful eviction task
(``spec.gracefulEvictionTasks[]``, Karmada's name and fields) for the cluster, the scheduler leaves
every cluster with such a task out of the binding's placement (`without_evicted`), and the binding
controller removes the old copy as ``purgeMode`` says (`purge_due`). ``statePreservation`` rules read
values from the failed copy's status (Kubernetes JSONPath, relative to ``status`` as in Karmada) and
the new copies carry them as labels (``preservedLabelState``).

The task keeps the cluster out for this binding while the move is under way. As Karmada's
graceful eviction controller does, it goes once the new copies are healthy or its grace period has
passed (`task_done`) — here also only once the old copy is gone — and the cluster may be chosen
again by a later decision. Its preserved state stays: it moves to ``spec.preservedLabelState``, so
the copies keep their labels after the task. A ``purgeMode: Never`` task stays until someone removes
it, which is also how its old copy goes.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any, Literal, TypeVar

from pydantic import BaseModel, ConfigDict, Field, ValidationInfo, field_validator

from drods.model.placement import ClusterAffinity, Placement, qualified_name_problem

# Karmada 1.19 names; Immediately / Graciously are its older (deprecated) spellings, same meaning.
PurgeMode = Literal["Directly", "Gracefully", "Never", "Immediately", "Graciously"]
IMMEDIATE = frozenset({"Directly", "Immediately"})
GRACEFUL = frozenset({"Gracefully", "Graciously"})
DEFAULT_TOLERATION_SECONDS = 300
DEFAULT_GRACE_PERIOD_SECONDS = 600
PRODUCER = "application-failover"
REASON = "ApplicationFailure"
TAINT_PRODUCER = "TaintManager"  # Karmada's names for a move off a failed or NoExecute-tainted cluster
TAINT_REASON = "TaintUntolerated"
Obj = dict[str, Any]


class DecisionConditions(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)

    tolerationSeconds: int = Field(default=DEFAULT_TOLERATION_SECONDS, ge=0)


class StatePreservationRule(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)

    aliasLabelName: str = Field(min_length=1, max_length=317)
    jsonPath: str = Field(min_length=1)

    @field_validator("aliasLabelName")
    @classmethod
    def _label_name(cls, v: str) -> str:
        # the new copies carry the value under this label (Karmada's webhook checks it is a label name)
        if (problem := qualified_name_problem(v)) is not None:
            raise ValueError(f"{problem} (it becomes a label key on the new copies)")
        return v

    @field_validator("jsonPath")
    @classmethod
    def _one_value(cls, v: str) -> str:
        parse_json_path(v)  # a filter, wildcard or range is refused when the policy is written
        return v


class StatePreservation(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)

    rules: list[StatePreservationRule] = Field(min_length=1)


class ApplicationFailoverBehavior(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)

    decisionConditions: DecisionConditions = Field(default_factory=DecisionConditions)
    purgeMode: PurgeMode = "Gracefully"
    # how long a Graciously purge waits for the new copy to be healthy before removing the old one
    gracePeriodSeconds: int | None = Field(default=None, gt=0)
    statePreservation: StatePreservation | None = None

    @field_validator("gracePeriodSeconds")
    @classmethod
    def _graceful_only(cls, v: int | None, info: ValidationInfo) -> int | None:
        # Karmada's webhook: the grace period means something only to a graceful purge, so another
        # mode with one is refused rather than silently ignored (Gracefully without one: 600 s, as
        # Karmada's mutating webhook defaults it)
        mode = info.data.get("purgeMode")
        if v is not None and mode is not None and mode not in GRACEFUL:
            raise ValueError(f"only takes effect when purgeMode is Gracefully, not {mode}; remove it or "
                             "set purgeMode: Gracefully")
        return v

    def grace_seconds(self) -> int:
        return self.gracePeriodSeconds or DEFAULT_GRACE_PERIOD_SECONDS


class ClusterFailoverBehavior(BaseModel):
    """``failover.cluster`` (Karmada 1.15+): when cluster failover (S11: NotReady past the toleration)
    or a NoExecute taint the binding does not tolerate moves it, the move is a graceful eviction task
    (producer ``TaintManager``, reason ``TaintUntolerated``) whose ``purgeMode`` says how the old copy
    goes and whose ``preservedLabelState`` carries ``statePreservation``'s values to the new copies.
    The toleration still comes from the placement's ``clusterTolerations``."""

    model_config = ConfigDict(extra="forbid", strict=True)

    purgeMode: Literal["Directly", "Gracefully"] = "Gracefully"
    statePreservation: StatePreservation | None = None


class FailoverBehavior(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)

    application: ApplicationFailoverBehavior | None = None
    cluster: ClusterFailoverBehavior | None = None


class GracefulEvictionTask(BaseModel):
    """One cluster a binding was moved off (Karmada's ``gracefulEvictionTasks[]`` entry)."""

    model_config = ConfigDict(extra="forbid", strict=True)

    fromCluster: str = Field(min_length=1)
    replicas: int | None = Field(default=None, ge=0)
    reason: str = REASON
    message: str = ""
    producer: str = PRODUCER
    purgeMode: PurgeMode = "Gracefully"
    gracePeriodSeconds: int | None = Field(default=None, gt=0)
    preservedLabelState: dict[str, str] = Field(default_factory=dict)
    clustersBeforeFailover: list[str] = Field(default_factory=list)
    creationTimestamp: str | None = None


# ---------------------------------------------------------------- health of a member's copy
Health = Literal["Healthy", "Unhealthy", "Unknown"]


def copy_health(entry: Mapping[str, Any]) -> Health:
    """A copy's health from its ``status.clusters[]`` entry, as Karmada's default interpreters judge
    it: a workload with replicas is healthy when all its replicas are available and no ``Available``
    condition is False; a Job is unhealthy once ``Failed``. Unknown (never failed over) until the
    member has reported, or while the copy is not applied yet."""
    if not entry.get("applied") or entry.get("removing"):
        return "Unknown"
    conditions = {c.get("type"): c.get("status") for c in entry.get("conditions") or [] if isinstance(c, dict)}
    if conditions.get("Failed") == "True":
        return "Unhealthy"
    if entry.get("complete"):
        return "Healthy"
    available = entry.get("availableReplicas")
    if available is None:
        return "Unknown"
    if conditions.get("Available") == "False":
        return "Unhealthy"
    return "Healthy" if int(available) >= int(entry.get("replicas") or 0) else "Unhealthy"


# ---------------------------------------------------------------- Kubernetes JSONPath (field paths)
_STEP = re.compile(r"\.([A-Za-z0-9_\-]+)|\[(\d+)\]|\['([^']*)'\]|\[\"([^\"]*)\"\]")


class JsonPathError(ValueError):
    pass


def parse_json_path(path: str) -> list[str | int]:
    """``{.jobStatus.id}`` / ``{.items[0].name}`` → its steps; raises JsonPathError on other forms
    (filters, wildcards and ranges select several values, never one label)."""
    text = path.strip()
    if text.startswith("{") and text.endswith("}"):
        text = text[1:-1].strip()
    if text.startswith("$"):
        text = text[1:]
    steps: list[str | int] = []
    pos = 0
    while pos < len(text):
        m = _STEP.match(text, pos)
        if m is None:
            raise JsonPathError(f"{path!r}: only field and index steps ({{.a.b[0]}}) are supported")
        name, index, q1, q2 = m.groups()
        steps.append(int(index) if index is not None else (name or q1 or q2 or ""))
        pos = m.end()
    if not steps:
        raise JsonPathError(f"{path!r} names no field")
    return steps


def read_json_path(doc: Any, path: str) -> Any:
    """The value at ``path`` in ``doc`` (None when absent)."""
    node = doc
    for step in parse_json_path(path):
        if isinstance(step, int):
            node = node[step] if isinstance(node, list) and step < len(node) else None
        else:
            node = node.get(step) if isinstance(node, dict) else None
        if node is None:
            return None
    return node


def preserved_labels(rules: list[StatePreservationRule], status: Mapping[str, Any] | None) -> dict[str, str]:
    """Label → value of each rule whose JSONPath finds a value in the failed copy's ``status``
    (Karmada reads from ``status``: ``{.replicas}``, not ``{.status.replicas}``)."""
    out: dict[str, str] = {}
    for r in rules:
        try:
            value = read_json_path(dict(status or {}), r.jsonPath)
        except JsonPathError:  # stored before such paths were refused: no label, no failed move
            continue
        if value is None or isinstance(value, (dict, list)):
            continue
        out[r.aliasLabelName] = str(value).lower() if isinstance(value, bool) else str(value)
    return out


# ---------------------------------------------------------------- what the other controllers read
def eviction_tasks(binding_spec: Mapping[str, Any]) -> list[GracefulEvictionTask]:
    out = []
    for raw in binding_spec.get("gracefulEvictionTasks") or []:
        try:
            out.append(GracefulEvictionTask.model_validate(raw))
        except ValueError:
            continue
    return out


def label_state(binding_spec: Mapping[str, Any]) -> dict[str, str]:
    """The labels the workload's new copies carry: the state kept from finished moves, then every
    task's preserved state (later tasks win)."""
    kept = binding_spec.get("preservedLabelState")
    out = {str(k): str(v) for k, v in kept.items()} if isinstance(kept, dict) else {}
    for t in eviction_tasks(binding_spec):
        out.update(t.preservedLabelState)
    return out


def task_done(task: GracefulEvictionTask, now: float, created: float | None, *, new_copies_healthy: bool,
              old_copy_gone: bool) -> bool:
    """Whether the move ``task`` records is over: its old copy is gone and the new copies are healthy
    or its grace period has passed (Karmada's graceful eviction controller); never for ``Never``."""
    if task.purgeMode == "Never" or not old_copy_gone:
        return False
    grace = task.gracePeriodSeconds or DEFAULT_GRACE_PERIOD_SECONDS
    return new_copies_healthy or (created is not None and now - created >= grace)


def purge_due(task: GracefulEvictionTask, now: float, created: float | None, new_copies_healthy: bool) -> bool:
    """Whether the old copy on ``task.fromCluster`` goes now: at once (Directly / Immediately), once
    the new copies are healthy or the grace period has passed (Gracefully / Graciously), or never
    while the task is there (Never)."""
    if task.purgeMode in IMMEDIATE:
        return True
    if task.purgeMode == "Never":
        return False
    grace = task.gracePeriodSeconds or DEFAULT_GRACE_PERIOD_SECONDS
    return new_copies_healthy or (created is not None and now - created >= grace)


def without_evicted(placement: Placement, evicted: list[str]) -> Placement:
    """``placement`` with the clusters the binding was evicted from excluded (every affinity term,
    overflow tiers included), so no decision places it there again."""
    if not evicted:
        return placement
    out = placement.model_copy(deep=True)
    terms: list[ClusterAffinity] = list(out.clusterAffinities)
    if not terms:
        if out.clusterAffinity is None:
            out.clusterAffinity = ClusterAffinity()
        terms = [out.clusterAffinity]
    for term in terms:
        for group in [term, *getattr(term, "overflowAffinities", [])]:
            group.exclude = [*group.exclude, *(c for c in evicted if c not in group.exclude)]
    return out


B = TypeVar("B", bound=BaseModel)


def declared_behavior(binding: Mapping[str, Any], section: Literal["application", "cluster"],
                      model: type[B]) -> B | None:
    """The binding's ``failover.<section>`` as ``model``; None when absent or unreadable."""
    raw = ((binding.get("spec") or {}).get("failover") or {}).get(section)
    if not isinstance(raw, dict):
        return None
    try:
        return model.model_validate(raw)
    except ValueError:
        return None


def eviction_task(binding: Mapping[str, Any], cluster: str, created: str, state: dict[str, str],
                  **fields: Any) -> GracefulEvictionTask:
    """A task moving ``binding`` off ``cluster``, with the replicas it had there and the clusters before
    the move; ``fields`` are the task's own (message, purgeMode, reason, producer …)."""
    placed = [t for t in (binding.get("status") or {}).get("placement") or [] if isinstance(t, dict)]
    return GracefulEvictionTask(
        fromCluster=cluster, preservedLabelState=state, creationTimestamp=created,
        replicas=next((int(t.get("replicas") or 0) for t in placed if t.get("cluster") == cluster), None),
        clustersBeforeFailover=sorted({str(t.get("cluster")) for t in placed}), **fields)
