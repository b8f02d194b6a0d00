"""A Secret as the Kubernetes API server stores it: ``stringData`` is a write-only convenience merged
into ``data`` (base64, winning over the same key there) and never stored or returned; ``type``
defaults to ``Opaque``. A member then receives the same Secret whichever way it was written."""

from __future__ import annotations

import base64
from collections.abc import Mapping
from typing import Any

DEFAULT_TYPE = "Opaque"


def normalised_secret(obj: Mapping[str, Any]) -> tuple[dict[str, Any], list[dict[str, str]]]:
    """(the Secret to store, field errors): ``stringData`` folded into ``data``."""
    out = dict(obj)
    errors: list[dict[str, str]] = []
    data, strings = out.get("data"), out.pop("stringData", None)
    if data is not None and not isinstance(data, Mapping):
        errors.append({"field": "data", "message": "must be a map of base64 strings"})
    if strings is not None and not isinstance(strings, Mapping):
        errors.append({"field": "stringData", "message": "must be a map of strings"})
    if errors:
        return out, errors
    merged = dict(data or {})
    for key, value in (strings or {}).items():
        if not isinstance(value, str):
            errors.append({"field": f"stringData.{key}", "message": "must be a string"})
            continue
        merged[key] = base64.b64encode(value.encode()).decode()
    for key, value in merged.items():
        if not isinstance(value, str):
            errors.append({"field": f"data.{key}", "message": "must be a base64 string"})
    if merged or data is not None:
        out["data"] = merged
    out.setdefault("type", DEFAULT_TYPE)
    return out, errors
