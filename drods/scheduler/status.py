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

from drods.model.member_status import MemberStatus
from drods.scheduler.arrays import FloatArr
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
    gpu_stated: bool = False  # the document gives a GPU capacity or allocatable
    gpu_by_model: Mapping[str, Any] | None = None
    storage_by_tier: Mapping[str, Any] | None = None


def _or(v: float | None, default: float) -> float:
    return default if v is None else v


def parse_status(doc: Mapping[str, Any] | None, wl_floor: float | None = None) -> ParsedStatus:
    """Apply the documented defaults to a ``/status/clusters/<name>`` document (any field may miss).

    ``wl_floor`` (a pre-allocation hold's forecast) raises the status water level to at least it."""
    alloc = np.zeros(NRES)
    load = np.zeros(NRES)
    st = MemberStatus.read(doc)
    if st is None:
        return ParsedStatus(alloc, load, np.zeros(3), 0.0, 0.0, False)
    for i, res in enumerate((st.cpu, st.memory, st.gpu)):
        if res is None:
            continue
        alloc[i] = _or(res.allocatable, _or(res.capacity, 0.0))
        allocated = _or(res.allocated, 0.0)
        load[i] = max(allocated, _or(res.used, allocated))
    if st.pods_capacity is not None:
        alloc[PODS] = st.pods_capacity
        load[PODS] = _or(st.pods_used, 0.0)
    else:
        alloc[PODS] = INF
    if st.storage_capacity is not None or st.storage_available is not None:
        avail = _or(st.storage_available, INF)
        alloc[STORAGE] = cap = _or(st.storage_capacity, avail)
        load[STORAGE] = max(0.0, cap - avail) if math.isfinite(avail) else 0.0
    else:
        alloc[STORAGE] = INF
    free3 = np.maximum(alloc[:3] - load[:3], 0.0)
    largest = free3.copy()
    lnf = st.largest_node_free
    if lnf is not None:
        for i, v in enumerate((lnf.cpu, lnf.memory, lnf.gpu)):
            if v is not None:
                largest[i] = v
    with np.errstate(divide="ignore", invalid="ignore"):
        frac = np.where(alloc[:2] > 0, load[:2] / np.where(alloc[:2] > 0, alloc[:2], 1.0), 0.0)
    observed = float(frac.max())
    offset = 0.0 if st.water_level is None else st.water_level - observed
    if wl_floor is not None and observed + offset < wl_floor:
        offset = wl_floor - observed
    mbps = _or(st.network_in_mbps, 0.0) + _or(st.network_out_mbps, 0.0)
    gpu_stated = st.gpu is not None and (st.gpu.capacity is not None or st.gpu.allocatable is not None)
    return ParsedStatus(alloc, load, largest, offset, mbps, True, gpu_stated, st.gpu_by_model, st.storage_by_tier)
