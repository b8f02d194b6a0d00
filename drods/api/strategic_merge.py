"""Strategic merge patch for the built-in workload templates (Deployment, Service, …).

kubectl computes a strategic merge patch for every kind compiled into it (``apps/v1`` and core
kinds): lists such as ``containers`` are merged by a key (``name``) and the patch carries
directives (``$setElementOrder/containers``, ``$patch: delete``, ``$retainKeys``,
``$deleteFromPrimitiveList/…``). Applied as a plain merge patch, a changed image would drop every
other container and store the directives in the object, so the Kubernetes paths apply it here with
the merge keys of the Kubernetes API types. Our own kinds are unknown to kubectl; it sends them a
JSON merge patch instead.
"""

from __future__ import annotations

import copy
from typing import Any

# List fields Kubernetes merges by key (the ``patchMergeKey`` of the API types).
MERGE_KEYS: dict[str, tuple[str, ...]] = {
    "containers": ("name",), "initContainers": ("name",), "ephemeralContainers": ("name",),
    "env": ("name",), "volumes": ("name",), "volumeMounts": ("mountPath",), "volumeDevices": ("devicePath",),
    "imagePullSecrets": ("name",), "hostAliases": ("ip",), "conditions": ("type",),
    "ownerReferences": ("uid",), "resourceClaims": ("name",), "schedulingGates": ("name",),
    "topologySpreadConstraints": ("topologyKey", "whenUnsatisfiable"),
    # Container ports merge by containerPort, Service ports by port.
    "ports": ("containerPort", "port"),
}
# Lists of scalars Kubernetes merges as sets.
MERGED_SCALAR_LISTS = frozenset({"finalizers"})

_ORDER = "$setElementOrder/"
_DELETE_SCALARS = "$deleteFromPrimitiveList/"
_DELETE = object()


def _key_of(field: str, items: list[Any]) -> str | None:
    for key in MERGE_KEYS.get(field, ()):
        if items and all(isinstance(i, dict) and key in i for i in items):
            return key
    return None


def _merge_list(field: str, current: list[Any], patch: list[Any]) -> list[Any]:
    if field in MERGED_SCALAR_LISTS and not any(isinstance(i, dict) for i in patch):
        return current + [v for v in patch if v not in current]
    if any(isinstance(i, dict) and i.get("$patch") == "replace" for i in patch):
        # ``{"$patch": "replace"}`` as an element: the rest of the patch list is the new list.
        return [copy.deepcopy(i) for i in patch if not (isinstance(i, dict) and i.get("$patch") == "replace")]
    key = _key_of(field, patch)
    if key is None or not all(isinstance(i, dict) and key in i for i in current):
        return [copy.deepcopy(i) for i in patch if not (isinstance(i, dict) and i.get("$patch") == "delete")]
    out = copy.deepcopy(current)
    for item in patch:
        index = next((n for n, cur in enumerate(out) if cur.get(key) == item[key]), None)
        if item.get("$patch") == "delete":
            if index is not None:
                del out[index]
        elif index is None:
            out.append(strategic_merge({}, item))
        else:
            out[index] = strategic_merge(out[index], item)
    return out


def _order(items: list[Any], order: list[Any], field: str) -> list[Any]:
    """``$setElementOrder``: items named in ``order`` come first, in that order; the rest keep theirs."""
    key = _key_of(field, [o for o in order if isinstance(o, dict)])

    def ident(v: Any) -> Any:
        return v.get(key) if key and isinstance(v, dict) else repr(v)

    rank = {ident(o): n for n, o in enumerate(order)}
    return sorted(items, key=lambda v: rank.get(ident(v), len(rank)))


def strategic_merge(current: Any, patch: Any) -> Any:
    """Apply one strategic merge patch object to ``current`` (neither is modified)."""
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    directive = patch.get("$patch")
    if directive == "replace":
        return {k: copy.deepcopy(v) for k, v in patch.items() if k != "$patch"}
    if directive == "delete":
        return _DELETE
    out: dict[str, Any] = copy.deepcopy(current) if isinstance(current, dict) else {}
    orders: dict[str, list[Any]] = {}
    retain = patch.get("$retainKeys")
    for key, value in patch.items():
        if key in ("$patch", "$retainKeys"):
            continue
        if key.startswith(_ORDER):
            orders[key.removeprefix(_ORDER)] = value or []
        elif key.startswith(_DELETE_SCALARS):
            field = key.removeprefix(_DELETE_SCALARS)
            if isinstance(out.get(field), list):
                out[field] = [v for v in out[field] if v not in (value or [])]
        elif value is None:
            out.pop(key, None)
        elif isinstance(value, dict):
            merged = strategic_merge(out.get(key), value)
            if merged is _DELETE:
                out.pop(key, None)
            else:
                out[key] = merged
        elif isinstance(value, list) and isinstance(out.get(key), list):
            out[key] = _merge_list(key, out[key], value)
        elif isinstance(value, list):
            out[key] = [strategic_merge({}, v) if isinstance(v, dict) else copy.deepcopy(v)
                        for v in value if not (isinstance(v, dict) and v.get("$patch") == "delete")]
        else:
            out[key] = copy.deepcopy(value)
    for field, order in orders.items():
        if isinstance(out.get(field), list):
            out[field] = _order(out[field], order, field)
    if isinstance(retain, list):
        out = {k: v for k, v in out.items() if k in retain}
    return out
