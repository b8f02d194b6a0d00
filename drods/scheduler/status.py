"""A member's status document reduced to the numbers the scheduler keeps per cluster row.

Any field may be missing; the defaults (see ``snapshot.py``) are applied here, once per status
update, so no decision ever looks at the document again.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from drods.scheduler.interface import FloatArr
from drods.scheduler.resources import INF, NRES, PODS, STORAGE


@dataclass(slots=True)
class ParsedStatus:
    """A status document reduced to the numbers the scheduler uses."""

    alloc: FloatArr
    load: FloatArr
    largest: FloatArr
    wl_offset: float
    net_mbps: float
    present: bool


def _num(d: Mapping[str, Any], key: str, default: float) -> float:
    v = d.get(key)
    if v is None:
        return default
    try:
        f = float(v)
    except (TypeError, ValueError):
        return default
    return f if math.isfinite(f) and f >= 0 else default


def parse_status(doc: Mapping[str, Any] | None, wl_floor: float | None = None) -> ParsedStatus:
    """Apply the documented defaults to a ``/status/clusters/<name>`` document (any field may miss).

    ``wl_floor`` (a pre-allocation hold's forecast) raises the status water level to at least it."""
    alloc = np.zeros(NRES)
    load = np.zeros(NRES)
    if not doc:
        return ParsedStatus(alloc, load, np.zeros(3), 0.0, 0.0, False)
    for i, key in enumerate(("cpu", "memory", "gpu")):
        sec = doc.get(key)
        if not isinstance(sec, Mapping):
            continue
        cap = _num(sec, "capacity", 0.0)
        alloc[i] = _num(sec, "allocatable", cap)
        allocated = _num(sec, "allocated", 0.0)
        used = _num(sec, "used", allocated)
        load[i] = max(allocated, used)
    pods = doc.get("pods")
    if isinstance(pods, Mapping) and pods.get("capacity") is not None:
        alloc[PODS] = _num(pods, "capacity", INF)
        load[PODS] = _num(pods, "used", 0.0)
    else:
        alloc[PODS] = INF
    st = doc.get("storage")
    if isinstance(st, Mapping) and (st.get("capacity") is not None or st.get("available") is not None):
        avail = _num(st, "available", INF)
        cap = _num(st, "capacity", avail)
        alloc[STORAGE] = cap
        load[STORAGE] = max(0.0, cap - avail) if math.isfinite(avail) else 0.0
    else:
        alloc[STORAGE] = INF
    free3 = np.maximum(alloc[:3] - load[:3], 0.0)
    largest = free3.copy()
    lnf = doc.get("largestNodeFree")
    if isinstance(lnf, Mapping):
        for i, key in enumerate(("cpu", "memory", "gpu")):
            if lnf.get(key) is not None:
                largest[i] = _num(lnf, key, free3[i])
    with np.errstate(divide="ignore", invalid="ignore"):
        frac = np.where(alloc[:2] > 0, load[:2] / np.where(alloc[:2] > 0, alloc[:2], 1.0), 0.0)
    observed = float(frac.max())
    offset = 0.0
    if doc.get("waterLevel") is not None:
        offset = _num(doc, "waterLevel", observed) - observed
    if wl_floor is not None and observed + offset < wl_floor:
        offset = wl_floor - observed
    net = doc.get("network")
    mbps = 0.0
    if isinstance(net, Mapping):
        mbps = _num(net, "inMbps", 0.0) + _num(net, "outMbps", 0.0)
    return ParsedStatus(alloc, load, largest, offset, mbps, True)
