"""User latency: the expected latency from a workload's users to each cluster, weighted by
the users' shares — the score — and the latency SLO as a filter that gives way to room.

``UserLatency`` (score): 100 at 0 ms falling linearly to 0 at ``referenceMs`` (pluginArgs; default
the task's latency SLO, else the farthest known candidate); a cluster whose latency to every user
place is unknown scores ``unknownScore`` (pluginArgs, default 50: neutral), and the share of the users a
cluster's latency is unknown from weighs that score too. Skipped when the task has
no users (declared ``placement.users`` or learned from steering's demand).

``nearMs`` (pluginArgs, default 20): clusters this close in latency to the nearest of a user place's
group count as equally near when replicas are divided (`user_division.py`); set to the latency SLO,
the water level decides within it. ``nearCeilingMargin`` (pluginArgs, a water level; null: none): a
nearer band fills first only up to its group's mean level + this while a farther band within the SLO
has room under it.

``UserLatencySLO`` (filter, after WaterLevelLimit): with ``placement.latencySLOMs`` (or the
ServiceRegistration's ``sla.maxDelayMs``) it drops clusters beyond the SLO from every user place
while the clusters within it have room for the replicas under their water-level limit less
``headroom`` (pluginArgs, a water level; default 0.03); when they do not, the clusters beyond stay as
overflow and the decision says so. The division then fills every cluster to its limit less the
headroom — those within the SLO first, then the nearest beyond — and only then the last of the
headroom, within the SLO first: a cluster at its limit is one step of its background's noise from
breaching the water-level SLA, and the users' region filled to it breached on tick after tick where a
few replicas served from beyond the SLO would not have (docs/whatif.md). ``headroom: 0`` fills the
clusters within the SLO to their limit first. A drop limits growth only: replicas already beyond keep
running until a rebalance.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from drods.scheduler.arrays import BoolArr, FloatArr
from drods.scheduler.interface import FilterOutcome, PluginBase, reject
from drods.scheduler.plugins.network_fit import latency_detail
from drods.scheduler.plugins.readiness import Readiness
from drods.scheduler.plugins.resource_fit import ResourceFit
from drods.scheduler.plugins.user_distance import expected_latency, latency_matrix, within_slo
from drods.scheduler.plugins.water_level_limit import WaterLevelLimit
from drods.scheduler.snapshot import Snapshot
from drods.scheduler.task import TaskInfo
from drods.scheduler.users import UserDemand

DEFAULT_UNKNOWN_SCORE = 50.0
SLO_HEADROOM = 0.03  # UserLatencySLO headroom (measured: docs/whatif.md)
# what bounds the room within the SLO: plugins whose estimates read no pluginArgs, so one of each serves every call
_LIMIT, _FIT, _READINESS = WaterLevelLimit(), ResourceFit(), Readiness()


class UserLatency(PluginBase):
    name = "UserLatency"

    def __init__(self, args: dict[str, Any] | None = None) -> None:
        super().__init__(args)
        near = self.args.get("nearMs")
        if near is not None and (isinstance(near, bool) or not isinstance(near, int | float) or near <= 0):
            raise ValueError(f"pluginArgs: UserLatency nearMs must be a positive number of ms, not {near!r}")
        margin = self.args.get("nearCeilingMargin")
        if margin is not None and (isinstance(margin, bool) or not isinstance(margin, int | float) or margin < 0):
            raise ValueError("pluginArgs: UserLatency nearCeilingMargin must be a water level ≥ 0 (or null), "
                             f"not {margin!r}")

    def skip(self, task: TaskInfo, snap: Snapshot) -> bool:
        return task.users is None

    def score(self, task: TaskInfo, snap: Snapshot, mask: BoolArr) -> FloatArr:
        assert task.users is not None
        mat = latency_matrix(snap, task.users)
        exp = expected_latency(mat, task.users.weights)
        known = ~np.isnan(exp)
        ref = self.args.get("referenceMs", task.latency_slo_ms)
        if ref is None:
            sel = known & mask
            ref = float(exp[sel].max()) if sel.any() else 1.0
        ref = max(float(ref), 1.0)
        s = 100.0 * np.clip(1.0 - np.nan_to_num(exp) / ref, 0.0, 1.0)
        # the users a cluster's latency is unknown from weigh as neutral: a cluster measured only from its
        # own city's users had scored as if every user were there
        share_known = (task.users.weights[:, None] * ~np.isnan(mat)).sum(axis=0)
        unknown = float(self.args.get("unknownScore", DEFAULT_UNKNOWN_SCORE))
        s = share_known * s + (1.0 - share_known) * unknown
        s[~known] = unknown
        return s  # type: ignore[no-any-return]


def _room(task: TaskInfo, snap: Snapshot, rows: BoolArr, headroom: float = 0.0) -> float:
    """Replicas that fit on ``rows`` under their water-level limit and allocatable resources; none more on a
    cluster Readiness keeps at what it has (cordoned, or NotReady while tolerated): a cordoned cluster within
    the SLO had counted as room, and the replicas it would not take stayed pending."""
    fit = np.minimum(_LIMIT.max_replicas(task, snap, headroom), _FIT.max_replicas(task, snap))
    held = _READINESS.max_replicas(task, snap)
    if held is not None:
        np.minimum(fit, held, out=fit)
    return float(np.minimum(fit[rows], 1e9).sum())


class UserLatencySLO(PluginBase):
    name = "UserLatencySLO"
    capacity_only = True

    def __init__(self, args: dict[str, Any] | None = None) -> None:
        super().__init__(args)
        self.headroom = slo_headroom(self.args)

    def skip(self, task: TaskInfo, snap: Snapshot) -> bool:
        return task.users is None or task.latency_slo_ms is None

    def filter(self, task: TaskInfo, snap: Snapshot, mask: BoolArr) -> FilterOutcome:
        assert task.users is not None and task.latency_slo_ms is not None
        slo = task.latency_slo_ms
        mat = latency_matrix(snap, task.users)
        unserved = _unserved(task.users, mat, mask, slo)
        if unserved:  # those users are served from beyond their SLO, however the rest are placed
            task.cache["latencySLO"] = unserved
        near = within_slo(mat, slo)
        far = mask & ~near
        if not far.any():
            return mask, []
        if np.isnan(mat[:, mask]).all():  # nothing to judge the SLO by: no cluster is nearer than another
            return mask, []
        inside = mask & near
        held = sum(k for name, k in task.current.items()
                   if (row := snap.index.get(name)) is not None and row < near.size and inside[row])
        need = task.replicas - (0 if task.rebalance else held)
        room = _room(task, snap, inside, self.headroom) if inside.any() else 0.0
        if inside.any() and room >= need:
            # the distance the SLO is judged by: from the nearest user place (the share-weighted mean, the
            # score's, read as if the cluster were farther from every place than it is)
            nearest = np.fmin.reduce(mat, axis=0)  # NaN only where no place's latency is known
            reason = f"beyond the users' latency SLO of {slo:g} ms"

            # replicas already there stay (no growth) unless the spec changed: users moving within a
            # declared placement move them only when the move pays (`drods.schedulerd.users`)
            detail = latency_detail(reason, nearest, "from the nearest user place")
            return mask & ~far, [reject(self.name, reason, far, detail, capacity_only=not task.placement_changed)]
        besides = f" (besides the {held} already running within it)" if held and not task.rebalance else ""
        limit = f"water-level limit less its headroom of {self.headroom:g}" if self.headroom else "water-level limit"
        short = (f"only {int(room)} of the {need} replicas to place fit within {slo:g} ms of the users under the "
                 f"{limit}{besides}: the rest go to the nearest clusters beyond it")
        task.cache["latencySLO"] = f"{short}; {unserved}" if unserved else short
        return mask, []


def slo_headroom(args: dict[str, Any]) -> float:
    """``headroom`` of UserLatencySLO's pluginArgs (a water level in [0, 0.5); default `SLO_HEADROOM`)."""
    h = args.get("headroom", SLO_HEADROOM)
    if isinstance(h, bool) or not isinstance(h, int | float) or not 0 <= h < 0.5:
        raise ValueError(f"pluginArgs: UserLatencySLO headroom must be a water level in [0, 0.5), not {h!r}")
    return float(h)


def _unserved(users: UserDemand, mat: FloatArr, mask: BoolArr, slo: float) -> str:
    """Which user places no feasible cluster is within the SLO of ('' when every one has one): a cluster
    near other users passes the filter, so without this a decision would not say that some are not served."""
    seen = mat[:, mask]
    near: BoolArr = np.asarray((np.where(np.isnan(seen), np.inf, seen) <= slo).any(axis=1))
    known: BoolArr = np.asarray((~np.isnan(seen)).any(axis=1))
    lost = [u for u, ok, k in zip(users.shares, near.tolist(), known.tolist(), strict=True) if not ok and k]
    blind = [u for u, k in zip(users.shares, known.tolist(), strict=True) if not k]
    said = []
    if lost:
        places = ", ".join(f"{u.kind} {u.place} ({u.share:.0%} of them)" for u in lost)
        said.append(f"no feasible cluster is within {slo:g} ms of the users at {places}: they are served from "
                    f"beyond it")
    if blind:
        places = ", ".join(f"{u.kind} {u.place} ({u.share:.0%} of them)" for u in blind)
        said.append(f"no latency is known from the users at {places} to any feasible cluster: the {slo:g} ms SLO "
                    f"cannot be judged for them")
    return "; ".join(said)
