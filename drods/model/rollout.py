"""A Deployment's rolling-update budget, as Kubernetes reads it: how many replicas may be
unavailable while it still counts as Available. The sim's Deployment controller and the
template status DRO-DS aggregates from the members both judge availability by it."""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any


def int_or_percent(value: Any, total: int, default: str, *, round_up: bool) -> int:
    """An IntOrString such as ``maxSurge``: an integer as is, ``"25%"`` of ``total`` rounded as asked."""
    if value is None:
        value = default
    if isinstance(value, str) and value.endswith("%"):
        frac = float(value[:-1]) / 100 * total
        return math.ceil(frac) if round_up else math.floor(frac)
    return int(value)


def max_unavailable(spec: Mapping[str, Any], replicas: int) -> int:
    """Kubernetes' ``MaxUnavailable``: ``maxUnavailable`` of ``replicas`` rounded down (25 % by
    default), 1 where it and ``maxSurge`` both resolve to 0, at most ``replicas``; 0 for the
    Recreate strategy or no replicas."""
    strategy = spec.get("strategy") or {}
    if strategy.get("type") == "Recreate" or replicas <= 0:
        return 0
    rolling = strategy.get("rollingUpdate") or {}
    unavailable = int_or_percent(rolling.get("maxUnavailable"), replicas, "25%", round_up=False)
    surge = int_or_percent(rolling.get("maxSurge"), replicas, "25%", round_up=True)
    if unavailable == 0 and surge == 0:
        unavailable = 1
    return min(max(unavailable, 0), replicas)


def minimum_available(spec: Mapping[str, Any], replicas: int) -> int:
    """How many replicas must be available for the Deployment's ``Available`` condition."""
    return replicas - max_unavailable(spec, replicas)
