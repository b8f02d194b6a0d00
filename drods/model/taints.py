"""The cluster taint keys DRO-DS sets itself, and Karmada's names for the same conditions.

Karmada's cluster controller taints a cluster ``cluster.karmada.io/not-ready`` (Ready False) or
``cluster.karmada.io/unreachable`` (Ready Unknown); DRO-DS's health controller sets one taint,
``cluster.multicluster.io/not-ready``, for both. A Karmada policy that tolerates its keys (the
"never fail over" idiom) must keep meaning that here, so a toleration of either Karmada key counts
as one of DRO-DS's key, and the other way round for a Karmada taint put on a cluster by hand.
"""

from __future__ import annotations

NOT_READY_TAINT = "cluster.multicluster.io/not-ready"
KARMADA_NOT_READY_TAINT = "cluster.karmada.io/not-ready"
KARMADA_UNREACHABLE_TAINT = "cluster.karmada.io/unreachable"

# Karmada's key → the DRO-DS key for the same condition (not symmetric among Karmada's own keys:
# tolerating "unreachable" does not tolerate Karmada's "not-ready" taint)
_SAME_AS: dict[str, str] = {KARMADA_NOT_READY_TAINT: NOT_READY_TAINT, KARMADA_UNREACHABLE_TAINT: NOT_READY_TAINT}


def taint_key_matches(toleration_key: str, taint_key: str) -> bool:
    """Does a toleration naming ``toleration_key`` name the taint ``taint_key`` (equal, or the same
    condition under its Karmada and DRO-DS names)?"""
    return (toleration_key == taint_key or _SAME_AS.get(toleration_key) == taint_key
            or _SAME_AS.get(taint_key) == toleration_key)
