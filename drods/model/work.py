"""The ``Work`` kind (M2): what one Binding wants on one pull-mode cluster, for that cluster's agent.

A pull-mode member cannot be reached from the control plane, so propagation writes the exact
manifests it would have applied (overrides, dependents, ownership metadata) into a Work; the
member's agent (`drods.members.works`) applies them and writes ``status`` back. One Work per
(binding, cluster), named by `work_name`; ``spec.hash`` names the manifest set, and the agent's
``status.observedHash`` says which set the member holds.
"""

from __future__ import annotations

import hashlib
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

CLUSTER_LABEL = "multicluster.io/cluster"
BINDING_LABEL = "multicluster.io/binding"


class WorkSpec(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)

    cluster: str = Field(min_length=1)
    binding: str = Field(min_length=1)
    manifests: list[dict[str, Any]] = Field(default_factory=list)
    hash: str = ""


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


class WorkStatus(BaseModel):
    """Written by the agent only."""

    model_config = ConfigDict(extra="forbid", strict=True)

    observedHash: str = ""
    applied: bool = False
    message: str = ""
    manifests: list[ManifestStatus] = Field(default_factory=list)


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
