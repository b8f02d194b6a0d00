"""Reading status conditions (Kubernetes' ``metav1.Condition`` list) one way everywhere."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any


def condition(obj: Mapping[str, Any] | None, type_: str = "Ready") -> dict[str, Any] | None:
    """The condition of ``type_`` in an object's ``status.conditions`` (or a status's ``conditions``)."""
    if not obj:
        return None
    status = obj.get("status") if isinstance(obj.get("status"), Mapping) else obj
    for c in (status or {}).get("conditions") or []:
        if isinstance(c, dict) and c.get("type") == type_:
            return c
    return None


def is_true(obj: Mapping[str, Any] | None, type_: str = "Ready") -> bool:
    c = condition(obj, type_)
    return c is not None and c.get("status") == "True"


def is_false(obj: Mapping[str, Any] | None, type_: str = "Ready") -> bool:
    """Explicitly False (an absent condition is unknown, not False)."""
    c = condition(obj, type_)
    return c is not None and c.get("status") == "False"


def kept_transitions(before: Any, after: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """``after`` with each condition's ``lastTransitionTime`` taken from ``before``'s condition of the same
    type when its status did not change (Kubernetes moves it only on a change of status)."""
    old = {c.get("type"): c for c in before or [] if isinstance(c, dict)}
    out = []
    for c in after:
        prev = old.get(c.get("type"))
        if prev is not None and prev.get("status") == c.get("status") and prev.get("lastTransitionTime"):
            c = {**c, "lastTransitionTime": prev["lastTransitionTime"]}
        out.append(c)
    return out
