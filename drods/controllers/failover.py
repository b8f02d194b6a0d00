"""Failover (S11): bindings leave a NotReady cluster once their toleration has run out.

How long a binding stays (first match wins):

1. the binding's ``spec.placement.clusterTolerations`` entry that tolerates the taint
   ``cluster.multicluster.io/not-ready:NoExecute`` — its ``tolerationSeconds`` (none = forever:
   that binding never fails over);
2. the cluster's annotation ``multicluster.io/toleration-seconds``;
3. ``tolerationSeconds`` of the settings (30 s).

The clock starts at the Ready condition's ``lastTransitionTime`` to False. When it runs out, the
binding is handed to the `Rescheduler` (a ``spec.rescheduleTriggeredAt`` patch), and whichever
scheduler leads re-places it from scratch on healthy clusters; the binding controller then moves it gracefully
and the old copies are deleted — now if the member answers, else when it is back (`drods.controllers.cleanup`). One
trigger per binding and NotReady episode: a binding the scheduler can't move is not retriggered. The binding
remembers the cluster (``multicluster.io/failed-over-from``): once it is Ready and calm again the descheduler
offers it back (fail-back, `drods.controllers.descheduler`).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from functools import partial
from typing import Any

from drods.controllers.cluster_eviction import evict, release, tasked
from drods.controllers.fleet import MemberFleet
from drods.controllers.health import NOT_READY_TAINT
from drods.controllers.rescheduler import Rescheduler
from drods.controllers.settings import TOLERATION_ANNOTATION, MemberSettings, annotation_seconds
from drods.errors import ApiError
from drods.machinery.informer import subscribed
from drods.machinery.periodic import Periodic
from drods.model.annotations import failover_reason
from drods.model.conditions import condition
from drods.model.kinds import BINDING, CLUSTER
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
        key_ok = key == NOT_READY_TAINT or (op == "Exists" and not key)
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
    Karmada's NoExecute eviction): 0 when no ``clusterTolerations`` entry tolerates it, the matching
    entry's ``tolerationSeconds``, None (for good) when that entry has none."""
    placement = (binding.get("spec") or {}).get("placement") or {}
    key, value = str(taint["key"]), str(taint.get("value") or "")
    for t in placement.get("clusterTolerations") or []:
        if isinstance(t, dict) and tolerates((t.get("key"), str(t.get("operator") or "Equal"), t.get("value"),
                                              t.get("effect")), key, value, "NoExecute"):
            secs = t.get("tolerationSeconds")
            return None if secs is None else float(secs)
    return 0.0


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


