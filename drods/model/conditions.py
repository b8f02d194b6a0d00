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


def transition(type_: str, ok: bool, reason: str, message: str, previous: list[dict[str, Any]] | None,
               now: str) -> dict[str, Any]:
    """A condition as it stands now; its ``lastTransitionTime`` is ``previous``'s while the status holds."""
    status = "True" if ok else "False"
    prev = next((c for c in previous or [] if c.get("type") == type_), None)
    since = prev.get("lastTransitionTime") if prev and prev.get("status") == status else now
    return {"type": type_, "status": status, "reason": reason, "message": message, "lastTransitionTime": since}


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
