"""Failover (S11): bindings leave a NotReady cluster once their toleration has run out.

How long a binding stays (first match wins):

1. the binding's ``spec.placement.clusterTolerations`` entry that tolerates the taint
   ``cluster.multicluster.io/not-ready:NoExecute`` (or Karmada's ``cluster.karmada.io/not-ready`` /
   ``cluster.karmada.io/unreachable``, `drods.model.taints`) — its ``tolerationSeconds`` (none = forever:
   that binding never fails over);
2. the cluster's annotation ``multicluster.io/toleration-seconds``;
3. ``tolerationSeconds`` of the settings (30 s).

The clock starts at the Ready condition's ``lastTransitionTime`` to False. When it runs out, the
binding is handed to the `Rescheduler` (a ``spec.rescheduleTriggeredAt`` patch), and whichever
scheduler leads re-places that cluster's replicas on healthy clusters (those running elsewhere stay);
the binding controller then moves it gracefully
and the old copies are deleted — now if the member answers, else when it is back (`drods.controllers.cleanup`). One
trigger per binding and NotReady episode: a binding the scheduler can't move is not retriggered. The binding
remembers the cluster (``multicluster.io/failed-over-from``): once it is Ready and calm again the descheduler
offers it back (fail-back, `drods.controllers.descheduler`).

While no cluster is Ready and at least one is NotReady, nothing fails over for NotReady (a NoExecute taint
still evicts): when every member stops answering at once, the control plane more likely lost them (its
network, its own stall) than they all failed, and there is nowhere to move to — failing over would only
delete every member's copies when they come back. Once a cluster is Ready again, the NotReady clusters'
tolerations start from then, so members coming back one after another are not moved off in between
(Kubernetes' node lifecycle controller does both when every zone is fully disrupted). When most of the
fleet is NotReady but not all of it, failovers for NotReady go at a slow pace, or none on a small fleet
(`drods.controllers.eviction_pace`); bindings whose toleration ran out wait their turn, oldest first.
Whether failover is held and when it last resumed are kept in the store for the next leader: one that
takes over after a hold counts the tolerations from its end, and one that finds its predecessor held and
the fleet back counts them from its own start (when the hold ended is not known; later cannot be too soon).
"""

from __future__ import annotations

import asyncio
import heapq
import logging
import math
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial
from typing import Any

from drods.controllers.cluster_eviction import evict, release, tasked
from drods.controllers.eviction_pace import EvictionPace, Pace
from drods.controllers.fleet import MemberFleet, ready_condition
from drods.controllers.rescheduler import Rescheduler
from drods.controllers.settings import TOLERATION_ANNOTATION, MemberSettings, annotation_seconds
from drods.errors import ApiError
from drods.machinery.informer import subscribed
from drods.machinery.kept_state import read_kept_state, write_kept_state
from drods.machinery.metrics import queue_depth
from drods.machinery.periodic import Periodic
from drods.machinery.tasks import each_bounded, yielding
from drods.model.annotations import failover_reason
from drods.model.conditions import condition
from drods.model.keys import FAILOVER_STATE_KEY
from drods.model.kinds import BINDING, CLUSTER
from drods.model.taints import NOT_READY_TAINT, taint_key_matches
from drods.model.timefmt import parse_rfc3339, rfc3339_ms
from drods.scheduler.plugins.taint_toleration import tolerates

log = logging.getLogger(__name__)
Obj = dict[str, Any]


def toleration_seconds(binding: Obj, cluster: Obj, default: float) -> float | None:
    """Seconds ``binding`` stays on ``cluster`` once it is NotReady; None = it tolerates it for good."""
    placement = (binding.get("spec") or {}).get("placement") or {}
    for t in placement.get("clusterTolerations") or []:
        if not isinstance(t, dict):
            continue
        key, op, effect = t.get("key"), t.get("operator") or "Equal", t.get("effect")
        # Karmada's cluster.karmada.io/not-ready and /unreachable name the same taint (drods.model.taints)
        key_ok = taint_key_matches(key, NOT_READY_TAINT) if key else op == "Exists"
        if key_ok and effect in (None, "NoExecute"):
            secs = t.get("tolerationSeconds")
            return None if secs is None else float(secs)
    own = annotation_seconds(cluster, TOLERATION_ANNOTATION)
    return own if own is not None else default


