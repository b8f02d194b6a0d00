"""Dissonance score (H2): workloads of clashing classes kept apart.

A workload's class is its label ``multicluster.io/workload-class``. The matrix D (symmetric,
0..1) says how badly two classes share a cluster: a latency-sensitive service next to a cpu-batch
job suffers, two latency-sensitive services do not. For a task of class t on cluster c

    penalty = min(1, sensitivity × Σ_k D[t][k] × cores_k(c) / allocatable cpu(c))

where cores_k(c) is the cpu the placed replicas of class k hold there (this workload's own
replicas left out), and the score is 100 × (1 − penalty): in proportion to what is already there.
``pluginArgs.Dissonance``: ``matrix`` ({class: {class: value}}, merged over the defaults and made
symmetric) and ``sensitivity`` (default 4: a fully clashing class holding a quarter of the cpu
leaves nothing). The plugin *repels*: when it takes part in affinity concentration the division
uses the fewest best clusters that hold the replicas (``concentrate.py``). Skipped before any
array work when the task has no class or no cluster holds a class that clashes with it.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from drods.scheduler.arrays import BoolArr, FloatArr
from drods.scheduler.interface import PluginBase
from drods.scheduler.resources import CPU
from drods.scheduler.snapshot import Snapshot
from drods.scheduler.task import TaskInfo

DEFAULT_MATRIX: dict[str, dict[str, float]] = {
    "latency-sensitive": {"cpu-batch": 0.8, "io-heavy": 0.6, "gpu-training": 0.3},
    "cpu-batch": {"cpu-batch": 0.3, "io-heavy": 0.3, "gpu-training": 0.2},
    "gpu-training": {"gpu-training": 0.5, "io-heavy": 0.6},
    "io-heavy": {"io-heavy": 0.7},
}
DEFAULT_SENSITIVITY = 4.0


def build_matrix(overrides: dict[str, dict[str, float]] | None = None) -> dict[str, dict[str, float]]:
    """Defaults with ``overrides`` on top, symmetric (D[a][b] = D[b][a]), zeros dropped."""
    out: dict[str, dict[str, float]] = {}
    for src in (DEFAULT_MATRIX, overrides or {}):
        for a, row in src.items():
            for b, v in row.items():
                val = float(v)
                if not 0.0 <= val <= 1.0:
                    raise ValueError(f"Dissonance matrix {a}/{b}: {val} is not within 0..1")
                out.setdefault(a, {})[b] = val
                out.setdefault(b, {})[a] = val
    return {a: {b: v for b, v in row.items() if v > 0} for a, row in out.items()}


class Dissonance(PluginBase):
    name = "Dissonance"
    affinity = True
    repels = True

    def __init__(self, args: dict[str, Any] | None = None) -> None:
        super().__init__(args)
        self.matrix = build_matrix(self.args.get("matrix"))
        self.sensitivity = float(self.args.get("sensitivity", DEFAULT_SENSITIVITY))

    def skip(self, task: TaskInfo, snap: Snapshot) -> bool:
        cls = task.workload_class
        if not cls:
            return True
        partners = self.matrix.get(cls)
        return not partners or not any(k in snap.class_cores for k in partners)

    def score(self, task: TaskInfo, snap: Snapshot, mask: BoolArr) -> FloatArr:
        n = snap.n
        cls = task.workload_class or ""
        weighted = np.zeros(n)
        for k, d in self.matrix.get(cls, {}).items():
            arr = snap.class_cores.get(k)
            if arr is not None:
                weighted += d * arr[:n]
        own = snap.class_placements.get(task.key)
        if own is not None and own[0] in self.matrix.get(cls, {}):
            d_own = self.matrix[cls][own[0]]
            for name, cores in own[1]:
                row = snap.index.get(name)
                if row is not None:
                    weighted[row] = max(0.0, weighted[row] - d_own * cores)
        alloc = snap.alloc[:n, CPU]
        frac = np.where(alloc > 0, weighted / np.where(alloc > 0, alloc, 1.0), np.where(weighted > 0, 1.0, 0.0))
        penalty = np.clip(self.sensitivity * frac, 0.0, 1.0)
        return 100.0 * (1.0 - penalty)  # type: ignore[no-any-return]
