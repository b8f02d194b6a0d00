"""What kube-apiserver refuses to change on an update of a built-in kind. A template changed so here
would be refused by every member it goes to (its Works failing there, one by one), so the control
plane refuses it first, in the same words: a StatefulSet's spec beyond the fields Kubernetes lets change
(its ``volumeClaimTemplates``, ``serviceName``, ``selector`` …) and a Deployment's, ReplicaSet's or
DaemonSet's ``spec.selector``; a CustomResourceDefinition's versions that objects are stored in."""

from __future__ import annotations

from typing import Any

from drods.errors import Invalid

# kube-apiserver's ValidateStatefulSetUpdate: the only spec fields an update may change
STATEFULSET_MUTABLE = ("replicas", "ordinals", "template", "updateStrategy", "revisionHistoryLimit",
                       "persistentVolumeClaimRetentionPolicy", "minReadySeconds")
SELECTOR_FIXED = frozenset({("apps", "Deployment"), ("apps", "ReplicaSet"), ("apps", "DaemonSet")})
# what kube-apiserver defaults a fixed field to: written out later, it is no change
STATEFULSET_DEFAULTS = {"podManagementPolicy": "OrderedReady"}


def _spec(obj: dict[str, Any]) -> dict[str, Any]:
    spec = obj.get("spec")
    return spec if isinstance(spec, dict) else {}


def check_update(group: str, kind: str, name: str, current: dict[str, Any], incoming: dict[str, Any]) -> None:
    """422 when ``incoming`` changes a field of ``current`` that Kubernetes keeps fixed."""
    old, new = _spec(current), _spec(incoming)
    if (group, kind) == ("apps", "StatefulSet"):
        def fixed(spec: dict[str, Any]) -> dict[str, Any]:
            return {**STATEFULSET_DEFAULTS, **{k: v for k, v in spec.items() if k not in STATEFULSET_MUTABLE}}

        if fixed(old) != fixed(new):
            changed = sorted(k for k in fixed(old).keys() | fixed(new).keys() if fixed(old).get(k) != fixed(new).get(k))
            allowed = ", ".join(f"'{f}'" for f in STATEFULSET_MUTABLE[:-1])
            raise Invalid(f"StatefulSet {name!r}: updates to its spec for fields other than {allowed} and "
                          f"'{STATEFULSET_MUTABLE[-1]}' are forbidden (changed: {', '.join(changed)})",
                          {"name": name, "kind": kind, "fields": [
                              {"field": "spec", "message": "Forbidden: updates to statefulset spec for fields other "
                               f"than {allowed} and '{STATEFULSET_MUTABLE[-1]}' are forbidden"}]})
    elif (group, kind) in SELECTOR_FIXED and old.get("selector") is not None and old["selector"] != new.get("selector"):
        raise Invalid(f"{kind} {name!r}: spec.selector is immutable",
                      {"name": name, "kind": kind, "fields": [
                          {"field": "spec.selector", "message": "field is immutable"}]})
    elif (group, kind) == ("apiextensions.k8s.io", "CustomResourceDefinition"):
        _check_stored_versions(name, current, new)


def _check_stored_versions(name: str, current: dict[str, Any], new: dict[str, Any]) -> None:
    """A version objects may be stored in stays in ``spec.versions`` (kube-apiserver's rule): dropped,
    its objects were served as another version with fields that version's schema lacks, and their Works
    kept applying the dropped one to the members."""
    versions = new.get("versions")
    served = {v.get("name") for v in versions if isinstance(v, dict)} if isinstance(versions, list) else set()
    stored = (current.get("status") or {}).get("storedVersions") or []
    missing = [(i, v) for i, v in enumerate(stored) if v not in served]
    if missing:
        i, v = missing[0]
        raise Invalid(f'CustomResourceDefinition.apiextensions.k8s.io "{name}" is invalid: status.storedVersions[{i}]: '
                      f'Invalid value: "{v}": must appear in spec.versions',
                      {"name": name, "kind": "CustomResourceDefinition", "fields": [
                          {"field": f"status.storedVersions[{j}]", "message": f'Invalid value: "{w}": must appear in '
                           "spec.versions"} for j, w in missing]})