def no_execute_taints(cluster: Obj) -> list[Obj]:
    """The cluster's NoExecute taints but the not-ready one (its clock is the Ready condition's)."""
    return [t for t in (cluster.get("spec") or {}).get("taints") or []
            if isinstance(t, dict) and t.get("effect") == "NoExecute" and t.get("key")
            and t.get("key") != NOT_READY_TAINT]


def taint_text(taint: Obj) -> str:
    return f"{taint['key']}={taint['value']}:NoExecute" if taint.get("value") else f"{taint['key']}:NoExecute"


def taint_toleration_seconds(binding: Obj, taint: Obj) -> float | None:
    """Seconds ``binding`` stays on a cluster with the NoExecute ``taint`` (Kubernetes' taint manager,
    Karmada's NoExecute eviction): 0 when no ``clusterTolerations`` entry tolerates it, the shortest
    ``tolerationSeconds`` of the matching entries, None (for good) when none of them has seconds —
    Karmada's ``GetMinTolerationTime``, the rule the scheduler's TaintToleration filter applies too."""
    placement = (binding.get("spec") or {}).get("placement") or {}
    key, value = str(taint["key"]), str(taint.get("value") or "")
    matching = [t for t in placement.get("clusterTolerations") or []
                if isinstance(t, dict) and tolerates((t.get("key"), str(t.get("operator") or "Equal"), t.get("value"),
                                                      t.get("effect")), key, value, "NoExecute")]
    if not matching:
        return 0.0
    timed = [float(t["tolerationSeconds"]) for t in matching if t.get("tolerationSeconds") is not None]
    return min(timed) if timed else None


def taint_reason(cluster: str, taint: Obj, toleration_s: float) -> str:
    """Read by the decision record (an Eviction) and shown on the Binding."""
    held = f" (toleration {toleration_s:g}s)" if toleration_s else " (not tolerated)"
    return f"taint {taint_text(taint)} on cluster {cluster}{held}"


def not_ready_since(cluster: Obj) -> float | None:
    c = condition(cluster, "Ready")
    return parse_rfc3339(c.get("lastTransitionTime")) if c is not None and c.get("status") == "False" else None


def may_evict(cluster: Obj) -> bool:
    """Could bindings have to leave the cluster: it is NotReady or has a NoExecute taint."""
    return not_ready_since(cluster) is not None or bool(no_execute_taints(cluster))


EVICTIONS_IN_FLIGHT = 32  # bindings a pass hands to the scheduler at once (their writes share commits)


@dataclass
class _Episode:
    """One NotReady (or NoExecute-taint) episode of a cluster."""

    since: float
    asked: set[str] = field(default_factory=set)  # bindings asked to move off since then: a name each
    ended: bool = False  # the cluster is back (or a new episode began): its waiting evictions are dropped


@dataclass(frozen=True)
class _Eviction:
    """One binding to move off one cluster, found by a pass. It holds the binding's name, not its
    object: read again when its turn comes, so a long pass keeps no superseded copy alive (a storm's
    pass over 100,000 bindings held each one's old object until the pass ended) and a second move
    of the same binding starts from what the first wrote."""

    binding: str
    cluster: str
    reason: str
    episode: _Episode  # the binding joins its ``asked`` once asked
    failed_over: bool


