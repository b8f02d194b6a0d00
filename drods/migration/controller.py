"""The migration controller (SPEC F3): drives every MigrationPlan through its phases.

Single-active (lease ``migration``, so every write is fenced on the leadership generation) and
level-triggered: a pass reads the plan, the workload's Binding, the clusters and the hook runs from
the shared informers, asks the pure phase machine (`drods.migration.phases`) for the next status
and the effects of the phase, writes the status (compare-and-swap on the plan's revision) and then
makes the effects true — the Binding's pin and traffic-withdrawn annotations, the hook run. The
phase is recorded before its effects are made, and every effect is a level ("the pin is X", "the
copy Job exists"), so a new leader resumes at the recorded phase and repeats nothing: a hook run
that exists, ran or failed is found by its name, never started twice.

A plan carries the finalizer ``multicluster.io/migration`` while it runs: deleting it rolls the move
back first (or, once the source is retired, lets it finish), then releases the Binding.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Hashable, Iterable
from dataclasses import replace
from typing import Any

from pydantic import ValidationError

from drods.controllers.rescheduler import Rescheduler
from drods.errors import AlreadyExists, ApiError, Conflict, NotFound
from drods.machinery.controller import Controller
from drods.machinery.event_log import EventLog
from drods.machinery.informer import Informer, subscribed, wait_synced
from drods.machinery.manager import Manager
from drods.migration import phases
from drods.migration.admission import workload_of
from drods.migration.dataruns import all_runs, run_cluster
from drods.migration.estimate import bandwidth, decode_pair, estimate
from drods.migration.hooks import hook_binding, hook_job
from drods.migration.record import record, worth_recording
from drods.migration.target import choose_target
from drods.model.annotations import FAILED_OVER_FROM, MIGRATED_FROM, PINNED_PLACEMENT, TRAFFIC_WITHDRAWN
from drods.model.conditions import condition
from drods.model.data_jobs import job_name, job_outcome, job_report
from drods.model.detection import binding_is_for, binding_name
from drods.model.events import involved_of
from drods.model.keys import network_key
from drods.model.kinds import BINDING, CLUSTER, MIGRATION_PLAN, by_kind
from drods.model.migration import (
    FAILED,
    MIGRATION_FINALIZER,
    PENDING,
    ROLLED_BACK,
    SUCCEEDED,
    TERMINAL,
    MigrationPlanSpec,
    pin_annotation,
    pinned_by,
    pinned_placement,
    plan_ref,
    traffic_withdrawn,
)
from drods.model.timefmt import rfc3339_ms
from drods.model.volume_claims import Claims, workload_claims
from drods.registry.objects import ObjectRegistry, decode_binding_kept, decode_stored
from drods.registry.patch import MERGE_PATCH
from drods.scheduler.profile import Profile
from drods.schedulerd.history import schedule_history
from drods.store import Store

log = logging.getLogger(__name__)
Obj = dict[str, Any]

LEASE = "migration"
JOB = by_kind("batch/v1", "Job")
assert JOB is not None


def _order(plan: Obj) -> tuple[str, str]:
    return str(plan["metadata"].get("creationTimestamp") or ""), str(plan["metadata"]["name"])


def _others(plan: Obj, plans: Iterable[Obj]) -> list[Obj]:
    """The other plans for the same workload."""
    me = workload_of(plan)
    return [o for o in plans if o["metadata"].get("uid") != plan["metadata"].get("uid") and workload_of(o) == me]


def superseded(plan: Obj, plans: Iterable[Obj]) -> bool:
    """A plan for the same workload made after this one that moved it (Succeeded) or is moving it: its own
    move tells the data's story since. One that Failed or RolledBack moved nothing and does not count (a
    failover after it places the workload on whatever claims it finds, an earlier move's among them)."""
    mine = _order(plan)
    return any(_order(o) > mine and str((o.get("status") or {}).get("phase") or PENDING) not in (FAILED, ROLLED_BACK)
               for o in _others(plan, plans))


