"""What a written placement policy asks for and will not get, said back as the Kubernetes API server's
warnings (``Warning: 299`` response headers, which kubectl prints): the policy is valid, so it is
stored, but a Karmada user would otherwise wait for something that never happens."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from drods.model.kinds import PLACEMENT_POLICY_KINDS, Kind, by_kind


def policy_warnings(kind: Kind, obj: Mapping[str, Any]) -> list[str]:
    if kind not in PLACEMENT_POLICY_KINDS:
        return []
    spec = obj.get("spec")
    selectors = spec.get("resourceSelectors") if isinstance(spec, Mapping) else None
    own = (obj.get("metadata") or {}).get("namespace") if kind.namespaced else None
    out: list[str] = []
    for i, sel in enumerate(selectors if isinstance(selectors, list) else []):
        if not isinstance(sel, Mapping):
            continue
        if sel.get("kind") == "CustomResourceDefinition":
            out.append(f"spec.resourceSelectors[{i}]: a CustomResourceDefinition is not placed by a policy; it "
                       "travels with the Works of its resources, to exactly their clusters")
        if own and sel.get("namespace") and sel["namespace"] != own:
            out.append(f"spec.resourceSelectors[{i}].namespace: {sel['namespace']} is not the policy's namespace "
                       f"{own}; a {kind.kind} selects in its own namespace only, so this selector matches nothing")
        selected = by_kind(str(sel.get("apiVersion")), str(sel.get("kind")))
        if own and selected is not None and not selected.namespaced:
            out.append(f"spec.resourceSelectors[{i}]: {selected.kind} is cluster-scoped and a {kind.kind} selects "
                       "namespaced objects only, so this selector matches nothing; a cluster-wide policy places it")
    weights = ((spec.get("placement") or {}).get("replicaScheduling") or {}).get("weightPreference") \
        if isinstance(spec, Mapping) else None
    if isinstance(weights, Mapping) and weights.get("dynamicWeight") and weights.get("staticWeightList"):
        out.append("spec.placement.replicaScheduling.weightPreference: dynamicWeight is set, so the staticWeightList "
                   f"is ignored (Karmada's meaning): replicas are divided by {weights['dynamicWeight']}")
    return out
