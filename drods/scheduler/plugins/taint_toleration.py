"""Taint toleration filter: NoSchedule / NoExecute taints must be tolerated (Kubernetes semantics).

Per distinct toleration set the combined "untolerated" mask is computed once per topology version,
so the cost per task does not grow with the number of distinct taints in the fleet.

A cluster the workload already runs on passes an untolerated NoSchedule taint, as in Karmada
(``TargetContains`` in its TaintToleration filter): NoSchedule keeps new placements off, it moves
nothing. Such a cluster keeps the replicas it has and gets no more (``max_replicas`` is 0 there; a
Duplicated copy follows the workload's count). An untolerated NoExecute taint drops it, and so does
a NoExecute toleration with ``tolerationSeconds`` once ``timeAdded + tolerationSeconds`` has passed
(``snap.clock``): else the failover controller's eviction would be placed straight back.

The health controller's not-ready taint (``cluster.multicluster.io/not-ready:NoExecute``) is the
exception: a binding without a toleration of it still has the failover controller's default
toleration (the cluster's ``multicluster.io/toleration-seconds``, else the settings': Karmada's
webhook adds a default toleration to every policy), so a current cluster with it untolerated is held
as for NoSchedule — it keeps its replicas and gets no more until the failover controller moves them
(`drods.controllers.failover`, `Readiness`). A toleration of it with seconds still runs out here.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from drods.model.taints import NOT_READY_TAINT, taint_key_matches
from drods.scheduler.arrays import BoolArr, FloatArr, IntArr
from drods.scheduler.interface import FilterOutcome, PluginBase, Rejection, distinct, none_more_on
from drods.scheduler.snapshot import Snapshot
from drods.scheduler.task import TaskInfo

Toleration = tuple[str | None, str, str | None, str | None]
_NO_ROWS: IntArr = np.zeros(0, dtype=np.intp)


def tolerates(tol: Toleration, key: str, value: str, effect: str) -> bool:
    """Kubernetes' ToleratesTaint, with Karmada's not-ready / unreachable keys as DRO-DS's (``model.taints``)."""
    tkey, op, tval, teffect = tol
    if teffect is not None and teffect != effect:
        return False
    if tkey is None or tkey == "":
        return op == "Exists"
    if not taint_key_matches(tkey, key):
        return False
    return op == "Exists" or (tval or "") == value


def _text(t: tuple[str, str, str]) -> str:
    k, v, e = t
    return f"{k}={v}:{e}" if v else f"{k}:{e}"


@dataclass(frozen=True, slots=True)
class _Verdicts:
    """What one toleration set makes of the fleet's taints (cached per topology version)."""

    which: IntArr  # per row: its first untolerated taint (NoExecute first) into ``reasons``; -1 none
    evicts: BoolArr  # per reason: a NoExecute taint but the not-ready one (a current cluster is not kept)
    reasons: list[str]
    expires: FloatArr | None  # per row: when a NoExecute toleration with seconds runs out (inf never)
    expiring: IntArr  # per row: which of ``expired`` runs out first
    expired: list[str]


class TaintToleration(PluginBase):
    name = "TaintToleration"

    def _verdicts(self, task: TaskInfo, snap: Snapshot) -> _Verdicts:
        ck = ("taints", task.tolerations, task.toleration_seconds)
        hit = snap.cache.get(ck)
        if hit is not None:
            return hit  # type: ignore[no-any-return]
        n = snap.n
        idx = snap.indexes
        which = np.full(n, -1, dtype=np.intp)
        reasons: list[str] = []
        evicts: list[bool] = []
        expires: FloatArr | None = None
        expiring = np.full(n, -1, dtype=np.intp)
        expired: list[str] = []
        tols = tuple(zip(task.tolerations, task.toleration_seconds or (None,) * len(task.tolerations), strict=True))
        # evicting taints first: a cluster with several kinds untolerated is explained (and dropped) by the
        # evicting one; then the not-ready taint (held, as NoSchedule, for the failover controller's default)
        for t, m in sorted(idx.taints.items(), key=lambda kv: (kv[0][2] != "NoExecute", kv[0][0] == NOT_READY_TAINT)):
            if t[2] not in ("NoSchedule", "NoExecute"):
                continue
            secs = [s for tol, s in tols if tolerates(tol, *t)]
            if not secs:
                sel = m[:n] & (which < 0)
                if sel.any():
                    which[sel] = len(reasons)
                    reasons.append(f"untolerated taint {_text(t)}")
                    evicts.append(t[2] == "NoExecute" and t[0] != NOT_READY_TAINT)
                continue
            timed = [s for s in secs if s is not None]
            if t[2] != "NoExecute" or not timed:
                continue  # tolerated for good
            limit = min(timed)  # Karmada's GetMinTolerationTime: the earliest trigger time of those with seconds
            until = idx.taint_added[t][:n] + limit
            if expires is None:
                expires = np.full(n, np.inf)
            sel = m[:n] & (until < expires)
            if sel.any():
                expires[sel] = until[sel]
                expiring[sel] = len(expired)
                expired.append(f"toleration of taint {_text(t)} ran out ({limit:g}s)")
        res = _Verdicts(which, np.asarray(evicts, dtype=bool), reasons, expires, expiring, expired)
        snap.cache[ck] = res
        return res

    @staticmethod
    def _held(task: TaskInfo, v: _Verdicts) -> IntArr:
        """Current clusters whose only untolerated taints are NoSchedule or the not-ready one: they keep
        their replicas."""
        cur = task.current_rows
        if task.rebalance or not cur.size or not v.reasons:
            return _NO_ROWS
        w = v.which[cur]
        return cur[(w >= 0) & ~v.evicts[np.maximum(w, 0)]]  # type: ignore[no-any-return]

    def filter(self, task: TaskInfo, snap: Snapshot, mask: BoolArr) -> FilterOutcome:
        if not snap.indexes.taints:
            return mask, []
        v = self._verdicts(task, snap)
        out: list[Rejection] = []
        drop = mask & (v.which >= 0)
        if drop.any():
            drop[self._held(task, v)] = False
            rows = drop.nonzero()[0]
            codes = v.which[rows]
            out = [Rejection(v.reasons[c], rows[codes == c], self.name) for c in distinct(codes)]
            mask = mask & ~drop
        if v.expires is not None:
            late = mask & (v.expires <= snap.clock())
            if late.any():
                rows = late.nonzero()[0]
                codes = v.expiring[rows]
                out += [Rejection(v.expired[c], rows[codes == c], self.name) for c in distinct(codes)]
                mask = mask & ~late
        return mask, out

    def max_replicas(self, task: TaskInfo, snap: Snapshot) -> FloatArr | None:
        """No more replicas on a kept NoSchedule- or not-ready-tainted cluster (it holds what it has)."""
        if not snap.indexes.taints or task.division == "Duplicated":
            return None
        return none_more_on(self._held(task, self._verdicts(task, snap)), snap.n)
