"""The resource columns every per-cluster array of the scheduler shares, and a replica's demand in them.

Resources are columns ``cpu`` (cores), ``memory`` (GiB), ``gpu`` (count), ``pods`` (count) and
``storage`` (GiB); a demand is one float per column, so fitting it is one vector operation.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from drods.model.binding import ReplicaRequirements
from drods.scheduler.arrays import FloatArr

RESOURCES = ("cpu", "memory", "gpu", "pods", "storage")
CPU, MEM, GPU, PODS, STORAGE = range(5)
NRES = len(RESOURCES)
INF = math.inf


def requirement_vector(req: ReplicaRequirements | Sequence[float] | FloatArr) -> FloatArr:
    """Per-replica demand as a resource vector; every replica needs one pod slot."""
    if isinstance(req, ReplicaRequirements):
        return np.array([req.cpu, req.memory, float(req.gpu), 1.0, req.storage], dtype=np.float64)
    vec = np.asarray(req, dtype=np.float64)
    if vec.shape != (NRES,):
        raise ValueError(f"requirement vector must have {NRES} entries {RESOURCES}")
    return vec
