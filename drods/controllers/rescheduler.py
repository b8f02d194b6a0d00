"""The one way to ask for a re-placement (S11, A4, F6): `Rescheduler`.

Everything that moves replicas — cluster failover, ``drods cluster drain``, monitoring's automatic
operations — says so on the Binding (``spec.rescheduleTriggeredAt`` plus a reason annotation) and
lets whichever scheduler leads re-place it from scratch. The object is the record: a restarted
component resumes from it, and a user reads on the Binding why it moved.

The descheduler (automatic operations, `drods.controllers.descheduler`) sends a `RescheduleRequest`:

* ``evacuate`` — a cluster stayed above its water-level limit: re-place the bindings with the most
  replicas there until ``fraction`` of its replicas are covered; the scheduler skips clusters above
  their limit, so those replicas land elsewhere. Each binding remembers the cluster in
  ``multicluster.io/evacuated-from``. A StatefulSet that declares a migration hook gets a
  MigrationPlan instead (F3, `drods.migration`), so its data moves with it.
* ``preallocate`` — the forecast says the cluster will cross its threshold within the horizon: put a
  hold on the Cluster (``multicluster.io/preallocation``: the forecast water level until the horizon
  ends) so the scheduler already sees the peak, then re-place ``fraction`` of its replicas as for an
  evacuation — the capacity elsewhere is taken before the peak arrives.
* ``restore`` — a cluster replicas were moved away from is calm again: re-place the bindings that
  remember it, so the scheduler can offer it their replicas back (refused while a hold is active).
* ``offer`` — placement feedback from traffic steering (CATS CCC, `drods.steering`): no instance of
  a service meets its SLA for some client site, and ``cluster`` is near it. The binding named in
  ``details["binding"]`` remembers the offer (``multicluster.io/placement-offers``) and is re-placed;
  the scheduler adds offered clusters to the names the binding may use
  (`drods.model.binding.with_offers`), so a Duplicated workload gains a copy there; the reschedule keeps
  what runs (`drods.model.annotations.offered`), so an offer never drops a copy. Refused for a
  binding that follows the users learned for the service (``details["serviceId"]``;
  `drods.model.annotations.follows_learned_users`): one owner per binding — the learned demand already
  holds that client site and the latency SLO decides, so an offer only re-decided it to no effect.
  Steering offers such a binding nothing; the refusal covers an offer sent before its cache saw the users.
  When the registration goes, steering drops the binding's offers with its learned users (`drods.steering.users`).
* ``failback`` — a cluster failover moved replicas off is Ready and calm again: re-place the
  bindings that remember it in ``multicluster.io/failed-over-from`` (written by `failover`) with a
  reason beginning "fail back to <cluster>", so the scheduler may take them back there — within the
  fleet's move budget (`drods.schedulerd.service`); the binding forgets the cluster.
* ``peakshave`` — a cluster stood above the fleet's achievable level, or has room again for replicas
  away from their users (``details["kind"]``: ``return``; `drods.controllers.peak_shave`): each binding
  in ``details["moves"]`` is re-placed with exactly its planned moves
  (``multicluster.io/peak-shave-moves``, applied by `drods.schedulerd.shaving` within the move budget).
* ``rebalance`` — traffic rebalance (H1, `drods.controllers.traffic_rebalance`): the binding named in
  ``details["binding"]`` is re-placed from scratch, so TrafficAffinity can take it to the peers that
  arrived after it; ``multicluster.io/traffic-rebalanced-at`` (``details["at"]``, else now) starts its
  cool-down.

Moves are graceful: the propagation controller starts the new copies before it removes old ones.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Mapping
from dataclasses import replace
from typing import Any

from drods.errors import ApiError, Conflict, NotFound
from drods.machinery.decision_log import decision_log, record_decisions
from drods.model.annotations import (
    EVACUATED_FROM,
    FAIL_BACK,
    FAILED_OVER_FROM,
    MIGRATION_HOOK,
    PEAK_SHAVE_MOVES,
    PINNED_PLACEMENT,
    PLACEMENT_OFFERS,
    PREALLOCATION,
    RESCHEDULE_REASON,
    TRAFFIC_REBALANCED_AT,
    drain_reason,
    evacuated_from,
    failed_over_from,
    follows_learned_users,
    offer_reason,
    placement_offers,
)
from drods.model.decision import EVICTION
from drods.model.kinds import BINDING, CLUSTER, MIGRATION_PLAN, by_kind
from drods.model.migration import COPY_IMAGE, NO_DATA, declared_hook, plan_object
from drods.model.preallocation import PreallocationHold, parse_hold
from drods.model.reschedule import DataMove, RescheduleRequest, RescheduleResult, choose_evacuation, considered
from drods.model.timefmt import rfc3339_ms
from drods.model.volume_claims import workload_claims
from drods.registry.objects import Obj, ObjectRegistry
from drods.registry.patch import MERGE_PATCH

PLAN_KINDS = ("StatefulSet", "Deployment")  # the kinds a MigrationPlan moves (`drods.model.migration`)


async def trigger(registry: ObjectRegistry, name: str, reason: str, clock: Callable[[], float] = time.time,
                  annotations: Mapping[str, str | None] | None = None,
                  spec: Mapping[str, Any] | None = None, resource_version: str | None = None) -> Obj:
    """Ask for ``name`` to be re-placed from scratch; ``annotations`` are set (None removes) and
    ``spec`` fields merged in the same write; ``resource_version``: only over that version (else a
    ``Conflict``). Returns the Binding as written."""
    meta: dict[str, Any] = {"annotations": {RESCHEDULE_REASON: (reason or "requested")[:1024], **(annotations or {})}}
    if resource_version is not None:
        meta["resourceVersion"] = resource_version
    patch = {"metadata": meta, "spec": {**(spec or {}), "rescheduleTriggeredAt": rfc3339_ms(clock())}}
    return await registry.patch(BINDING, name, patch, MERGE_PATCH)  # re-applied by the registry after a lost race


def _replicas_on(binding: Mapping[str, Any], cluster: str) -> int:
    """Replicas a live Binding places on ``cluster`` (0 while it is being deleted)."""
    if binding["metadata"].get("deletionTimestamp"):
        return 0
    return sum(int(t.get("replicas") or 0) for t in (binding.get("status") or {}).get("placement") or []
               if isinstance(t, dict) and t.get("cluster") == cluster)


FAILOVER_ATTEMPTS = 8  # reads and writes of a Binding before a failover gives up on a busy one


def _joined(clusters: list[str]) -> str | None:
    return ",".join(sorted(set(clusters))) or None


class Rescheduler:
    """``await rescheduler("binding", "reason")`` or ``await rescheduler(RescheduleRequest)``; any process
    with a registry has one (it only writes Bindings and Clusters)."""

    def __init__(self, registry: ObjectRegistry, clock: Callable[[], float] = time.time,
                 volume_copy_image: str | None = COPY_IMAGE, freeze_seconds: float = 60.0) -> None:
        self.registry = registry
        self.clock = clock
        self.volume_copy_image = volume_copy_image  # the default mover of a workload with claims (F3)
        self.freeze_seconds = freeze_seconds  # … and its write freeze

    async def __call__(self, target: str | RescheduleRequest, reason: str = "") -> RescheduleResult:
        if isinstance(target, str):
            await self.binding(target, reason)
            return RescheduleResult(True, 0, f"binding {target} queued for rescheduling")
        if target.action == "evacuate":
            return await self.evacuate(target)
        if target.action == "preallocate":
            return await self.preallocate(target)
        if target.action == "restore":
            return await self.restore(target)
        if target.action == "offer":
            return await self.offer(target)
        if target.action == "rebalance":
            return await self.rebalance(target)
        if target.action == "peakshave":
            return await self.peakshave(target)
        if target.action == "failback":
            return await self.failback(target)
        return RescheduleResult(False, 0, f"{target.action} is not supported by the scheduler; nothing moved")

    async def binding(self, name: str, reason: str) -> None:
        await trigger(self.registry, name, reason, self.clock)

    async def failover(self, name: str, cluster: str, reason: str) -> Obj:
        """S11: move ``name`` off ``cluster`` and remember it with the clusters it already failed over
        from, so it can fail back — read and written over one version: several clusters failing at
        once each add theirs (a write over a stale list lost one, and that cluster was then offered
        its copies back as soon as it recovered). Returns the Binding as written."""
        for _ in range(FAILOVER_ATTEMPTS):
            current = await self.registry.get(BINDING, name)
            moved = _joined([*failed_over_from(current), cluster])
            try:
                return await trigger(self.registry, name, reason, self.clock, {FAILED_OVER_FROM: moved},
                                     resource_version=str(current["metadata"]["resourceVersion"]))
            except Conflict:
                continue
        raise Conflict(f"binding {name} kept changing while failing over from {cluster}", {"name": name})

    async def failback(self, req: RescheduleRequest) -> RescheduleResult:
        """Offer a recovered cluster back to the bindings that failed over from it."""
        cluster = await self.registry.try_get(CLUSTER, req.cluster)
        names: list[str] = []
        replicas = 0
        for obj in await self.registry.scan(BINDING):
            before = failed_over_from(obj)
            if req.cluster not in before or obj["metadata"].get("deletionTimestamp"):
                continue
            name = obj["metadata"]["name"]
            rest = {FAILED_OVER_FROM: _joined([c for c in before if c != req.cluster])}
            if cluster is None:  # deleted: nothing to go back to
                await self.registry.patch(BINDING, name, {"metadata": {"annotations": rest}}, MERGE_PATCH)
                continue
            await trigger(self.registry, name, f"{FAIL_BACK} {req.cluster}: {req.reason}", self.clock, rest)
            names.append(name)
            replicas += int(((obj.get("spec") or {}).get("replicas")) or 0)
        if not names:
            return RescheduleResult(False, 0, f"no binding failed over from {req.cluster}")
        return RescheduleResult(True, 0, f"offering recovered {req.cluster} back to {len(names)} "
                                         f"binding(s): {', '.join(names[:10])}", tuple(names), offered=replicas)

    async def evacuate(self, req: RescheduleRequest) -> RescheduleResult:
        by_name = {obj["metadata"]["name"]: (n, obj) for obj in await self.registry.scan(BINDING)
                   if (n := _replicas_on(obj, req.cluster)) > 0}
        total = sum(n for n, _ in by_name.values())
        if not total:
            return RescheduleResult(False, 0, f"no binding has replicas on {req.cluster}")
        on_cluster = [(n, name) for name, (n, _) in by_name.items()]
        chosen = choose_evacuation(on_cluster, req.fraction)
        moved = 0
        names: list[str] = []
        refused: list[str] = []
        for n, name in chosen:
            why = f"{req.action} {req.cluster}: {req.reason}"
            obj = by_name[name][1]
            move = await self._migrate(obj, req.cluster, why)
            if move.refused:
                refused.append(f"{name}: {move.refused}")
                await self._record_refusal(move, req.cluster, why)
                continue
            if move.plain:
                await trigger(self.registry, name, why, self.clock,
                              {EVACUATED_FROM: _joined([*evacuated_from(obj), req.cluster])})
            moved += n
            names.append(name)
        weighed, omitted = considered(on_cluster, chosen)
        left = f"; {len(refused)} left in place (data would not move): {'; '.join(refused)}" if refused else ""
        return RescheduleResult(bool(names) or not refused, moved,
                                f"rescheduling {len(names)} binding(s) with {moved}/{total} replicas "
                                f"on {req.cluster}: {', '.join(names[:10])}{left}", tuple(names),
                                considered=weighed, omitted=omitted, refused=tuple(refused))

    async def drain(self, cluster: str, reason: str = "", dry_run: bool = False) -> RescheduleResult:
        """Cordon ``cluster`` and move every binding with replicas there (``drods cluster drain`` and
        the dashboard's drain): a StatefulSet that declares a migration hook by a MigrationPlan, the
        others re-placed from scratch (propagation moves them gracefully). Nothing is marked as
        evacuated: the descheduler offers a drained cluster nothing back; on its uncordon a Duplicated copy
        or a static-weight share returns (the fleet change), a divided binding's replicas do not. A ``dry_run`` writes
        nothing and answers the plan: the bindings it would re-place, the StatefulSets
        ("namespace/name") that would get a MigrationPlan (in ``plans``)."""
        if dry_run:
            await self.registry.get(CLUSTER, cluster)  # 404 for a cluster that does not exist
        else:
            await self.registry.patch(CLUSTER, cluster, {"spec": {"unschedulable": True}}, MERGE_PATCH)
        why = drain_reason(cluster, reason)
        names: list[str] = []
        as_read: list[Mapping[str, Any]] = []
        plans: list[str] = []
        moved = 0
        refused: list[str] = []
        for obj in await self.registry.scan(BINDING):
            n = _replicas_on(obj, cluster)
            if n <= 0:
                continue
            bname = obj["metadata"]["name"]
            if dry_run:
                move = await self._migration_of(obj)
                move = replace(move, plan="/".join(move.workload[1:])) if move.workload else move
            else:
                move = await self._migrate(obj, cluster, why, origin="Drain")
            if move.refused:
                refused.append(f"{bname}: {move.refused}")
                if not dry_run:
                    await self._record_refusal(move, cluster, why)
                continue
            if move.plain:
                if not dry_run:
                    await trigger(self.registry, bname, why, self.clock)
                names.append(bname)
                as_read.append(obj)
            elif move.plan:
                plans.append(move.plan)
            moved += n
        left = f"; {len(refused)} binding(s) left in place: their data would not move" if refused else ""
        if dry_run:
            return RescheduleResult(True, moved, f"dry run: cluster {cluster} would be cordoned; {len(names)} "
                                                 f"binding(s) rescheduled, {len(plans)} workload(s) migrated{left}",
                                    tuple(names), tuple(plans), tuple(refused), as_read=tuple(as_read))
        return RescheduleResult(True, moved, f"cluster {cluster} cordoned; {len(names)} binding(s) rescheduled, "
                                             f"{len(plans)} migration plan(s) started{left}", tuple(names),
                                tuple(plans), tuple(refused))

    async def _migration_of(self, binding: Mapping[str, Any]) -> DataMove:
        """F3: how a binding leaves a cluster. A StatefulSet or Deployment that declares a data step
        (annotation ``multicluster.io/migration-hook``: a hook, a ``spec.data``, or ``None``) moves by a
        MigrationPlan with it; one that keeps data in PersistentVolumeClaims and declares nothing moves
        by a plan with the default ``VolumeCopy`` mover, or — with no mover image configured, or an
        unreadable annotation — is refused: it stays, and the answer says why. Others move plainly."""
        if PINNED_PLACEMENT in ((binding.get("metadata") or {}).get("annotations") or {}):
            return DataMove(moving=True)  # a plan is moving it already
        ref = (binding.get("spec") or {}).get("resource") or {}
        kind = by_kind(str(ref.get("apiVersion")), str(ref.get("kind")))
        if kind is None or kind.kind not in PLAN_KINDS or not ref.get("name"):
            return DataMove()
        ns, name = str(ref.get("namespace") or "default"), str(ref["name"])
        try:
            workload = await self.registry.get(kind, name, ns)
        except ApiError:
            return DataMove()
        claims = workload_claims(workload)
        try:
            declared = declared_hook(workload)
        except ValueError as e:
            return DataMove((kind.kind, ns, name), refused=str(e)) if claims else DataMove()
        if declared is None and claims:
            if self.volume_copy_image is None:
                return DataMove((kind.kind, ns, name),
                                refused=f"{kind.kind} {ns}/{name} keeps its data in PersistentVolumeClaims "
                                        f"({claims.describe()}) and declares no data step, and no VolumeCopy "
                                        f"image is configured (migration.volumeCopyImage): set annotation "
                                        f"{MIGRATION_HOOK} to a data step (mover VolumeCopy or Hook) or to "
                                        f"{NO_DATA} to move it without its data")
            return DataMove((kind.kind, ns, name), {"mover": "VolumeCopy", "image": self.volume_copy_image},
                            freeze_seconds=self.freeze_seconds)
        if declared is None:
            return DataMove()
        return DataMove(workload=(kind.kind, ns, name), data=declared)

    async def _migrate(self, binding: Mapping[str, Any], source: str, why: str,
                       origin: str = "Automatic") -> DataMove:
        """A MigrationPlan (its target: where the scheduler would put it) instead of a plain
        re-placement, when the binding moves with its data (`_migration_of`); ``plan`` names the plan
        started ("namespace/name")."""
        move = await self._migration_of(binding)
        if move.workload is None or move.refused:
            return move
        wkind, ns, name = move.workload
        plan = plan_object(wkind, ns, name, source, None, move.data, origin, why, self.clock(), move.freeze_seconds)
        try:
            created = await self.registry.create(MIGRATION_PLAN, plan)
        except Conflict as e:
            if e.code == "MIGRATION_IN_PROGRESS":
                return DataMove(moving=True)
            return replace(move, refused=e.message)
        except ApiError as e:
            return replace(move, refused=e.message)
        return replace(move, plan=f"{ns}/{created['metadata']['name']}")

    async def _record_refusal(self, move: DataMove, cluster: str, why: str) -> None:
        """X1: a workload left in place because its data would not move with it is a decision too."""
        assert move.workload is not None
        kind, ns, name = move.workload
        record = {"type": EVICTION, "subject": {"kind": kind, "namespace": ns, "name": name},
                  "trigger": {"reason": why, "cluster": cluster},
                  "inputs": {"migration": {"volumeCopyImage": self.volume_copy_image}},
                  "options": [{"name": f"stay on {cluster}", "chosen": True, "feasible": True,
                               "reason": move.refused},
                              {"name": "move with its data (MigrationPlan)", "chosen": False, "feasible": False,
                               "reason": move.refused},
                              {"name": "move without its data", "chosen": False, "feasible": False,
                               "reason": f"not declared (annotation {MIGRATION_HOOK}: {NO_DATA})"}],
                  "outcome": {"phase": "Refused", "cluster": cluster},
                  "summary": f"{kind} {ns}/{name} stays on {cluster}: {move.refused}", "runnerUp": None,
                  "source": {"journal": "decisions", "recorder": "rescheduler"}}
        await record_decisions(decision_log(self.registry.store, clock=self.clock), [(self.clock(), record)])

    async def preallocate(self, req: RescheduleRequest) -> RescheduleResult:
        forecast = req.details.get("forecast")
        horizon_min = req.details.get("horizonMinutes")
        if not isinstance(forecast, int | float) or not isinstance(horizon_min, int | float) or horizon_min <= 0:
            return RescheduleResult(False, 0, "preallocate needs details.forecast and details.horizonMinutes")
        hold = PreallocationHold(float(forecast), self.clock() + float(horizon_min) * 60.0, req.reason)
        try:
            await self.registry.patch(CLUSTER, req.cluster,
                                      {"metadata": {"annotations": {PREALLOCATION: hold.to_annotation()}}}, MERGE_PATCH)
        except NotFound:
            return RescheduleResult(False, 0, f"cluster {req.cluster} does not exist")
        moved = await self.evacuate(req)
        held = f"cluster {req.cluster} held at water level {hold.water_level:.2f} until {hold.until_text}"
        return RescheduleResult(True, moved.moved, f"{held}; {moved.message}", moved.bindings,
                                considered=moved.considered, omitted=moved.omitted)

    async def restore(self, req: RescheduleRequest) -> RescheduleResult:
        cluster = await self.registry.try_get(CLUSTER, req.cluster)
        hold = parse_hold((cluster or {}).get("metadata", {}).get("annotations")) if cluster else None
        if hold is not None and hold.active(self.clock()):
            return RescheduleResult(False, 0, f"pre-allocation hold on {req.cluster} until {hold.until_text}")
        names: list[str] = []
        replicas = 0
        for obj in await self.registry.scan(BINDING):
            before = evacuated_from(obj)
            if req.cluster not in before or obj["metadata"].get("deletionTimestamp"):
                continue
            name = obj["metadata"]["name"]
            rest = _joined([c for c in before if c != req.cluster])
            if cluster is None:  # gone: the binding only forgets it, there is nothing to offer back
                await self.registry.patch(BINDING, name, {"metadata": {"annotations": {EVACUATED_FROM: rest}}},
                                          MERGE_PATCH)
                continue
            await trigger(self.registry, name, f"restore {req.cluster}: {req.reason}", self.clock,
                          {EVACUATED_FROM: rest})
            names.append(name)
            replicas += int(((obj.get("spec") or {}).get("replicas")) or 0)
        if not names:
            return RescheduleResult(False, 0, f"no binding was moved away from {req.cluster}")
        return RescheduleResult(True, 0, f"offering {req.cluster} back to {len(names)} binding(s): "
                                         f"{', '.join(names[:10])}", tuple(names), offered=replicas)

    async def offer(self, req: RescheduleRequest) -> RescheduleResult:
        name = req.details.get("binding")
        if not isinstance(name, str) or not name:
            return RescheduleResult(False, 0, "offer needs details.binding")
        try:
            obj = await self.registry.get(BINDING, name)
            await self.registry.get(CLUSTER, req.cluster)
        except NotFound as e:
            return RescheduleResult(False, 0, e.message)
        sid = req.details.get("serviceId")
        if follows_learned_users(obj, sid if isinstance(sid, str) else None):
            return RescheduleResult(False, 0, f"binding {name} follows its learned users: they place it, not offers")
        offers = placement_offers(obj)
        if req.cluster in offers:
            return RescheduleResult(False, 0, f"{req.cluster} was already offered to binding {name}")
        await trigger(self.registry, name, offer_reason(req.cluster, req.reason), self.clock,
                      {PLACEMENT_OFFERS: _joined([*offers, req.cluster])})
        return RescheduleResult(True, 0, f"offered {req.cluster} to binding {name}", (name,))

    async def rebalance(self, req: RescheduleRequest) -> RescheduleResult:
        name = req.details.get("binding")
        if not isinstance(name, str) or not name:
            return RescheduleResult(False, 0, "rebalance needs details.binding")
        try:
            obj = await self.registry.get(BINDING, name)
        except NotFound as e:
            return RescheduleResult(False, 0, e.message)
        if obj["metadata"].get("deletionTimestamp"):
            return RescheduleResult(False, 0, f"binding {name} is being deleted")
        at = req.details.get("at")
        when = float(at) if isinstance(at, int | float) and not isinstance(at, bool) else self.clock()
        await trigger(self.registry, name, req.reason, self.clock, {TRAFFIC_REBALANCED_AT: rfc3339_ms(when)})
        replicas = int(((obj.get("spec") or {}).get("replicas")) or 0)
        return RescheduleResult(True, 0, f"re-placing binding {name} nearer its traffic peers", (name,),
                                offered=replicas)

    async def peakshave(self, req: RescheduleRequest) -> RescheduleResult:
        moves = req.details.get("moves")
        if not isinstance(moves, list) or not moves:
            return RescheduleResult(False, 0, "peakshave needs details.moves")
        planned: dict[str, list[dict[str, Any]]] = {}
        for m in moves:
            if isinstance(m, dict) and isinstance(m.get("binding"), str):
                planned.setdefault(m["binding"], []).append({k: m.get(k) for k in ("from", "to", "replicas")})
        names: list[str] = []
        for name, ms in sorted(planned.items()):
            try:
                await trigger(self.registry, name, req.reason, self.clock, {PEAK_SHAVE_MOVES: json.dumps(ms)})
            except NotFound:
                continue  # deleted meanwhile: nothing to move
            names.append(name)
        replicas = sum(int(m.get("replicas") or 0) for n in names for m in planned[n])
        if not names:
            return RescheduleResult(False, 0, "no binding planned to move exists any more")
        where = f"back near their users, to {req.cluster}" if req.details.get("kind") == "return" \
            else f"off {req.cluster}"
        return RescheduleResult(True, replicas, f"moving {replicas} replica(s) of {len(names)} binding(s) {where}",
                                tuple(names))