class Failover:
    def __init__(self, fleet: MemberFleet, settings: MemberSettings, rescheduler: Rescheduler, *,
                 clock: Callable[[], float] = time.time) -> None:
        self.rescheduler = rescheduler
        self.fleet = fleet
        self.settings = settings
        self.clock = clock
        # cluster → its episodes (the cluster's name, or name NUL taint) → their start and the bindings
        # asked to move off: a storm of 100,000 bindings keeps a name each, not a (binding, cluster, since)
        self.triggered: dict[str, dict[str, _Episode]] = {}
        self._looks: list[tuple[float, str]] = []  # (when a toleration runs out, cluster): a heap
        # bindings holding failover.cluster's eviction tasks: found by one scan on the first pass (a new
        # leader), then kept as this process writes them, so a recovery looks at those only
        self.tasked: set[str] = set()
        self.scanned = False
        # the clusters that `may_evict` (found by one scan on the first pass, then kept by `observe`), and
        # those of them a pass must look at again: changed, or a binding placed there changed. A pass looks
        # at those and at the episodes whose next toleration ran out, not at every binding of every
        # NotReady cluster: woken by each of 10,000 clusters turning NotReady, it held the event loop
        # so long that the clusters' own health writes lagged and a storm crept
        self.suspects: set[str] = set()
        self.dirty: set[str] = set()
        # the fleet's Ready and NotReady clusters, kept by `observe`: none Ready and some NotReady holds failover
        self.ready: set[str] = set()
        self.not_ready: set[str] = set()
        self.holding = False
        self.resumed_at = -math.inf  # when the fleet last left a hold: NotReady tolerations count from then
        self.unsaved = False  # the hold began or ended since the store last said so
        self.pace = EvictionPace(settings)
        self.paced: Pace = self.pace.rate(0, 0)[0]
        # failovers for NotReady due but not yet handed on at the fleet's pace: binding → its evictions, oldest first
        self.waiting: OrderedDict[str, list[_Eviction]] = OrderedDict()

    async def run(self) -> None:
        """A pass when a cluster turns NotReady (or tainted, or back) and at least every probe interval (a
        toleration running out); not only on a timer: a one-second poll was most of the time from
        NotReady to the replicas placed elsewhere."""
        await self.fleet.synced.wait()
        changed = asyncio.Event()
        passes = Periodic("failover", self.tick, min(1.0, self.settings.probeIntervalSeconds), wake=changed,
                          first_at_start=True)

        def on_cluster(key: str, old: Obj | None, new: Obj | None) -> None:
            if self.observe(key, old, new):
                changed.set()

        def on_binding(_key: str, _old: Obj | None, new: Obj | None) -> None:
            if self.observe_binding(new):
                changed.set()

        # the failovers waiting for their turn show as drods_workqueue_depth{controller="failover"}
        with subscribed((self.fleet.clusters, on_cluster), (self.fleet.bindings, on_binding)), \
                queue_depth("failover", self.waiting):
            await passes.run()

    def observe(self, key: str, old: Obj | None, new: Obj | None) -> bool:
        """Keep `suspects` as a cluster changes; True when a pass should look at it now (it turned
        NotReady or tainted, its episode changed, or it stopped: its episode ends)."""
        name = key[len(CLUSTER.key_prefix()):]
        self._readiness(name, new)
        if new is not None and may_evict(new):
            if name in self.suspects and old is not None and _episodes_of(old) == _episodes_of(new):
                return False  # a heartbeat of a NotReady cluster
            self.suspects.add(name)
        elif name in self.suspects:
            self.suspects.discard(name)
        else:
            return False
        self.dirty.add(name)
        return True

    def _readiness(self, name: str, cluster: Obj | None) -> None:
        status = ready_condition(cluster)
        (self.ready.add if status == "True" else self.ready.discard)(name)
        (self.not_ready.add if status == "False" else self.not_ready.discard)(name)

    def _hold(self, now: float) -> bool:
        """Whether NotReady failovers are held now (no cluster Ready, some NotReady); on leaving a hold the
        NotReady clusters are looked at again, their tolerations counted from ``now``."""
        held = self.settings.holdFailoverWhileNoneReady and not self.ready and bool(self.not_ready)
        if held and not self.holding:
            self.waiting.clear()  # due before the hold: looked at again when it ends, their tolerations from then
            log.warning("failover held: none of the %d clusters is Ready (%d NotReady) — the control plane more "
                        "likely lost them than they all failed; their tolerations start again once one is Ready",
                        len(self.ready) + len(self.not_ready), len(self.not_ready))
        elif self.holding and not held:
            self.resumed_at = now
            self.dirty |= self.suspects
            log.warning("failover resumed: %d cluster(s) Ready; the %d NotReady are moved off once their "
                        "tolerations run out from now", len(self.ready), len(self.not_ready))
        self.unsaved |= held != self.holding
        self.holding = held
        return held

    async def _load_state(self) -> None:
        """The previous leader's hold and the end of its last one (`_hold` ends a hold it was in now)."""
        doc = await read_kept_state(self.fleet.store, FAILOVER_STATE_KEY)
        self.holding = doc.get("holding") is True
        if self.holding:
            log.warning("failover: the previous leader held it (no cluster Ready); held until one is, the NotReady "
                        "clusters' tolerations counted from then (or from now, if one is already)")
        if isinstance(resumed := doc.get("resumedAt"), int | float):
            self.resumed_at = float(resumed)

    async def _save_state(self) -> None:
        resumed = self.resumed_at if math.isfinite(self.resumed_at) else None
        await write_kept_state(self.fleet.store, FAILOVER_STATE_KEY, {"holding": self.holding, "resumedAt": resumed})
        self.unsaved = False

    def observe_binding(self, binding: Obj | None) -> bool:
        """A binding placed on a suspect cluster changed (its tolerations, or placed there anew): that
        cluster is looked at again."""
        looked = False
        for t in ((binding or {}).get("status") or {}).get("placement") or []:
            if isinstance(t, dict) and t.get("cluster") in self.suspects:
                self.dirty.add(str(t["cluster"]))
                looked = True
        return looked

    async def tick(self) -> list[str]:
        """One pass; returns the bindings handed to the scheduler."""
        now = self.clock()
        starting = not self.scanned
        if starting:
            await self._load_state()
            self.tasked, self.scanned = tasked(self.fleet), True
            self.suspects = {key[len(CLUSTER.key_prefix()):] for key, c in list(self.fleet.clusters.cache.items())
                             if may_evict(c)}
            self.dirty |= self.suspects
            for key, c in list(self.fleet.clusters.cache.items()):
                self._readiness(key[len(CLUSTER.key_prefix()):], c)
        held = self._hold(now)
        if self.unsaved:  # before any failover it allows: a successor must not count from before this hold
            await self._save_state()
        look, self.dirty = self.dirty, set()
        while self._looks and self._looks[0][0] <= now:
            look.add(heapq.heappop(self._looks)[1])
        due: dict[str, list[_Eviction]] = {}
        recovered = False
        async for name in yielding(sorted(look), 100):  # 10,000 clusters turning NotReady at once: not one slice
            cluster = self.fleet.clusters.cache.get(CLUSTER.key(name)) if name in self.suspects else None
            current: set[str] = set()
            since = not_ready_since(cluster) if cluster is not None else None
            if cluster is not None and since is not None:
                current.add(name)  # held: the episode stays, looked at again when the hold ends
                if not held:
                    self._due(name, name, since, now, due,
                              partial(toleration_seconds, cluster=cluster, default=self.settings.tolerationSeconds),
                              partial(failover_reason, name, rfc3339_ms(since)), failed_over=True,
                              clock_from=max(since, self.resumed_at))
            for taint in no_execute_taints(cluster) if cluster is not None else []:
                episode = f"{name}\0{taint_text(taint)}"
                current.add(episode)
                added = parse_rfc3339(taint.get("timeAdded"))
                known = self.triggered.get(name, {}).get(episode)
                first = known.since if known is not None else added if added is not None else now
                self._due(name, episode, first, now, due, partial(taint_toleration_seconds, taint=taint),
                          partial(taint_reason, name, taint))
            episodes = self.triggered.get(name, {})
            for key in episodes.keys() - current:
                episodes.pop(key).ended = True
                recovered = True
            if not episodes:
                self.triggered.pop(name, None)
        due = self._paced(due, now)
        moved: list[str] = []

        async def evict_all(evictions: list[_Eviction]) -> None:
            written: Obj | None = None
            for e in evictions:
                done, written = await self._evict(e, now, written)
                if done:
                    moved.append(e.binding)

        # each a write that waits for its commit: one after another, a storm of 100,000 bindings
        # moved ~100 a second with the event loop mostly idle; a binding's own evictions stay in order
        await each_bounded(due.values(), evict_all, EVICTIONS_IN_FLIGHT)
        # failover.cluster's tasks for clusters fine again (on a first pass: whatever a previous leader left)
        if (recovered or starting) and self.tasked:
            self.tasked -= await release(self.fleet, self.rescheduler, set(self.triggered),
                                         sorted(self.tasked))
        return moved

    def _due(self, name: str, episode_key: str, since: float, now: float, due: dict[str, list[_Eviction]],
             toleration: Callable[[Obj], float | None], reason_of: Callable[[float], str], *,
             failed_over: bool = False, clock_from: float | None = None) -> None:
        """Add to ``due`` the bindings with replicas on ``name`` whose toleration of this episode (NotReady,
        or one NoExecute taint) ran out, once per binding and episode; note when the next one runs out.
        The tolerations count from ``clock_from`` (default: the episode's start)."""
        start = since if clock_from is None else clock_from
        episodes = self.triggered.setdefault(name, {})
        episode = episodes.get(episode_key)
        if episode is None or episode.since != since:
            if episode is not None:
                episode.ended = True
            episode = episodes[episode_key] = _Episode(since)
        next_look = math.inf
        for b in sorted(self.fleet.by_cluster.get(name, set()) - episode.asked):
            if any(e.episode is episode for e in self.waiting.get(b, ())):
                continue  # due already, waiting for its turn
            binding = self.fleet.bindings.cache.get(BINDING.key(b))
            if binding is None or (binding.get("metadata") or {}).get("deletionTimestamp"):
                continue
            status = binding.get("status") or {}
            if not any(isinstance(t, dict) and t.get("cluster") == name and int(t.get("replicas") or 0) > 0
                       for t in status.get("placement") or []):
                continue
            tol = toleration(binding)
            if tol is None:
                continue
            if now < start + tol:
                next_look = min(next_look, start + tol)
                continue
            scheduled = parse_rfc3339(status.get("scheduledTime"))
            asked = parse_rfc3339((binding.get("spec") or {}).get("rescheduleTriggeredAt"))
            if asked is not None and asked >= since and (scheduled is None or scheduled < asked):
                episode.asked.add(b)  # already asked for, the scheduler hasn't answered yet
                continue
            due.setdefault(b, []).append(_Eviction(b, name, reason_of(tol), episode, failed_over))
        if next_look < math.inf:
            heapq.heappush(self._looks, (next_look, name))

    def _paced(self, due: dict[str, list[_Eviction]], now: float) -> dict[str, list[_Eviction]]:
        """The evictions that go now: a NoExecute taint's at once (somebody's decision to empty the cluster),
        the failovers for NotReady at the fleet's pace, the oldest waiting first."""
        pace, rate = self.pace.rate(len(self.not_ready), len(self.fleet.clusters.cache))
        if pace != self.paced:
            self._log_pace(pace, rate)
            self.paced = pace
        if rate is None and not self.waiting:
            return due
        now_due: dict[str, list[_Eviction]] = {}
        for b, evictions in due.items():
            for e in evictions:
                (self.waiting.setdefault(b, []) if e.failed_over else now_due.setdefault(b, [])).append(e)
        allowed = taken = self.pace.take(len(self.waiting), rate, now)
        while taken and self.waiting:
            b, evictions = self.waiting.popitem(last=False)
            live = [e for e in evictions if not e.episode.ended]
            if live:
                now_due.setdefault(b, []).extend(live)
                taken -= 1
        self.pace.give_back(taken)
        if allowed and self.waiting:
            log.info("failover: %d binding(s) handed on, %d waiting (%s pace)", allowed - taken, len(self.waiting),
                     self.paced)
        return now_due

    def _log_pace(self, pace: Pace, rate: float | None) -> None:
        clusters, s = len(self.fleet.clusters.cache), self.settings
        if pace in ("slowed", "halted"):
            log.warning("failover %s: %d of %d clusters NotReady (over %g of the fleet, a fleet of %s %d clusters) — "
                        "%s", pace, len(self.not_ready), clusters, s.unhealthyClusterThreshold,
                        "more than" if clusters > s.largeClusterNumThreshold else "at most", s.largeClusterNumThreshold,
                        f"{rate:g} binding(s) a second" if pace == "slowed" else "none until fewer are")
        else:
            log.warning("failover at its %s pace again: %d of %d clusters NotReady (%s)", pace, len(self.not_ready),
                        clusters, "no limit" if rate is None else f"{rate:g} binding(s) a second")

    async def _evict(self, e: _Eviction, now: float, written: Obj | None) -> tuple[bool, Obj | None]:
        """Hand ``e.binding`` to the scheduler, starting from ``written`` (what this pass last wrote of it)
        or the cache; whether it was asked (a failed write is tried again next pass) and the Binding as
        written."""
        binding = written if written is not None else self.fleet.bindings.cache.get(BINDING.key(e.binding))
        if binding is None or (binding.get("metadata") or {}).get("deletionTimestamp"):
            return False, None
        try:
            tasked, written = await evict(self.fleet, self.rescheduler, e.binding, binding, e.cluster, e.reason, now,
                                          failed_over=e.failed_over)
        except ApiError as err:
            log.warning("failover of %s off %s failed: %s", e.binding, e.cluster, err.message)
            self.dirty.add(e.cluster)  # asked again next pass
            return False, None
        if tasked:
            self.tasked.add(e.binding)
        e.episode.asked.add(e.binding)
        log.info("failover: %s rescheduled: %s", e.binding, e.reason)
        return True, written


def _episodes_of(cluster: Obj) -> tuple[float | None, list[str], float | None]:
    """What decides a cluster's episodes and their tolerations: since when it is NotReady, its NoExecute
    taints, and its own toleration annotation."""
    return (not_ready_since(cluster), [taint_text(t) for t in no_execute_taints(cluster)],
            annotation_seconds(cluster, TOLERATION_ANNOTATION))
