"""The ``Work`` kind (Karmada's Work): what one Binding wants on one member cluster, stored.

The binding controller writes one Work per (binding, target cluster), named by `work_name`, with
the final manifests (overrides applied, dependents first, ownership metadata); ``spec.hash`` names
the manifest set. Who applies it depends on the cluster's mode, not on the Work: the execution
controller for push-mode members, the member's own agent (`drods.members.works`) for pull mode.
Whoever applies it writes ``status`` — ``observedHash`` says which set the status talks about,
``observedGeneration`` which write of the spec it applied (a spec that changes A → B → A, with B's
apply unrecorded, has A's hash again but not its generation), ``applied`` whether the member holds
it — and the work-status controller (push) or the agent (pull)
keeps ``status.manifests`` current with what the member reports. So member status arrives one way:
on the Work.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from drods.model.annotations import BINDING_LABEL, CLUSTER_LABEL

# On push-mode clusters' Works: the execution controller empties the member before the Work goes.
EXECUTION_FINALIZER = "multicluster.io/execution"


@dataclass(frozen=True, slots=True, order=True)
class Ref:
    """One manifest of a Work, as the member names it."""

    api_version: str
    kind: str
    namespace: str
    name: str

    def __str__(self) -> str:
        return f"{self.api_version}/{self.kind}/{self.namespace}/{self.name}"

    @classmethod
    def parse(cls, text: str) -> Ref:
        api_version, kind, namespace, name = text.rsplit("/", 3)
        return cls(api_version, kind, namespace, name)

    @classmethod
    def of(cls, obj: Mapping[str, Any]) -> Ref:
        meta = obj.get("metadata") or {}
        return cls(str(obj.get("apiVersion")), str(obj.get("kind")), str(meta.get("namespace") or ""),
                   str(meta.get("name")))


class WorkSpec(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)

    cluster: str = Field(min_length=1)
    binding: str = Field(min_length=1)
    manifests: list[dict[str, Any]] = Field(default_factory=list)
    hash: str = ""
    # Karmada's ``suspendDispatching``: the Work is kept but not applied (the policy's ``suspension``)
    suspendDispatching: bool = False


class ManifestStatus(BaseModel):
    """One manifest as the member holds it (``status`` read back after the apply)."""

    model_config = ConfigDict(extra="forbid", strict=True)

    apiVersion: str
    kind: str
    namespace: str = ""
    name: str
    status: dict[str, Any] | None = None  # None: not in the member
    generation: int | None = None  # the member's metadata.generation (readiness needs it)
    manifestHash: str | None = None  # the hash annotation on the member's copy
    observedTime: str | None = None  # when this status was read from the member (RFC 3339)
    # the workload's measured use in this member (`drods.model.workload_usage`); None: not read
    usage: dict[str, Any] | None = None
    # "Healthy" / "Unhealthy" as the kind's InterpretHealth script says, "Unknown" when it failed (Karmada);
    # None: not interpreted
    health: str | None = None
    # a run-to-completion Job's own account of what it did (its ``multicluster.io/run-report``
    # annotation, JSON): a data mover's bytes, rate and checksums; None: none reported
    report: dict[str, Any] | None = None


class WorkStatus(BaseModel):
    """Written by whoever applies the Work (the execution controller, or a pull-mode agent)."""

    model_config = ConfigDict(extra="forbid", strict=True)

    observedHash: str = ""
    observedGeneration: int = Field(default=0, ge=0)  # the Work's metadata.generation applied (0: not said)
    applied: bool = False
    message: str = ""
    manifests: list[ManifestStatus] = Field(default_factory=list)
    # Failed applies of ``observedHash`` in a row, and whether retrying cannot help (a conflict, a
    # refused manifest): the binding is Failed after ``applyFailureThreshold`` or one permanent one.
    failures: int = Field(default=0, ge=0)
    permanent: bool = False
    appliedTime: str = ""  # RFC 3339 (ms) of the last successful apply; a later status poll sees it


def label_value(name: str) -> str:
    """A name as a label value (at most 63 characters; longer names keep a hash suffix)."""
    if len(name) <= 63:
        return name
    return f"{name[:52].rstrip('-.')}-{hashlib.sha256(name.encode()).hexdigest()[:10]}"


def work_name(binding: str, cluster: str) -> str:
    """Deterministic and collision-free (binding and cluster names may both contain dots): readable
    prefix, hash of the pair as suffix, at most 253 characters."""
    suffix = hashlib.sha256(f"{binding}\0{cluster}".encode()).hexdigest()[:10]
    head = f"{binding}.{cluster}"[:240].rstrip("-.")
    return f"{head}-{suffix}"


def work_labels(binding: str, cluster: str) -> dict[str, str]:
    return {CLUSTER_LABEL: label_value(cluster), BINDING_LABEL: label_value(binding)}


def member_status(work: dict[str, Any] | None, main: Ref | None) -> dict[str, Any] | None:
    """The member's status of ``main`` as the Work's status carries it (any kind), None if unreported."""
    if work is None or main is None:
        return None
    for m in ((work.get("status") or {}).get("manifests")) or []:
        if isinstance(m, dict) and isinstance(m.get("status"), dict) and \
                (m.get("apiVersion"), m.get("kind"), m.get("namespace") or "", m.get("name")) == \
                (main.api_version, main.kind, main.namespace, main.name):
            return dict(m["status"])
    return None
