"""Annotations DRO-DS itself reads and writes on objects: the record of why something moved.

They live in ``metadata.annotations`` so a user sees them with ``drods get … -o yaml`` or
``kubectl get … -o yaml``, and so a restarted component resumes from the object, not from memory.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

# Binding: why its last rescheduling was triggered (shown in the schedule history).
RESCHEDULE_REASON = "multicluster.io/reschedule-reason"
# Binding: clusters automatic operations moved it away from (comma-separated), so it can be
# offered back to them once they are calm again.
EVACUATED_FROM = "multicluster.io/evacuated-from"
# Cluster: a pre-allocation hold, JSON ``{"waterLevel": float, "until": RFC 3339, "reason": str}``;
# until it expires the scheduler sees the cluster at least at that forecast water level.
PREALLOCATION = "multicluster.io/preallocation"
# Binding: clusters placement feedback (CATS CCC, `drods.steering`) offered it (comma-separated):
# the scheduler adds them to the names the binding may use (`drods.model.binding.with_offers`).
PLACEMENT_OFFERS = "multicluster.io/placement-offers"


def evacuated_from(obj: Mapping[str, Any]) -> list[str]:
    """The clusters a Binding object was moved away from by automatic operations."""
    raw = ((obj.get("metadata") or {}).get("annotations") or {}).get(EVACUATED_FROM) or ""
    return [c for c in str(raw).split(",") if c]


def placement_offers(obj: Mapping[str, Any]) -> list[str]:
    """The clusters placement feedback offered a Binding object."""
    raw = ((obj.get("metadata") or {}).get("annotations") or {}).get(PLACEMENT_OFFERS) or ""
    return [c for c in str(raw).split(",") if c]
