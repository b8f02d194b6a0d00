"""The descheduler: automatic operations (A4, F6, S11, H1) as a controller.

Evacuate on a sustained ``/events/sustained/<cluster>/`` event, pre-allocate ahead of a forecast
peak, restore once a cluster is calm again, fail back once a cluster failover moved replicas off is
Ready and calm for the damping window, shave a cluster standing above the fleet's achievable level
(`drods.controllers.peak_shave`) — each decided by the pure policy in
`drods.monitor.autoops`, carried out by the `Rescheduler`, recorded in monitoring's operations log —
and, when given a `TrafficRebalancer` (`drods.controllers.traffic_rebalance`), move placed workloads
nearer the traffic peers that arrived after them. It runs while its process leads
``/leases/descheduler``.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

from drods.controllers.peak_shave import PeakShaver
from drods.controllers.traffic_rebalance import TrafficRebalancer
from drods.machinery.informer import Informer
from drods.machinery.kept_state import read_kept_state, write_kept_state
from drods.machinery.periodic import Periodic
from drods.machinery.tasks import yielding
from drods.model.annotations import evacuated_from, failed_over_from
from drods.model.keys import DESCHEDULER_STATE_KEY, SUSTAINED_EVENTS_PREFIX
from drods.model.preallocation import parse_hold
from drods.model.reschedule import RescheduleHook
from drods.model.timefmt import rfc3339
from drods.monitor.autoops import Action, AutoOps, AutoOpsPolicy, RestoreWatch, execute
from drods.monitor.fleetview import ClusterInfo
from drods.monitor.service import MonitorService
from drods.registry.objects import ObjectRegistry
from drods.store import EventType, Store

# X1: a decision names the water level of its cluster and of this many other clusters (the lowest)
WATER_LEVELS_NAMED = 10
# the peak-shave pass (every Binding read) takes at most a tenth of the process: its period is
# stretched to ten times its last pass's time (the damping window it feeds is 30 min by default)
SHAVE_PACE = 10.0


def water_levels(svc: MonitorService, cluster: str, details: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """What the descheduler saw (X1): ``cluster``'s water level and limit and the lowest other
    active clusters' — where the load could go."""
    def seen(c: str, wl: float | None) -> dict[str, Any]:
        return {"waterLevel": None if wl is None else round(wl, 4), "limit": round(svc.water_level_limit(c), 4)}

    others = sorted((d["waterLevel"], c) for c, d in details.items()
                    if c != cluster and d["active"] and d["waterLevel"] is not None)
    out = {cluster: seen(cluster, (details.get(cluster) or {}).get("waterLevel"))}
    out.update({c: seen(c, wl) for wl, c in others[:WATER_LEVELS_NAMED]})
    return out


def _candidates(svc: MonitorService, cluster: str) -> int:
    """Other active clusters whose water level is below their own limit: where load could go."""
    _, details = svc.fleet.realtime(svc.settings.activeMaxAgeSeconds)
    return sum(1 for c, d in details.items()
               if c != cluster and d["active"] and d["waterLevel"] is not None
               and d["waterLevel"] < svc.water_level_limit(c))


