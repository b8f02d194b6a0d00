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

from drods.scheduler.interface import BoolArr, FilterOutcome, FloatArr, IntArr, PluginBase, Rejection, reject
from drods.scheduler.snapshot import RESOURCES, Snapshot
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
        out: list[Rejection] = []
        free = snap.free
        req = task.req
        for r in task.requested:
            col = free[:, r]
            short = col < req[r] - EPS
            drop = mask & short
            if drop.any():
                res = RESOURCES[r]
                reason = "too many pods" if res == "pods" else f"insufficient {res}"
                out.append(reject(self.name, reason, drop, _insufficient(res, float(req[r]), col),
                                  capacity_only=True))
                mask = mask & ~short
        node_rs = [r for r in task.requested if r < 3]
        if node_rs:
            largest = snap.largest_free
            bad = np.zeros(snap.n, dtype=bool)
            for r in node_rs:
                bad |= largest[:, r] < req[r] - EPS
            drop = mask & bad
            if drop.any():
                out.append(reject(self.name, "no node fits 1 replica", drop, _no_node(largest, req, node_rs),
                                  capacity_only=True))
                mask = mask & ~bad
        return mask, out

    def max_replicas(self, task: TaskInfo, snap: Snapshot) -> FloatArr:
        n = snap.n
        fit = np.full(n, np.inf)
        if not task.requested:
            return fit
        free = snap.free
        req = task.req
        rs = list(task.requested)
        fit = np.floor(free[:, rs] / req[rs] + EPS).min(axis=1)
        node_rs = [r for r in rs if r < 3]
        if node_rs:
            largest = snap.largest_free
            ok = (largest[:, node_rs] >= req[node_rs] - EPS).all(axis=1)
            fit = np.where(ok, fit, 0.0)
        return np.maximum(fit, 0.0)