def claims_left_on(plan: Obj, plans: Iterable[Obj], cluster: str) -> dict[str, str]:
    """The claims earlier plans for the same workload left on ``cluster`` — it was their source or their
    target, and a StatefulSet's claims outlive its copy there — by name, with the latest such plan."""
    mine = _order(plan)
    out: dict[str, str] = {}
    for o in sorted(_others(plan, plans), key=_order):
        st = o.get("status") or {}
        if _order(o) > mine or not st.get("startTime") or cluster not in (st.get("sourceCluster"),
                                                                           st.get("targetCluster")):
            continue
        ref = plan_ref(str(o["metadata"].get("namespace") or "default"), str(o["metadata"]["name"]))
        for c in (st.get("data") or {}).get("claims") or []:
            name = c.get("name") if isinstance(c, dict) else c
            if name:
                out[str(name)] = ref
    return out


class MigrationController:
    def __init__(self, registry: ObjectRegistry, *, plans: Informer, bindings: Informer, clusters: Informer,
                 rescheduler: Rescheduler | None = None, store: Store | None = None, profile: Profile | None = None,
                 clock: Callable[[], float] = time.time, workers: int = 2) -> None:
        self.registry = registry
        self.store = store  # with the profile: where a plan without a target goes (`drods.migration.target`)
        self.profile = profile or Profile.default()
        self.plans = plans
        self.bindings = bindings
        self.clusters = clusters
        self.rescheduler = rescheduler
        self.clock = clock
        self.controller = Controller("migration", self.reconcile, workers=workers)
        self.by_binding: dict[str, set[str]] = {}  # binding name → plan keys that read it
        self._indexed: dict[str, set[str]] = {}
        self.events = EventLog(registry.store, "drods-migration")

    @staticmethod
    def informers(manager: Manager) -> dict[str, Any]:
        return {"plans": manager.informer(MIGRATION_PLAN.key_prefix(), decode_stored),
                "bindings": manager.informer(BINDING.key_prefix(), decode_binding_kept),
                "clusters": manager.informer(CLUSTER.key_prefix(), decode_stored)}

    async def run(self) -> None:
        with subscribed((self.plans, self._on_plan), (self.bindings, self._on_binding),
                        (self.clusters, self._on_cluster)):
            await wait_synced(self.plans, self.bindings, self.clusters)
            for key, obj in list(self.plans.cache.items()):
                self._on_plan(key, None, obj)
            await self.controller.run()

    # ------------------------------------------------------------------ what to reconcile
    def _on_plan(self, key: str, old: Obj | None, new: Obj | None) -> None:
        for b in self._indexed.pop(key, set()):
            self.by_binding.get(b, set()).discard(key)
        if new is not None:
            names = self._bindings_of(new)
            for b in names:
                self.by_binding.setdefault(b, set()).add(key)
            self._indexed[key] = names
            ended = str((new.get("status") or {}).get("phase") or PENDING) in (FAILED, ROLLED_BACK)
            if ended and str(((old or {}).get("status") or {}).get("phase") or PENDING) not in TERMINAL:
                # it moved nothing: an earlier plan it held back from saying its claims were reused may say it now
                for other in self._same_workload(new):
                    self.controller.queue.add(other)
        self.controller.queue.add(key)

    def _bindings_of(self, plan: Obj) -> set[str]:
        meta = plan["metadata"]
        ns, uid = str(meta.get("namespace") or "default"), str(meta.get("uid") or "")
        runs = all_runs(plan.get("status") or {})
        out = {binding_name("Job", ns, job_name(str(meta["name"]), uid, run)) for run in runs}
        target = workload_of(plan)
        if target is not None:
            out.add(binding_name(*target))
        if (plan.get("status") or {}).get("binding"):
            out.add(str(plan["status"]["binding"]))
        return out

    def _on_binding(self, key: str, old: Obj | None, new: Obj | None) -> None:
        for p in self.by_binding.get(key[len(BINDING.key_prefix()):], ()):
            self.controller.queue.add(p)

    def _on_cluster(self, key: str, old: Obj | None, new: Obj | None) -> None:
        for p, obj in self.plans.cache.items():
            if str((obj.get("status") or {}).get("phase") or PENDING) not in TERMINAL:
                self.controller.queue.add(p)

    # ------------------------------------------------------------------ facts
    def _binding(self, name: str | None) -> Obj | None:
        if not name:
            return None
        obj: Obj | None = self.bindings.cache.get(BINDING.key(name))
        return obj

    def _find_binding(self, plan: Obj, spec: MigrationPlanSpec) -> Obj | None:
        """The workload's Binding: the recorded one, the detector's, else one whose resource names it."""
        ns = str(plan["metadata"].get("namespace") or "default")
        ref = spec.workloadRef
        # a Binding under either name that places another object (names collide across namespaces) is not it
        recorded = self._binding((plan.get("status") or {}).get("binding"))
        if binding_is_for(recorded, ref.kind, ns, ref.name):
            return recorded
        obj = self._binding(binding_name(ref.kind, ns, ref.name))
        if binding_is_for(obj, ref.kind, ns, ref.name):
            return obj
        for b in self.bindings.cache.values():
            r = (b.get("spec") or {}).get("resource") or {}
            if r.get("kind") == ref.kind and r.get("name") == ref.name and (r.get("namespace") or "default") == ns:
                return b
        return None

    def _older_plan(self, plan: Obj) -> str | None:
        me = workload_of(plan)
        mine = (str(plan["metadata"].get("creationTimestamp") or ""), str(plan["metadata"]["name"]))
        for o in self.plans.cache.values():
            if o["metadata"].get("uid") == plan["metadata"].get("uid") or workload_of(o) != me:
                continue
            st = o.get("status") or {}
            if str(st.get("phase") or PENDING) in TERMINAL:
                continue
            theirs = (str(o["metadata"].get("creationTimestamp") or ""), str(o["metadata"]["name"]))
            if theirs < mine or st.get("phase") not in (None, PENDING):
                return str(o["metadata"]["name"])
        return None

    def _later_plan(self, plan: Obj) -> bool:
        return superseded(plan, self.plans.cache.values())

    def _same_workload(self, plan: Obj) -> list[str]:
        """The keys of the other plans for the same workload."""
        me = workload_of(plan)
        return [k for k, o in self.plans.cache.items()
                if o["metadata"].get("uid") != plan["metadata"].get("uid") and workload_of(o) == me]

    def _facts(self, plan: Obj, spec: MigrationPlanSpec, binding: Obj | None) -> phases.Facts:
        meta = plan["metadata"]
        ns, name = str(meta.get("namespace") or "default"), str(meta["name"])
        status = plan.get("status") or {}
        bstatus = (binding or {}).get("status") or {}
        placement = {str(t["cluster"]): int(t.get("replicas") or 0) for t in bstatus.get("placement") or []
                     if isinstance(t, dict) and t.get("cluster") and int(t.get("replicas") or 0) > 0}
        copies = {str(e["cluster"]): phases.Copy(int(e.get("replicas") or 0), int(e.get("readyReplicas") or 0),
                                                 bool(e.get("applied")), bool(e.get("removing")))
                  for e in bstatus.get("clusters") or [] if isinstance(e, dict) and e.get("cluster")}
        clusters: dict[str, bool | None] = {}
        for obj in self.clusters.cache.values():
            ready = condition(obj)
            clusters[str(obj["metadata"]["name"])] = None if ready is None else ready.get("status") == "True"
        by = pinned_by(binding)
        hooks: dict[str, phases.HookState] = {}
        for run in all_runs(status):
            job = job_name(name, str(meta.get("uid") or ""), run)
            hb = self._binding(binding_name("Job", ns, job))
            if not binding_is_for(hb, "Job", ns, job):
                hb = None  # another object's Binding under the hook's name is not the hook's
            where = run_cluster(spec, status, run)
            state, message = job_outcome(hb, where)
            hooks[run] = phases.HookState(state, message, job_report(hb, where))
        return phases.Facts(
            now=self.clock(), binding=str(binding["metadata"]["name"]) if binding is not None else None,
            placement=placement, copies=copies, withdrawn=traffic_withdrawn(binding),
            pin=pinned_placement(binding), pinned_by_other=by if by is not None and by != plan_ref(ns, name) else None,
            clusters=clusters, hooks=hooks,
            older_plan=self._older_plan(plan) if str(status.get("phase") or PENDING) == PENDING else None,
            deleting=bool(meta.get("deletionTimestamp")),
            later_plan=self._later_plan(plan),
            duplicated=(((((binding or {}).get("spec") or {}).get("placement") or {}).get("replicaScheduling") or {})
                        .get("replicaSchedulingType") == "Duplicated"))

    # ------------------------------------------------------------------ the pass
    async def reconcile(self, item: Hashable) -> float | None:
        key = str(item)
        plan: Obj | None = self.plans.cache.get(key)
        if plan is None:
            return None
        meta = plan["metadata"]
        ns, name = str(meta.get("namespace") or "default"), str(meta["name"])
        status = dict(plan.get("status") or {})
        try:
            spec = MigrationPlanSpec.model_validate(plan.get("spec") or {})
        except ValidationError as e:  # validated on the way in; a spec stored by another version may not be
            if status.get("phase") != FAILED:
                status.update(phase=FAILED, message=f"invalid spec: {e.errors()[0].get('msg')}",
                              completionTime=rfc3339_ms(self.clock()))
                await self._write_status(plan, status)
            return None
        phase = str(status.get("phase") or PENDING)
        finalizers = list(meta.get("finalizers") or [])
        if phase not in TERMINAL and not meta.get("deletionTimestamp") and MIGRATION_FINALIZER not in finalizers:
            return await self._set_finalizers(plan, [*finalizers, MIGRATION_FINALIZER])  # the watch brings it back
        binding = self._find_binding(plan, spec)
        facts = self._facts(plan, spec, binding)
        if phase == PENDING and binding is not None and not facts.deleting:
            facts = await self._starting_facts(plan, ns, spec, binding, facts)
        step = phases.advance(spec, status, facts)
        if step.status != status:
            if step.status.get("phase") != status.get("phase"):
                log.info("migration %s/%s: %s → %s (%s)", ns, name, phase, step.status.get("phase"),
                         step.status.get("message"))
            step.status["observedGeneration"] = int(meta.get("generation") or 1)
            if not await self._write_status(plan, step.status):
                return 0.2  # changed meanwhile: the new version is coming
            if worth_recording(status, step.status):
                await self._record(plan, step.status)
            reused = step.status.get("claimsLeftReused")
            if reused and not status.get("claimsLeftReused") and binding is not None:
                await self.events.record(involved_of(binding), "Warning", "ClaimsLeftByMove",
                                         f"MigrationPlan {name}: {reused['message']}")
        again = await self._apply(plan, spec, step, facts)
        if str(step.status.get("phase")) in TERMINAL and step.effects.cleanup and not again \
                and not status.get("hooksRemoved") and step.status == status:
            # the hook runs are gone: later passes over a finished plan need not delete them again
            await self._write_status(plan, {**status, "hooksRemoved": True})
            return None
        if step.reschedule and self.rescheduler is not None and step.status.get("binding"):
            try:
                await self.rescheduler.binding(str(step.status["binding"]), step.reschedule)
            except ApiError as e:
                log.warning("rescheduling %s after migration %s/%s: %s", step.status["binding"], ns, name, e.message)
        if str(step.status.get("phase")) in TERMINAL and not again and meta.get("deletionTimestamp") \
                and MIGRATION_FINALIZER in finalizers:
            await self._set_finalizers(plan, [f for f in finalizers if f != MIGRATION_FINALIZER])
            return None
        if again:
            return 0.5
        return step.requeue

    async def _starting_facts(self, plan: Obj, ns: str, spec: MigrationPlanSpec, binding: Obj,
                              facts: phases.Facts) -> phases.Facts:
        """What a plan's start reads besides the Binding: the workload's claims, the target the
        scheduler would choose (no targetCluster), the estimate of the data's move, the claims earlier
        plans left on the target."""
        workload = await self._workload(ns, spec)
        claims = workload_claims(workload)
        n = facts.placement.get(spec.sourceCluster, 0)
        facts = replace(facts, claims=tuple(claims.names(spec.workloadRef.name, n)) if claims else (),
                        claims_note=claims.describe())
        if self.store is not None:
            choice = await choose_target(self.store, self.profile, binding, spec.sourceCluster, spec.targetCluster)
            facts = replace(facts, chosen_target=None if spec.targetCluster else choice.target,
                            target_note=choice.note, target_refused=choice.refused, target_options=choice.options,
                            target_weights=dict(choice.weights))
        elif not spec.targetCluster:
            facts = replace(facts, target_note="no store to ask the scheduler's view")
        target = spec.targetCluster or facts.chosen_target
        if target:
            facts = replace(facts, claims_on_target=claims_left_on(plan, self.plans.cache.values(), target))
        if claims and target:
            facts = replace(facts, estimate=await self._estimate(workload, claims, n, spec.sourceCluster, target))
        return facts

    async def _estimate(self, workload: Obj | None, claims: Claims, replicas: int, source: str,
                        target: str) -> Obj | None:
        clusters = {str(o["metadata"]["name"]): o.get("spec") or {} for o in self.clusters.cache.values()}

        async def read_pair(a: str, b: str) -> Obj | None:
            kv = await self.store.get(network_key(a, b)) if self.store is not None else None
            pair = decode_pair(kv.value if kv is not None else None)
            return dict(pair) if pair is not None else None

        mbps, mbps_from = await bandwidth(source, target, clusters, read_pair)
        return estimate(workload, claims, replicas, mbps, mbps_from)

    # ------------------------------------------------------------------ writes
    async def _write_status(self, plan: Obj, status: Obj) -> bool:
        meta = plan["metadata"]
        try:
            await self.registry.update_status(MIGRATION_PLAN, meta["name"], status, meta.get("namespace"),
                                              resource_version=int(meta["resourceVersion"]))
        except (NotFound, Conflict, AlreadyExists):
            return False
        return True

    async def _record(self, plan: Obj, status: Obj) -> None:
        """The start or end of a move in the decision-record journal; a lost record never blocks a plan."""
        if self.store is None:
            return
        try:
            await record(schedule_history(self.store), plan, status)
        except Exception as e:  # noqa: BLE001 - the history is an explanation, not the state
            log.warning("recording migration %s: %s", plan["metadata"].get("name"), e)

    async def _set_finalizers(self, plan: Obj, finalizers: list[str]) -> float | None:
        meta = plan["metadata"]
        patch = {"metadata": {"finalizers": finalizers or None, "resourceVersion": meta["resourceVersion"]}}
        try:
            await self.registry.patch(MIGRATION_PLAN, meta["name"], patch, MERGE_PATCH, meta.get("namespace"))
        except (NotFound, Conflict, AlreadyExists):
            return 0.2
        return None

    async def _apply(self, plan: Obj, spec: MigrationPlanSpec, step: phases.Step, facts: phases.Facts) -> bool:
        """Make the phase's effects true; True when something must be looked at again soon."""
        meta = plan["metadata"]
        ns, name = str(meta.get("namespace") or "default"), str(meta["name"])
        st, fx = step.status, step.effects
        again = False
        if fx.touch_binding and st.get("binding"):
            again = await self._annotate(str(st["binding"]), ns, name, fx, st) or again
        uid = str(meta.get("uid") or "")
        claims: Claims | None = None
        for run in fx.runs:
            if facts.hooks.get(run, phases.HookState("absent")).state != "absent":
                continue
            if claims is None:
                claims = workload_claims(await self._workload(ns, spec))
            await self._ensure_hook(plan, spec, run, st, claims)
        if fx.cleanup and not st.get("hooksRemoved"):
            for run in all_runs(st):
                again = await self._delete_hook(ns, job_name(name, uid, run)) or again
        return again

    async def _workload(self, ns: str, spec: MigrationPlanSpec) -> Obj | None:
        """The workload's template in the control plane (its claims say whether it keeps data)."""
        kind = by_kind(spec.workloadRef.apiVersion, spec.workloadRef.kind)
        if kind is None:
            return None
        try:
            return await self.registry.get(kind, spec.workloadRef.name, ns)
        except NotFound:
            return None

    async def _annotate(self, binding: str, ns: str, name: str, fx: phases.Effects, st: Obj) -> bool:
        obj = self._binding(binding)
        if obj is None:
            return False
        ann = (obj.get("metadata") or {}).get("annotations") or {}
        by = pinned_by(obj)
        patch: dict[str, str | None] = {}
        if fx.pin is not None:
            want = pin_annotation(plan_ref(ns, name), fx.pin)
            if ann.get(PINNED_PLACEMENT) != want:
                patch[PINNED_PLACEMENT] = want
        elif PINNED_PLACEMENT in ann and by == plan_ref(ns, name):
            patch[PINNED_PLACEMENT] = None
            if st.get("phase") == SUCCEEDED and st.get("sourceCluster"):
                # moved on purpose, with its data: no fleet change brings it back (`moved_away_from`),
                # and a fail-back waiting from an earlier failover would undo the move
                patch[MIGRATED_FROM] = str(st["sourceCluster"])
                if FAILED_OVER_FROM in ann:
                    patch[FAILED_OVER_FROM] = None
        want_w = ",".join(sorted(fx.withdrawn)) or None
        if (ann.get(TRAFFIC_WITHDRAWN) or None) != want_w and (by in (None, plan_ref(ns, name))):
            patch[TRAFFIC_WITHDRAWN] = want_w
        if not patch:
            return False
        try:
            await self.registry.patch(BINDING, binding, {"metadata": {"annotations": patch}}, MERGE_PATCH)
        except NotFound:
            return False
        except (Conflict, AlreadyExists):
            return True
        return False

    async def _ensure_hook(self, plan: Obj, spec: MigrationPlanSpec, run: str, st: Obj, claims: Claims) -> None:
        meta = plan["metadata"]
        ns, name = str(meta.get("namespace") or "default"), str(meta["name"])
        src, dst = str(st["sourceCluster"]), str(st["targetCluster"])
        cluster = run_cluster(spec, st, run)
        job = hook_job(plan, spec, run, src, dst, claims, int(st.get("sourceReplicas") or 0))
        assert JOB is not None
        # the Job first: a run is "absent" until its Binding exists, so a crash between the two creates
        # leaves a run the next pass starts again (the Job then exists), never a Binding without its Job
        for kind, obj, namespace in ((JOB, job, ns), (BINDING, hook_binding(job, cluster, ns, name), None)):
            try:
                await self.registry.create(kind, obj, namespace)
                log.info("migration %s/%s: created %s %s", ns, name, kind.kind, obj["metadata"]["name"])
            except (AlreadyExists, Conflict):
                pass  # exists: this run was started before (it is never started twice)

    async def _delete_hook(self, ns: str, job: str) -> bool:
        assert JOB is not None
        again = False
        try:
            await self.registry.delete(JOB, job, ns)
        except NotFound:
            pass
        except ApiError as e:
            log.warning("deleting the hook Job %s: %s", job, e.message)
            again = True
        bname = binding_name("Job", ns, job)
        try:  # only the hook's own: another object's Binding under the same name is left alone
            binding = await self.registry.try_get(BINDING, bname)
            if binding_is_for(binding, "Job", ns, job):
                assert binding is not None
                await self.registry.delete(BINDING, bname, resource_version=binding["metadata"].get("resourceVersion"))
        except NotFound:
            pass
        except ApiError as e:
            log.warning("deleting the hook Binding %s: %s", bname, e.message)
            again = True
        return again