class Failover:
    def __init__(self, fleet: MemberFleet, settings: MemberSettings, rescheduler: Rescheduler, *,
                 clock: Callable[[], float] = time.time) -> None:
        self.rescheduler = rescheduler
        self.fleet = fleet
        self.settings = settings
        self.clock = clock
        # cluster → (since when it is NotReady, the bindings asked to move off it since then): per
        # cluster, so a storm of 100,000 bindings keeps a name each, not a (binding, cluster, since)
        self.triggered: dict[str, tuple[float, set[str]]] = {}
        # bindings holding failover.cluster's eviction tasks: found by one scan on the first pass (a new
        # leader), then kept as this process writes them, so a recovery looks at those only
        self.tasked: set[str] = set()
        self.scanned = False
        # the clusters that `may_evict`: a pass looks at these only (found by one scan on the first
        # pass, then kept by `observe`), not at 10,000 clusters each time one of them reports
        self.suspects: set[str] = set()

    async def run(self) -> None:
        """A pass when a cluster's status changes (it turns NotReady) and at least every probe
        interval (a toleration running out); not only on a timer: a one-second poll was most of
        the time from NotReady to the replicas placed elsewhere."""
        await self.fleet.synced.wait()
        changed = asyncio.Event()
        passes = Periodic("failover", self.tick, min(1.0, self.settings.probeIntervalSeconds), wake=changed,
                          first_at_start=True)

        def on_cluster(key: str, old: Obj | None, new: Obj | None) -> None:
            if self.observe(key, old, new):
                changed.set()

        with subscribed((self.fleet.clusters, on_cluster)):
            await passes.run()

    def observe(self, key: str, _old: Obj | None, new: Obj | None) -> bool:
        """Keep `suspects` as a cluster changes; True when a pass should look at it now (it may evict,
        or it just stopped: its episode ends)."""
        name = key[len(CLUSTER.key_prefix()):]
        if new is not None and may_evict(new):
            self.suspects.add(name)
            return True
        if name in self.suspects:
            self.suspects.discard(name)
            return True
        return False

    async def tick(self) -> list[str]:
        """One pass; returns the bindings handed to the scheduler."""
        now = self.clock()
        starting = not self.scanned
        if starting:
            self.tasked, self.scanned = tasked(self.fleet), True
            self.suspects = {key[len(CLUSTER.key_prefix()):] for key, c in list(self.fleet.clusters.cache.items())
                             if may_evict(c)}
        moved: list[str] = []
        down: set[str] = set()
        for name in sorted(self.suspects):
            cluster = self.fleet.clusters.cache.get(CLUSTER.key(name))
            if cluster is None:
                continue
            since = not_ready_since(cluster)
            if since is not None:
                down.add(name)
                await self._evict(name, name, since, now, moved,
                                  partial(toleration_seconds, cluster=cluster, default=self.settings.tolerationSeconds),
                                  partial(failover_reason, name, rfc3339_ms(since)), failed_over=True)
            for taint in no_execute_taints(cluster):
                episode = f"{name}\0{taint_text(taint)}"
                down.add(episode)
                added = parse_rfc3339(taint.get("timeAdded"))
                first = self.triggered.get(episode, (added if added is not None else now, set()))[0]
                await self._evict(name, episode, first, now, moved, partial(taint_toleration_seconds, taint=taint),
                                  partial(taint_reason, name, taint))
        recovered = self.triggered.keys() - down
        for key in recovered:
            del self.triggered[key]
        # failover.cluster's tasks for clusters fine again (on a first pass: whatever a previous leader left)
        if (recovered or starting) and self.tasked:
            self.tasked -= await release(self.fleet, self.rescheduler, {k.split("\0")[0] for k in down},
                                         sorted(self.tasked))
        return moved

    async def _evict(self, name: str, episode_key: str, since: float, now: float, moved: list[str],
                     toleration: Callable[[Obj], float | None], reason_of: Callable[[float], str], *,
                     failed_over: bool = False) -> None:
        """Hand the bindings with replicas on ``name`` whose toleration of this episode (NotReady, or one
        NoExecute taint) ran out to the scheduler; once per binding and episode."""
        episode = self.triggered.get(episode_key)
        if episode is None or episode[0] != since:
            episode = self.triggered[episode_key] = (since, set())
        requested = episode[1]
        for b in sorted(self.fleet.by_cluster.get(name, set())):
            binding = self.fleet.bindings.cache.get(BINDING.key(b))
            if binding is None or (binding.get("metadata") or {}).get("deletionTimestamp") or b in requested:
                continue
            status = binding.get("status") or {}
            if not any(isinstance(t, dict) and t.get("cluster") == name and int(t.get("replicas") or 0) > 0
                       for t in status.get("placement") or []):
                continue
            tol = toleration(binding)
            if tol is None or now < since + tol:
                continue
            scheduled = parse_rfc3339(status.get("scheduledTime"))
            asked = parse_rfc3339((binding.get("spec") or {}).get("rescheduleTriggeredAt"))
            if asked is not None and asked >= since and (scheduled is None or scheduled < asked):
                requested.add(b)  # already asked for, the scheduler hasn't answered yet
                continue
            reason = reason_of(tol)
            try:
                if await evict(self.fleet, self.rescheduler, b, binding, name, reason, now, failed_over=failed_over):
                    self.tasked.add(b)
            except ApiError as e:
                log.warning("failover of %s off %s failed: %s", b, name, e.message)
                continue
            requested.add(b)
            moved.append(b)
            log.info("failover: %s rescheduled: %s", b, reason)
