"""What a reader without ``read-secrets`` (a viewer) sees of Secrets: their metadata and type, never
their data — also not inside the Works that carry Secrets to pull-mode members."""

from __future__ import annotations

from typing import Any

from drods.model.annotations import LAST_APPLIED
from drods.model.kinds import SECRET, WORK, Kind

_DATA = ("data", "stringData")


def _strip_secret(obj: dict[str, Any]) -> dict[str, Any]:
    """Without its data, and without ``kubectl apply``'s copy of the applied Secret (its annotation
    holds the values as written)."""
    out = {k: v for k, v in obj.items() if k not in _DATA}
    meta = out.get("metadata")
    if isinstance(meta, dict) and LAST_APPLIED in (meta.get("annotations") or {}):
        annotations = {k: v for k, v in meta["annotations"].items() if k != LAST_APPLIED}
        out["metadata"] = {**meta, "annotations": annotations}
    return out


def metadata_only(kind: Kind, obj: dict[str, Any]) -> dict[str, Any]:
    """``obj`` without Secret data (unchanged for other kinds)."""
    if kind is SECRET:
        return _strip_secret(obj)
    if kind is WORK:
        spec = obj.get("spec")
        if not isinstance(spec, dict):
            return obj
        manifests = spec.get("manifests")
        if isinstance(manifests, list) and any(isinstance(m, dict) and m.get("kind") == "Secret" for m in manifests):
            stripped = [_strip_secret(m) if isinstance(m, dict) and m.get("kind") == "Secret" else m
                        for m in manifests]
            return {**obj, "spec": {**spec, "manifests": stripped}}
    return obj


def hides_data(kind: Kind) -> bool:
    return kind is SECRET or kind is WORK
