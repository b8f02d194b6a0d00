"""The ``MigrationPlan`` kind (SPEC F3): moving a stateful workload between clusters, in phases.

A plan names a workload (in the plan's namespace), the cluster it leaves and the one it goes to,
the data hook (a Job run in a member) and a timeout per phase. The migration controller
(`drods.migration.controller`) drives it through

    Pending → PrepareTarget → CopyData → CatchUp → SwitchTraffic → RetireSource → Succeeded

and, when a phase fails or times out before the source is retired, RollingBack → RolledBack (the
target's copy removed, the source serving as before). A plan that cannot start (no such workload,
no replicas on the source, unknown target) is Failed without having changed anything.

While a plan runs it *pins* the workload's Binding (`PINNED_PLACEMENT`): the scheduler writes the
pinned placement verbatim instead of deciding one, so nothing else moves the workload meanwhile.
"""

from __future__ import annotations

import json
import time
from collections.abc import Mapping
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, model_validator

from drods.model.annotations import MIGRATION_HOOK, PINNED_PLACEMENT, TRAFFIC_WITHDRAWN

_STRICT = ConfigDict(extra="forbid", strict=True)

# ---- phases, in order; the terminal ones end the plan
PENDING = "Pending"
PREPARE_TARGET = "PrepareTarget"
COPY_DATA = "CopyData"
CATCH_UP = "CatchUp"
SWITCH_TRAFFIC = "SwitchTraffic"
RETIRE_SOURCE = "RetireSource"
SUCCEEDED = "Succeeded"
ROLLING_BACK = "RollingBack"
ROLLED_BACK = "RolledBack"
FAILED = "Failed"
FORWARD: tuple[str, ...] = (PREPARE_TARGET, COPY_DATA, CATCH_UP, SWITCH_TRAFFIC, RETIRE_SOURCE)
TERMINAL = frozenset({SUCCEEDED, ROLLED_BACK, FAILED})
Phase = Literal["Pending", "PrepareTarget", "CopyData", "CatchUp", "SwitchTraffic", "RetireSource", "Succeeded",
                "RollingBack", "RolledBack", "Failed"]
# One condition per phase: set Unknown (InProgress) when the phase starts, True when it is done.
CONDITION_OF: dict[str, str] = {PREPARE_TARGET: "TargetPrepared", COPY_DATA: "DataCopied", CATCH_UP: "CaughtUp",
                                SWITCH_TRAFFIC: "TrafficSwitched", RETIRE_SOURCE: "SourceRetired"}
ROLLED_BACK_CONDITION = "RolledBack"
FAILED_CONDITION = "Failed"

# While a plan runs: deleting it rolls the move back (or lets a retiring one finish) before it goes.
MIGRATION_FINALIZER = "multicluster.io/migration"
MANAGED_BY_MIGRATION = "migration-controller"  # the managed-by label of hook Jobs and their Bindings
# Environment of the hook's containers.
HOOK_ENV = ("MIGRATION_PLAN", "MIGRATION_RUN", "MIGRATION_SOURCE_CLUSTER", "MIGRATION_TARGET_CLUSTER",
            "MIGRATION_WORKLOAD")


class WorkloadRef(BaseModel):
    model_config = _STRICT

    apiVersion: str = Field(default="apps/v1", min_length=1)
    kind: Literal["StatefulSet", "Deployment"] = "StatefulSet"
    name: str = Field(min_length=1)


class HookCommand(BaseModel):
    """A declared command: run as a one-container Job (no retries)."""

    model_config = _STRICT

    image: str = Field(min_length=1)
    command: list[str] = Field(default_factory=list)
    args: list[str] = Field(default_factory=list)
    env: list[dict[str, Any]] = Field(default_factory=list)


class MigrationHook(BaseModel):
    """How data gets from the source to the target: a Job template or a declared command.

    ``runOn`` says which member runs it (Target by default: the new copy pulls from the old one).
    ``catchUp``: ``Run`` runs the same hook a second time for the changes made during the copy
    (``MIGRATION_RUN=catchup``), ``Wait`` waits ``catchUpWaitSeconds`` instead (e.g. while the
    replication the copy started catches up by itself)."""

    model_config = _STRICT

    runOn: Literal["Target", "Source"] = "Target"
    jobTemplate: dict[str, Any] | None = None  # batch/v1 JobTemplateSpec: {metadata?, spec}
    command: HookCommand | None = None
    catchUp: Literal["Run", "Wait"] = "Wait"
    catchUpWaitSeconds: float = Field(default=0.0, ge=0)

    @model_validator(mode="after")
    def _one_form(self) -> MigrationHook:
        if (self.jobTemplate is None) == (self.command is None):
            raise ValueError("set exactly one of jobTemplate or command")
        if self.jobTemplate is not None and not isinstance(self.jobTemplate.get("spec"), dict):
            raise ValueError("jobTemplate needs a spec (a batch/v1 JobSpec)")
        return self


