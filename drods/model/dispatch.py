"""How a Binding's Works reach the members: Karmada's ``conflictResolution``, ``suspension`` and
``preserveResourcesOnDeletion``.

A Karmada propagation policy says both; the detector copies them into the Binding it makes, the
binding controller marks each Work (`WORK_SUSPENDED` on a suspended cluster's Work, `CONFLICT_ANNOTATION`
on the manifests of an ``Overwrite`` policy), and whoever applies Works (the execution controller,
a pull-mode agent) reads the marks: a suspended Work is not applied, and an object a member already
has that DRO-DS did not create is adopted only when its manifest says ``overwrite``. A manifest of a
``preserveResourcesOnDeletion`` policy says ``PRESERVE_ANNOTATION``; the member's copy carries it, and
whoever would delete the copy (its Work deleted, or pruned) releases it instead — DRO-DS's ownership
labels and annotations removed, the object left running — as Karmada's execution controller does.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from drods.model.annotations import OWNERSHIP_ANNOTATIONS, OWNERSHIP_LABELS

ConflictResolution = Literal["Abort", "Overwrite"]

# On a manifest: "overwrite" lets the applier adopt an object the member already has (Karmada's
# ``work.karmada.io/conflict-resolution`` annotation, the same meaning).
CONFLICT_ANNOTATION = "multicluster.io/conflict-resolution"


# On a manifest, and so on the member's copy: "true" keeps the copy when DRO-DS would delete it (Karmada's
# ``preserveResourcesOnDeletion``); it is released instead (`release_patch`)
PRESERVE_ANNOTATION = "multicluster.io/preserve-on-deletion"


class SuspendClusters(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)

    clusterNames: list[str] = Field(default_factory=list)


class Suspension(BaseModel):
    """Karmada's ``suspension``: stop dispatching to every cluster, or to the named ones."""

    model_config = ConfigDict(extra="forbid", strict=True)

    dispatching: bool | None = None
    dispatchingOnClusters: SuspendClusters | None = None

    @model_validator(mode="after")
    def _one_form(self) -> Suspension:
        if self.dispatching is False:
            raise ValueError("dispatching only accepts true (leave it out to dispatch)")
        if self.dispatching and self.dispatchingOnClusters is not None:
            raise ValueError("dispatching and dispatchingOnClusters are mutually exclusive")
        return self

    def suspends(self, cluster: str) -> bool:
        if self.dispatching:
            return True
        return self.dispatchingOnClusters is not None and cluster in self.dispatchingOnClusters.clusterNames


def suspended(binding_spec: Mapping[str, Any], cluster: str) -> bool:
    """Whether dispatching to ``cluster`` is suspended by a Binding's (stored, valid) spec."""
    raw = binding_spec.get("suspension")
    return isinstance(raw, dict) and Suspension.model_validate(raw).suspends(cluster)


def may_adopt(manifest: Mapping[str, Any]) -> bool:
    """An object the member already has may be taken over by this manifest (``Overwrite``)."""
    return ((manifest.get("metadata") or {}).get("annotations") or {}).get(CONFLICT_ANNOTATION) == "overwrite"


def preserved(obj: Mapping[str, Any] | None) -> bool:
    """A member's copy to keep, released, where DRO-DS would delete it (``preserveResourcesOnDeletion``)."""
    return ((((obj or {}).get("metadata") or {}).get("annotations")) or {}).get(PRESERVE_ANNOTATION) == "true"


def release_patch() -> dict[str, Any]:
    """The JSON merge patch that hands a member's copy over to its cluster: DRO-DS's ownership labels and
    annotations removed (Karmada removes its claim metadata the same way), so nothing prunes it later."""
    return {"metadata": {"labels": dict.fromkeys(OWNERSHIP_LABELS), "annotations": dict.fromkeys(
        (*OWNERSHIP_ANNOTATIONS, CONFLICT_ANNOTATION, PRESERVE_ANNOTATION))}}
