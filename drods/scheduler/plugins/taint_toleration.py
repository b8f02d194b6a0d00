"""Taint toleration filter: NoSchedule / NoExecute taints must be tolerated (Kubernetes semantics).

Per distinct toleration set the combined "untolerated" mask is computed once per topology version,
so the cost per task does not grow with the number of distinct taints in the fleet.
"""

from __future__ import annotations

import numpy as np

from drods.scheduler.arrays import BoolArr
from drods.scheduler.interface import FilterOutcome, PluginBase, Rejection, distinct
from drods.scheduler.snapshot import Snapshot
from drods.scheduler.task import TaskInfo

Toleration = tuple[str | None, str, str | None, str | None]


def tolerates(tol: Toleration, key: str, value: str, effect: str) -> bool:
    tkey, op, tval, teffect = tol
    if teffect is not None and teffect != effect:
        return False
    if tkey is None or tkey == "":
        return op == "Exists"
    if tkey != key:
        return False
    return op == "Exists" or (tval or "") == value


def _fmt(t: tuple[str, str, str]) -> str:
    k, v, e = t
    return f"untolerated taint {k}={v}:{e}" if v else f"untolerated taint {k}:{e}"


class TaintToleration(PluginBase):
    name = "TaintToleration"

    def _index(self, task: TaskInfo, snap: Snapshot) -> tuple[BoolArr, np.ndarray, list[str]]:
        ck = ("taints", task.tolerations)
        hit = snap.cache.get(ck)
        if hit is not None:
            return hit  # type: ignore[no-any-return]
        n = snap.n
        which = np.full(n, -1, dtype=np.int32)
        reasons: list[str] = []
        for t, m in snap.indexes.taints.items():
            if t[2] not in ("NoSchedule", "NoExecute"):
                continue
            if any(tolerates(tol, *t) for tol in task.tolerations):
                continue
            sel = m[:n] & (which < 0)
            if sel.any():
                which[sel] = len(reasons)
                reasons.append(_fmt(t))
        res = (which >= 0, which, reasons)
        snap.cache[ck] = res
        return res

    def filter(self, task: TaskInfo, snap: Snapshot, mask: BoolArr) -> FilterOutcome:
        if not snap.indexes.taints:
            return mask, []
        bad, which, reasons = self._index(task, snap)
        drop = mask & bad
        if not drop.any():
            return mask, []
        rows = drop.nonzero()[0]
        codes = which[rows]
        out = [Rejection(reasons[c], rows[codes == c], self.name) for c in distinct(codes)]
        return mask & ~bad, out