class PhaseTimeouts(BaseModel):
    """Seconds each phase may take before the plan rolls back (RetireSource only reports)."""

    model_config = _STRICT

    prepareTarget: float = Field(default=600.0, gt=0)
    copyData: float = Field(default=3600.0, gt=0)
    catchUp: float = Field(default=600.0, gt=0)
    switchTraffic: float = Field(default=300.0, gt=0)
    retireSource: float = Field(default=600.0, gt=0)

    def of(self, phase: str) -> float:
        return {PREPARE_TARGET: self.prepareTarget, COPY_DATA: self.copyData, CATCH_UP: self.catchUp,
                SWITCH_TRAFFIC: self.switchTraffic, RETIRE_SOURCE: self.retireSource}.get(phase, 600.0)


class MigrationPlanSpec(BaseModel):
    model_config = _STRICT

    workloadRef: WorkloadRef
    sourceCluster: str = Field(min_length=1)
    targetCluster: str | None = Field(default=None, min_length=1)  # none: where the scheduler would put it
    hook: MigrationHook | None = None  # none: no data step (CopyData and a Run catch-up are skipped)
    trafficDrainSeconds: float = Field(default=5.0, ge=0)  # after traffic moved, before the source goes
    timeouts: PhaseTimeouts = Field(default_factory=PhaseTimeouts)
    trigger: Literal["Operator", "Drain", "Automatic"] = "Operator"
    reason: str = Field(default="", max_length=1024)

    @model_validator(mode="after")
    def _distinct(self) -> MigrationPlanSpec:
        if self.sourceCluster == self.targetCluster:
            raise ValueError("sourceCluster and targetCluster must differ")
        return self


def pinned_placement(obj: Mapping[str, Any] | None) -> dict[str, int] | None:
    """The placement a Binding object is pinned to, None when it is not pinned (or unreadable)."""
    raw = (((obj or {}).get("metadata") or {}).get("annotations") or {}).get(PINNED_PLACEMENT)
    return parse_pin(raw)


def parse_pin(raw: Any) -> dict[str, int] | None:
    if not isinstance(raw, str) or not raw:
        return None
    try:
        doc = json.loads(raw)
        placement = doc["placement"]
        return {str(c): int(n) for c, n in placement.items() if int(n) > 0}
    except (ValueError, KeyError, TypeError, AttributeError):
        return None


def pin_annotation(by: str, placement: Mapping[str, int]) -> str:
    return json.dumps({"by": by, "placement": {c: int(n) for c, n in sorted(placement.items()) if n > 0}},
                      separators=(",", ":"))


def pinned_by(obj: Mapping[str, Any] | None) -> str | None:
    raw = (((obj or {}).get("metadata") or {}).get("annotations") or {}).get(PINNED_PLACEMENT)
    try:
        return str(json.loads(raw)["by"]) if isinstance(raw, str) else None
    except (ValueError, KeyError, TypeError):
        return None


def traffic_withdrawn(obj: Mapping[str, Any] | None) -> frozenset[str]:
    """Clusters of a Binding object whose copies get no traffic (steering and the directory skip them)."""
    raw = (((obj or {}).get("metadata") or {}).get("annotations") or {}).get(TRAFFIC_WITHDRAWN) or ""
    return frozenset(c for c in str(raw).split(",") if c)


def plan_ref(namespace: str, name: str) -> str:
    return f"MigrationPlan {namespace}/{name}"


def declared_hook(workload: Mapping[str, Any]) -> dict[str, Any] | None:
    """The hook a workload declares in its ``multicluster.io/migration-hook`` annotation (YAML or JSON of
    a plan's ``spec.hook``); None without one. ValueError when it is there but unreadable."""
    raw = ((workload.get("metadata") or {}).get("annotations") or {}).get(MIGRATION_HOOK)
    if not raw:
        return None
    try:
        hook = yaml.safe_load(raw)
    except yaml.YAMLError as e:
        raise ValueError(f"annotation {MIGRATION_HOOK} is not YAML or JSON: {e}") from e
    if not isinstance(hook, dict):
        raise ValueError(f"annotation {MIGRATION_HOOK} must hold an object (a MigrationPlan's spec.hook)")
    return hook


def plan_object(kind: str, namespace: str, name: str, source: str, target: str | None, hook: Mapping[str, Any] | None,
                trigger: str, reason: str, now: float | None = None) -> dict[str, Any]:
    """A new MigrationPlan for a workload, named ``<workload>-from|to-<cluster>-<stamp>``."""
    stamp = format(int((time.time() if now is None else now) * 1000) % 36**6, "x")
    spec: dict[str, Any] = {"workloadRef": {"apiVersion": "apps/v1", "kind": kind, "name": name},
                            "sourceCluster": source, "trigger": trigger, "reason": reason[:1024]}
    if target:
        spec["targetCluster"] = target
    if hook is not None:
        spec["hook"] = dict(hook)
    where = f"to-{target[:12]}" if target else f"from-{source[:12]}"
    return {"apiVersion": "multicluster.io/v1alpha1", "kind": "MigrationPlan",
            "metadata": {"name": f"{name[:40]}-{where}-{stamp}".lower(), "namespace": namespace}, "spec": spec}
