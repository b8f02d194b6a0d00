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
from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from drods.model.annotations import MIGRATION_HOOK, PINNED_PLACEMENT, TRAFFIC_WITHDRAWN
from drods.model.meta import check_name

_STRICT = ConfigDict(extra="forbid", strict=True)
COPY_IMAGE = "registry.example/volume-copy-rsync:1"  # the documented rsync transport's client

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


class LagProbe(BaseModel):
    """A readiness-style check run in the target (a one-container Job): it exits 0 when the target is
    at most ``MIGRATION_MAX_LAG_SECONDS`` behind the source, non-zero otherwise (run again after
    ``periodSeconds``)."""

    model_config = _STRICT

    image: str = Field(min_length=1)
    command: list[str] = Field(default_factory=list)
    args: list[str] = Field(default_factory=list)
    env: list[dict[str, Any]] = Field(default_factory=list)
    periodSeconds: float = Field(default=5.0, gt=0)


class CatchUpCheck(BaseModel):
    """CatchUp ends when the probe says the target lags the source by at most ``maxLagSeconds``."""

    model_config = _STRICT

    maxLagSeconds: float = Field(ge=0)
    probe: LagProbe


class DataStep(BaseModel):
    """How the workload's data moves (``spec.data``): the built-in ``VolumeCopy`` mover or a ``Hook``.

    ``VolumeCopy`` runs, for each PersistentVolumeClaim of the workload, a copy Job in the target
    (``image``, the transport's client) that mounts the target's claim at ``/data`` and pulls the
    source's claim through ``transport``. ``Hook`` runs ``hook`` with the workload's claims mounted
    (``mountWorkloadVolumes``)."""

    model_config = _STRICT

    mover: Literal["VolumeCopy", "Hook"]
    hook: MigrationHook | None = None
    mountWorkloadVolumes: bool = True
    transport: Literal["Rsync"] = "Rsync"
    image: str | None = Field(default=None, min_length=1)
    catchUp: CatchUpCheck | None = None

    @model_validator(mode="after")
    def _mover_needs(self) -> DataStep:
        if self.mover == "Hook" and self.hook is None:
            raise ValueError("mover Hook needs data.hook (a jobTemplate or a command)")
        if self.mover == "VolumeCopy" and self.hook is not None:
            raise ValueError("mover VolumeCopy takes no data.hook (use mover: Hook)")
        if self.mover == "VolumeCopy" and self.image is None:
            raise ValueError("mover VolumeCopy needs data.image (the transport's client image)")
        return self


class SwitchSpec(BaseModel):
    """The write freeze before the switch: the source is fenced (its traffic withdrawn) for at most
    ``freezeSeconds`` while the final sync runs; 0 switches without a final sync."""

    model_config = _STRICT

    freezeSeconds: float = Field(default=0.0, ge=0)
    fence: Literal["Traffic"] = "Traffic"


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
    hook: MigrationHook | None = None  # the same as data: {mover: Hook, hook: …}
    data: DataStep | Literal["None"] | None = None  # "None": move without the data, said explicitly
    switch: SwitchSpec = Field(default_factory=SwitchSpec)
    trafficDrainSeconds: float = Field(default=5.0, ge=0)  # after traffic moved, before the source goes
    timeouts: PhaseTimeouts = Field(default_factory=PhaseTimeouts)
    trigger: Literal["Operator", "Drain", "Automatic"] = "Operator"
    reason: str = Field(default="", max_length=1024)

    @field_validator("sourceCluster", "targetCluster")
    @classmethod
    def _cluster_name(cls, v: str | None) -> str | None:
        return v if v is None else check_name(v)  # a name no Cluster can have is refused, not failed later

    @model_validator(mode="after")
    def _distinct(self) -> MigrationPlanSpec:
        if self.sourceCluster == self.targetCluster:
            raise ValueError("targetCluster: must differ from sourceCluster")
        if self.hook is not None and self.data is not None:
            raise ValueError("set spec.data or spec.hook, not both (spec.hook is spec.data with mover Hook)")
        if self.switch.freezeSeconds > 0 and self.data_step() is None:
            raise ValueError("switch.freezeSeconds needs a data step to run the final sync")
        return self

    def data_step(self) -> DataStep | None:
        """The data step the plan runs; None when it has none (undeclared, or ``data: None``)."""
        if isinstance(self.data, DataStep):
            return self.data
        if self.hook is not None:
            return DataStep(mover="Hook", hook=self.hook)
        return None

    @property
    def data_declared_none(self) -> bool:
        return self.data == "None"


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


NO_DATA: Literal["None"] = "None"  # a data step declared absent: the workload moves without its data, said explicitly


class MigrationSettings(BaseModel):
    """The ``migration`` section: how a drain or an evacuation moves a workload that keeps data in
    PersistentVolumeClaims and declares no data step of its own — by a MigrationPlan with the
    built-in ``VolumeCopy`` mover of ``volumeCopyImage``, or (null) not at all: it is refused."""

    model_config = ConfigDict(extra="forbid")

    volumeCopyImage: str | None = Field(default=COPY_IMAGE, min_length=1)
    # the write freeze of such a plan: the source fenced while the final sync runs, so no write is lost
    freezeSeconds: float = Field(default=60.0, gt=0)


def declared_hook(workload: Mapping[str, Any]) -> dict[str, Any] | Literal["None"] | None:
    """The data step a workload declares in its ``multicluster.io/migration-hook`` annotation: YAML or
    JSON of a plan's ``spec.hook``, or of a ``spec.data`` (it then names a ``mover``), or ``None`` —
    move it without its data; None without the annotation. ValueError when it is there but unreadable."""
    raw = ((workload.get("metadata") or {}).get("annotations") or {}).get(MIGRATION_HOOK)
    if not raw:
        return None
    if raw.strip() == NO_DATA:
        return NO_DATA
    try:
        hook = yaml.safe_load(raw)
    except yaml.YAMLError as e:
        raise ValueError(f"annotation {MIGRATION_HOOK} is not YAML or JSON: {e}") from e
    if not isinstance(hook, dict):
        raise ValueError(f"annotation {MIGRATION_HOOK} must hold an object (a MigrationPlan's spec.hook or "
                         f"spec.data) or {NO_DATA}")
    return hook


def plan_object(kind: str, namespace: str, name: str, source: str, target: str | None,
                hook: Mapping[str, Any] | Literal["None"] | None, trigger: str, reason: str,
                now: float | None = None, freeze_seconds: float = 0.0) -> dict[str, Any]:
    """A new MigrationPlan for a workload, named ``<workload>-from|to-<cluster>-<stamp>``."""
    stamp = format(int((time.time() if now is None else now) * 1000) % 36**6, "x")
    spec: dict[str, Any] = {"workloadRef": {"apiVersion": "apps/v1", "kind": kind, "name": name},
                            "sourceCluster": source, "trigger": trigger, "reason": reason[:1024]}
    if target:
        spec["targetCluster"] = target
    if freeze_seconds > 0:
        spec["switch"] = {"freezeSeconds": freeze_seconds}
    if isinstance(hook, str):
        spec["data"] = NO_DATA
    elif hook is not None:  # a declared data step (it names a mover) or a plain hook
        spec["data" if "mover" in hook else "hook"] = dict(hook)
    where = f"to-{target[:12]}" if target else f"from-{source[:12]}"
    return {"apiVersion": "multicluster.io/v1alpha1", "kind": "MigrationPlan",
            "metadata": {"name": f"{name[:40]}-{where}-{stamp}".lower(), "namespace": namespace}, "spec": spec}