class Descheduler:
    """Automatic operations as a single-active controller; its state is rebuilt from the store (the
    Bindings' ``evacuated-from`` annotations) whenever it (re)gains the lease."""

    def __init__(self, store: Store, registry: ObjectRegistry, monitor: MonitorService,
                 rescheduler: RescheduleHook | None, bindings: Informer, policy: AutoOpsPolicy | None = None,
                 traffic: TrafficRebalancer | None = None) -> None:
        self.store = store
        self.registry = registry
        self.bindings = bindings  # the process's shared cache of Bindings (`decode_binding_kept`)
        self.svc = monitor
        self.rescheduler = rescheduler
        self.policy = policy or monitor.autoops  # the ``autoops`` section of the configuration
        self.ops = AutoOps(self.policy)
        self.holds: dict[str, float] = {}  # cluster → end of the pre-allocation decided for it
        # clusters replicas were moved away from → since when they have been calm (None: not calm)
        self.restores = RestoreWatch(self.ops)
        # clusters failover may have moved replicas off → since when Ready and calm (fail-back)
        self.failbacks = RestoreWatch(self.ops, self.policy.failbackAfterSeconds)
        self.traffic = traffic  # H1: the traffic rebalance passes (None: not in this process)
        self.shaver = PeakShaver(monitor, registry, self.policy, bindings)

    async def run(self) -> None:
        await self._load_state()
        await self.bindings.wait_synced()
        async for obj in yielding(list(self.bindings.cache.values())):
            if obj is None:
                continue
            for c in evacuated_from(obj):
                self.restores.moved(c)
            for c in failed_over_from(obj):
                self.failbacks.moved(c)
        check = min(5.0, max(self.policy.restoreAfterSeconds / 10.0, 0.1))
        check_back = min(5.0, max(self.policy.failbackAfterSeconds / 10.0, 0.1))
        stop_hearing = self.svc.fleet.on_cluster_change(self._on_cluster)
        for name, info in self.svc.fleet.clusters.items():  # NotReady before this leader heard of it
            self._on_cluster(name, None, info)
        try:
            await asyncio.gather(self.on_sustained(),
                                 Periodic("failback", self.failback, check_back).run(),
                                 Periodic("pre-allocation", self.preallocate,
                                          self.svc.settings.forecastIntervalSeconds).run(),
                                 Periodic("restore", self.restore, check).run(),
                                 # a pass reads every Binding: at 100,000 it took ~15 s of each minute
                                 Periodic("peak-shave", self.peakshave, self.shave_interval(), pace=SHAVE_PACE).run(),
                                 *((self.traffic.run(),) if self.traffic is not None else ()))
        finally:
            stop_hearing()

    def shave_interval(self) -> float:
        """Seconds between peak-shaving passes: 30 a damping window and 5 a shorter window far above
        (each window seen often enough to start near its beginning), at most a minute."""
        p = self.policy
        windows = [p.peakshaveAfterSeconds / 30.0]
        if p.peakshaveSevereMargin is not None:
            windows.append(p.peakshaveSevereAfterSeconds / 5.0)
        return min(60.0, max(min(windows), 0.1))

    def _on_cluster(self, name: str, old: ClusterInfo | None, new: ClusterInfo | None) -> None:
        """Every NotReady is heard, however short: a fail-back pass sees only the readiness of its moment."""
        if new is not None and new.ready is False:
            self.failbacks.moved(name)

    async def _load_state(self) -> None:
        """A6: the previous leader's cooldowns, rate limit and pre-allocation holds go on counting."""
        doc = await read_kept_state(self.store, DESCHEDULER_STATE_KEY)
        if not doc:
            return
        now = self.svc.clock()
        self.ops.restore(doc, now)
        holds = doc.get("holds") or {}
        self.holds = {str(c): float(t) for c, t in holds.items() if isinstance(t, int | float) and t > now}

    async def _save_state(self) -> None:
        await write_kept_state(self.store, DESCHEDULER_STATE_KEY, {**self.ops.state(), "holds": self.holds})

    async def _execute(self, action: Action, cluster: str, reason: str, details: dict[str, Any]) -> str:
        svc = self.svc
        _, fleet = svc.fleet.realtime(svc.settings.activeMaxAgeSeconds)
        details = {**details, "waterLevels": water_levels(svc, cluster, fleet)}
        outcome, result = await execute(self.ops, action, cluster, reason, svc.clock(),
                                        candidates=_candidates(svc, cluster), details=details,
                                        hook=self.rescheduler, record=svc.operations.append,
                                        persist=self._save_state)
        moved_off = action in ("evacuate", "preallocate")  # restore, fail-back and peak shaves offer nothing back
        if moved_off and result is not None and result.accepted and result.bindings:
            self.restores.moved(cluster)
        return outcome

    async def on_sustained(self) -> None:
        store = self.store
        rev = await store.current_revision()
        async for ev in store.watch(SUSTAINED_EVENTS_PREFIX, start_revision=rev + 1):
            if ev.type is not EventType.PUT:
                continue
            try:
                body = json.loads(ev.kv.value)
            except ValueError:
                continue
            if body.get("kind") != "sustained":
                continue
            cluster = str(body.get("cluster"))
            reason = (f"water level {body.get('value', 0):.2f} above the limit {body.get('limit', 0):.2f} "
                      f"since {body.get('since')}")
            await self._execute("evacuate", cluster, reason, body)

    async def peakshave(self) -> None:
        """Shave each cluster hot for the damping window: a ``Rebalance`` with the levels before and after."""
        async def act(cluster: str, reason: str, details: dict[str, Any]) -> str:
            return await self._execute("peakshave", cluster, reason, details)

        await self.shaver.run(act)

    def _threshold(self, cluster: str) -> float:
        return self.policy.preallocateThreshold or self.svc.water_level_limit(cluster)

    async def preallocate(self) -> None:
        svc, horizon = self.svc, self.policy.preallocateHorizonMinutes
        now = svc.clock()
        _, details = svc.fleet.realtime(svc.settings.activeMaxAgeSeconds)
        for c, d in details.items():
            threshold = self._threshold(c)
            predicted = svc.forecaster.modelled_water_level_in(c, horizon)
            now_wl = d["waterLevel"]
            peak = d["active"] and predicted is not None and predicted >= threshold and \
                (now_wl is None or now_wl < threshold)
            if not peak:
                if self.holds.pop(c, None) is not None:
                    await self._save_state()
                continue
            if self.holds.get(c, 0.0) > now:
                continue  # one decision per hold: the scheduler already sees this peak
            self.holds[c] = now + horizon * 60.0
            await self._save_state()
            reason = f"forecast water level {predicted:.2f} within {horizon:g} min reaches {threshold:.2f}"
            await self._execute("preallocate", c, reason, {"forecast": predicted, "horizonMinutes": horizon,
                                                           "threshold": threshold, "waterLevel": now_wl})

    def _calm(self, cluster: str, details: dict[str, Any], now: float) -> bool:
        """Below its limit minus the hysteresis, no peak forecast and no pre-allocation hold."""
        svc = self.svc
        d, info = details.get(cluster), svc.fleet.clusters.get(cluster)
        if d is None or info is None or not d["active"] or d["waterLevel"] is None:
            return False
        if d["waterLevel"] >= svc.water_level_limit(cluster) - svc.settings.limitHysteresis:
            return False
        hold = parse_hold(info.annotations)
        if self.holds.get(cluster, 0.0) > now or (hold is not None and hold.active(now)):
            return False
        predicted = svc.forecaster.modelled_water_level_in(cluster, self.policy.preallocateHorizonMinutes)
        return predicted is None or predicted < self._threshold(cluster)

    async def restore(self) -> None:
        if not (self.policy.enabled and self.policy.restore):
            return  # the bindings keep their annotation: enabling it later offers them back
        _, details = self.svc.fleet.realtime(self.svc.settings.activeMaxAgeSeconds)
        await self._offer_back(self.restores, "restore", details)

    async def failback(self) -> None:
        """S11 fail-back: a cluster seen NotReady is watched; once Ready and calm (`_calm`) for
        ``failbackAfterSeconds`` the bindings that failed over from it are re-placed (a Rebalance)."""
        if not (self.policy.enabled and self.policy.failback):
            return  # the bindings keep their annotation: enabling it later offers them back
        _, details = self.svc.fleet.realtime(self.svc.settings.activeMaxAgeSeconds)
        await self._offer_back(self.failbacks, "failback", details)

    async def _offer_back(self, watch: RestoreWatch, action: Action, details: dict[str, Any]) -> None:
        """Restore or fail back each watched cluster calm for the watch's window."""
        svc = self.svc
        now = svc.clock()
        for c in list(watch.calm_since):
            if c not in svc.fleet.clusters:
                watch.forget(c)  # deleted: nothing to offer back
                continue
            since = watch.due(c, self._calm(c, details, now), now)
            if since is None:
                continue
            calm = (f"water level {details[c]['waterLevel']:.2f} below the limit "
                    f"{svc.water_level_limit(c):.2f} for {now - since:.0f}s")
            if action == "failback":
                reason, info = f"cluster {c} Ready again, {calm}", {"readySince": rfc3339(since), "recovered": c}
            else:
                reason, info = calm, {"calmSince": rfc3339(since)}
            outcome = await self._execute(action, c, reason, {"waterLevel": details[c]["waterLevel"], **info})
            watch.done(c, outcome, now)
