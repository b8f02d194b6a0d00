"""Resource fit filter and replica estimator (S2, S4), including the largest-node rule.

A cluster passes when its total free amount fits one replica AND its largest free node does:
a replica that fits no single node is never placed, even if the cluster total fits (fragmentation).
``max_replicas`` = min over requested resources of floor(free / request), and 0 when not even the
largest node can hold one replica. Only the largest node is known, so the total bound is optimistic
about fragmentation on the other nodes; member schedulers report the rest through status.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from drods.scheduler.arrays import BoolArr, FloatArr, IntArr
from drods.scheduler.capacity import ReplicaShape, replica_shape
from drods.scheduler.interface import FilterOutcome, PluginBase, Rejection, reject
from drods.scheduler.resources import RESOURCES
from drods.scheduler.snapshot import Snapshot
from drods.scheduler.task import TaskInfo

EPS = 1e-9
_UNITS = {"cpu": "cores", "memory": "GiB", "gpu": "", "pods": "", "storage": "GiB"}


def _insufficient(res: str, need: float, free: FloatArr) -> Callable[[IntArr], Callable[[int], str]]:
    unit = f" {_UNITS[res]}" if _UNITS[res] else ""

    def make(rows: IntArr) -> Callable[[int], str]:
        vals = free[rows]
        return lambda k: f"insufficient {res}: need {need:g}{unit}, free {max(float(vals[k]), 0.0):.3g}{unit}"

    return make


def _no_node(largest: FloatArr, req: FloatArr, node_rs: list[int]) -> Callable[[IntArr], Callable[[int], str]]:
    def make(rows: IntArr) -> Callable[[int], str]:
        vals = largest[rows]
        return lambda k: "no node fits 1 replica: largest free node has " + ", ".join(
            f"{RESOURCES[r]} {vals[k, r]:.3g}/{req[r]:g}" for r in node_rs)

    return make


class ResourceFit(PluginBase):
    name = "ResourceFit"
    capacity_only = True

    def filter(self, task: TaskInfo, snap: Snapshot, mask: BoolArr) -> FilterOutcome:
        shape = replica_shape(task, snap)
        if not shape.rs:
            return mask, []
        free = snap.free
        largest = snap.largest_free
        # column by column: a reduction along a row of a (n, 5) array costs more than the compares
        short = [free[:, r] < nd for r, nd in zip(shape.rs, shape.need, strict=True)]
        no_node = _no_node_fits(shape, largest)
        task.cache["fit"] = (snap.version, no_node)  # the estimator's input, this cycle
        bad = _any(short)
        if no_node is not None:
            bad = no_node if bad is None else bad | no_node
        if bad is None or not np.count_nonzero(mask & bad):
            return mask, []
        # someone is dropped: attribute each to the first resource it lacks, as listed
        req = task.req
        node_rs = list(shape.node_rs)
        out: list[Rejection] = []
        for r, lacks in zip(shape.rs, short, strict=True):
            drop = mask & lacks
            if drop.any():
                res = RESOURCES[r]
                reason = "too many pods" if res == "pods" else f"insufficient {res}"
                out.append(reject(self.name, reason, drop, _insufficient(res, float(req[r]), free[:, r]),
                                  capacity_only=True))
                mask = mask & ~lacks
        if no_node is not None:
            drop = mask & no_node
            if drop.any():
                out.append(reject(self.name, "no node fits 1 replica", drop, _no_node(largest, req, node_rs),
                                  capacity_only=True))
                mask = mask & ~no_node
        return mask, out

    def max_replicas(self, task: TaskInfo, snap: Snapshot) -> FloatArr:
        shape = replica_shape(task, snap)
        if not shape.rs:
            return np.full(snap.n, np.inf)
        cached = task.cache.get("fit")
        if cached is not None and cached[0] == snap.version:
            no_node = cached[1]
        else:
            no_node = _no_node_fits(shape, snap.largest_free)
        free = snap.free
        fit: FloatArr | None = None
        for r, one in zip(shape.rs, shape.req, strict=True):
            col = free[:, r] / one
            fit = col if fit is None else np.minimum(fit, col, out=fit)
        assert fit is not None
        fit += EPS
        np.floor(fit, out=fit)
        if no_node is not None:
            fit[no_node] = 0.0
        return np.maximum(fit, 0.0, out=fit)


def _no_node_fits(shape: ReplicaShape, largest: FloatArr) -> BoolArr | None:
    """Clusters whose largest free node cannot hold one replica (None: no node-bound resource asked)."""
    return _any([largest[:, r] < nd for r, nd in zip(shape.node_rs, shape.node_need, strict=True)])


def _any(masks: list[BoolArr]) -> BoolArr | None:
    """Element-wise OR of ``masks`` (None when there are none), a new array."""
    if not masks:
        return None
    out = masks[0]
    for m in masks[1:]:
        out = out | m
    return out
