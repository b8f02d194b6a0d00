"""Kubernetes quantities in the units DRO-DS reasons in (cores, GiB, devices).

Parsing is the official client's (`kubernetes.utils.parse_quantity`: m, Ki/Mi/Gi, k/M/G, exponent
forms); this module only converts units, treats a missing value as zero and formats the canonical
strings a Kubernetes API server would send back.
"""

from __future__ import annotations

from decimal import Decimal
from typing import Any

from kubernetes.utils import parse_quantity

GIB = 1024**3


def quantity(value: Any) -> Decimal:
    """A quantity as an exact decimal; ``None`` and ``""`` are zero, bad text raises ValueError."""
    if value is None or value == "":
        return Decimal(0)
    return parse_quantity(value)


def cores(value: Any) -> float:
    """CPU quantity (``"500m"``, ``"2"``, ``"1.5"``) in cores."""
    return float(quantity(value))


def gib(value: Any) -> float:
    """Memory quantity (``"256Mi"``, ``"1G"``, ``"1e9"``) in GiB."""
    return float(quantity(value) / GIB)


def count(value: Any) -> float:
    """A countable resource (pods, ``nvidia.com/gpu``)."""
    return float(quantity(value))


def format_cpu(cores_value: float) -> str:
    """Millicores when fractional, like an API server answers (``"250m"``, ``"4"``)."""
    milli = round(cores_value * 1000)
    return str(milli // 1000) if milli % 1000 == 0 else f"{milli}m"


def format_nanocores(cores_value: float) -> str:
    """metrics.k8s.io reports CPU usage in nanocores (``"123456789n"``)."""
    return f"{max(0, round(cores_value * 1e9))}n"


def format_memory(bytes_value: float) -> str:
    """Memory as ``Ki`` (what kubelet and metrics-server report), or ``Mi``/``Gi`` when exact."""
    b = max(0, int(bytes_value))
    for suffix, size in (("Gi", GIB), ("Mi", 1024**2)):
        if b and b % size == 0:
            return f"{b // size}{suffix}"
    return f"{b // 1024}Ki"
