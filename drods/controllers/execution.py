"""The execution controller (Karmada's): applies push-mode members' Works, and empties a member when
its Work is deleted.

One queue and set of workers per member cluster (as many as the member client's connections), so a
slow or dead member only fills its own queue (SEC4). A Work is applied — server-side apply of every
manifest, dependents first, after making sure the namespace exists — when its status does not say
that the member holds ``spec.hash``; the result goes on the Work's status (`drods.model.work`), where
the binding controller reads it exactly as it reads a pull-mode agent's. An object that exists in the
member without DRO-DS's label is a conflict and left alone, unless its manifest says ``overwrite``
(Karmada's ``conflictResolution: Overwrite``, `drods.model.dispatch`): then it is adopted. A Work
marked ``suspendDispatching`` is not applied until the mark goes (the policy's ``suspension``).

An object a Work's manifests stop listing (a dependent deleted, or no longer named by its workload) is
taken off the member with the Work's next apply, unless another live Work on the cluster wants it.
A namespace DRO-DS created in a member goes once the control plane's is deleted and no live Work
wants anything in it, as Karmada deletes the namespaces it propagated (one the control plane never
had, whose objects were placed all the same, stays).
A deleted Work (it carries `EXECUTION_FINALIZER`) is emptied: its objects that no other live Work
on the cluster wants are deleted, workloads before their dependents; what an unreachable member
cannot take now is recorded under ``/cleanup/`` (`drods.controllers.cleanup`); then the finalizer
goes. Pull-mode Works are their agent's: this controller only drops a finalizer left on one.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable
from typing import Any

from drods.controllers.fleet import MemberFleet
from drods.controllers.settings import MemberSettings
from drods.controllers.work_record import WorkRecord
from drods.errors import NotFound
from drods.machinery.controller import Controller
from drods.machinery.fence import WritesRefused
from drods.machinery.informer import subscribed
from drods.machinery.tasks import stop_tasks, yielding
from drods.members.client import PERMANENT_STATUS, MemberClient, MemberError, MemberUnavailable
from drods.model import jsondoc
from drods.model.annotations import ANN_HASH, MANAGED_BY, MANAGER, is_managed, manifest_hash, run_report
from drods.model.dispatch import may_adopt
from drods.model.interpreter import Interpretation
from drods.model.keys import CLEANUP_PREFIX
from drods.model.kinds import CUSTOM_RESOURCE_DEFINITION, WORK
from drods.model.timefmt import rfc3339, rfc3339_ms
from drods.model.work import EXECUTION_FINALIZER, ManifestStatus, Ref, WorkStatus
from drods.store import CasFailed

log = logging.getLogger(__name__)
Obj = dict[str, Any]
NAMESPACE_CHECK = "namespace:"  # a cluster queue's key for `_drop_namespace` (a Work's key is a store key, "/…")



def cleanup_key(cluster: str, ref: Ref) -> str:
    return f"{CLEANUP_PREFIX}{cluster}/{ref.kind}/{ref.namespace or '_'}/{ref.name}"


def manifest_status(obj: Obj, observed: str, usage: Obj | None = None,
                    how: Interpretation | None = None) -> ManifestStatus:
    """A member object's status as a Work's status carries it (with its measured use, if read);
    ``how``: the kind's interpretation, whose scripts may reflect the status and judge its health."""
    meta = obj.get("metadata") or {}
    status, health = how.reflected(obj) if how is not None else (
        obj.get("status") if isinstance(obj.get("status"), dict) else {}, None)
    return ManifestStatus(apiVersion=str(obj.get("apiVersion")), kind=str(obj.get("kind")),
                          namespace=str(meta.get("namespace") or ""), name=str(meta.get("name")),
                          status=status, generation=int(meta.get("generation") or 1),
                          manifestHash=(meta.get("annotations") or {}).get(ANN_HASH),
                          observedTime=observed, usage=usage, health=health, report=run_report(obj))


def last_usage(status: Obj, obj: Obj) -> Obj | None:
    """The use last measured of ``obj`` as the Work's status carries it: an apply keeps it (the workload's
    pods use what they used until the next reading says otherwise) — dropped, it was written back at
    the next reading, and the Binding's and the template's usage went and came back with it."""
    meta = obj.get("metadata") or {}
    ident = (obj.get("apiVersion"), obj.get("kind"), meta.get("namespace") or "", meta.get("name"))
    for m in status.get("manifests") or ():
        if (m.get("apiVersion"), m.get("kind"), m.get("namespace") or "", m.get("name")) == ident:
            usage = m.get("usage")
            return usage if isinstance(usage, dict) else None
    return None


class _Conflict(Exception):
    """The object exists in the member and DRO-DS did not create it."""


class Execution:
    def __init__(self, fleet: MemberFleet, settings: MemberSettings, *,
                 clock: Callable[[], float] = time.time) -> None:
        self.fleet = fleet
        self.registry = fleet.registry
        self.settings = settings
        self.clock = clock
        self.syncers: dict[str, Controller] = {}
        self._tasks: dict[str, asyncio.Task[None]] = {}
        # Work key → (the manifest hash that failed, not before): a failed apply backs off; a new hash
        # (the policy or the template changed) is tried at once
        self._retry_at: dict[str, tuple[str, float]] = {}
        self._delete_failures: dict[str, int] = {}  # Work key → refused deletions in a row
        # cluster → dependent → (its manifest's digest, the resourceVersion its apply returned): `_holds`
        self._sent: dict[str, dict[Ref, tuple[str, str]]] = {}
        # Work key → objects its manifests no longer list (a dependent deleted, or no longer named by
        # the template): taken off the member with the next apply unless another Work wants them
        self._dropped: dict[str, set[Ref]] = {}
        self._ns_deleted: set[str] = set()  # Namespaces seen deleted on the control plane (and not made again)

    async def run(self) -> None:
        f = self.fleet
        namespaces = [(f.informers.namespaces, self._on_namespace)] if f.informers.namespaces is not None else []
        try:
            with subscribed((f.works, self._on_work), (f.clusters, self._on_cluster), *namespaces):
                async for key, obj in yielding(list(f.works.cache.items())):
                    self._on_work(key, None, obj)
                await asyncio.Event().wait()
        finally:
            await stop_tasks(list(self._tasks.values()))

    # ------------------------------------------------------------------ queues
    def syncer(self, cluster: str) -> Controller:
        ctl = self.syncers.get(cluster)
        if ctl is None:
            async def sync(key: Any) -> float | None:
                return await self._sync(cluster, str(key))

            ctl = self.syncers[cluster] = Controller(f"execution-{cluster}", sync, workers=self.settings.concurrency)
            self._tasks[cluster] = asyncio.create_task(ctl.run(), name=f"execution-{cluster}")
        return ctl

    def _on_work(self, key: str, old: WorkRecord | None, new: WorkRecord | None) -> None:
        if new is None:
            self._retry_at.pop(key, None)
            self._dropped.pop(key, None)
            return
        if old is not None and old.refs != new.refs:
            dropped = (self._dropped.get(key, set()) | set(old.refs)) - set(new.refs)
            if dropped:
                self._dropped[key] = dropped
            else:
                self._dropped.pop(key, None)
        cluster = new.cluster
        pulled = self.fleet.pull(cluster) and not new.deleting
        if cluster and not pulled and self._needs_action(new):
            self.syncer(cluster).queue.add(key)

    def _on_cluster(self, key: str, old: Obj | None, new: Obj | None) -> None:
        name = key.rsplit("/", 1)[-1]
        if new is None:
            self._sent.pop(name, None)
            ctl = self.syncers.pop(name, None)
            task = self._tasks.pop(name, None)
            if task is not None:
                task.cancel()
            if ctl is None:
                return
        for wkey in self.fleet.works_by_cluster.get(name, set()):
            work = self.fleet.work(wkey)
            if work is not None and self._needs_action(work):
                self.syncer(name).queue.add(wkey)

    def _on_namespace(self, key: str, old: Any, new: Any) -> None:
        """A Namespace deleted on the control plane: each push member drops the one DRO-DS made there
        (`_drop_namespace`), as Karmada deletes the namespaces it propagated. Only a deleted one: objects
        may be placed in a namespace the control plane never had, and their namespace stays."""
        name = key.rsplit("/", 1)[-1]
        if new is not None:
            self._ns_deleted.discard(name)
            return
        if old is None:
            return
        self._ns_deleted.add(name)
        for cluster in list(self.fleet.clusters.cache):
            cluster = cluster.rsplit("/", 1)[-1]
            if not self.fleet.pull(cluster):
                self.syncer(cluster).queue.add(f"{NAMESPACE_CHECK}{name}")

    @staticmethod
    def _needs_action(work: WorkRecord) -> bool:
        if work.deleting:
            return EXECUTION_FINALIZER in work.finalizers
        if work.suspended:
            return False
        return not work.holds_current

    # ------------------------------------------------------------------ one Work
    async def _sync(self, cluster: str, key: str) -> float | None:
        if key.startswith(NAMESPACE_CHECK):
            return await self._drop_namespace(cluster, key[len(NAMESPACE_CHECK):])
        work = self.fleet.work(key)
        if work is None or not self._needs_action(work):
            return None
        if self.fleet.cluster(cluster) is None or self.fleet.pull(cluster):
            if work.deleting:  # unregistered (nothing to reach), or the agent prunes
                return await self._release(work)
            return None
        client, why = await self.fleet.clients.get(cluster)
        if work.deleting:
            return await self._empty(cluster, key, work, client, why)
        failed_hash, not_before = self._retry_at.get(key, ("", 0.0))
        wait = not_before - self.clock() if failed_hash == work.hash else 0.0
        if wait > 0:
            return wait
        whole = await self.fleet.work_object(work)  # the manifests, read for this apply only
        if whole is None:
            return None  # changed since it was queued: the watch queues the new version
        self.fleet.applies.started(key)
        try:
            return await self._apply(cluster, key, work, whole, client, why)
        finally:
            self.fleet.applies.ended(key)

    async def _apply(self, cluster: str, key: str, work: WorkRecord, whole: Obj, client: MemberClient | None,
                     why: str | None) -> float | None:
        """Apply ``whole`` (the Work ``work`` read from the store) to the member."""
        manifests: list[Obj] = [m for m in (whole.get("spec") or {}).get("manifests") or [] if isinstance(m, dict)]
        if client is None:
            return await self._failed(key, work, why or "no client", permanent=True, whole=whole)
        owned = self.fleet.owned.setdefault(cluster, set())
        ns_ok = self.fleet.ns_ok.setdefault(cluster, set())
        sent = self._sent.setdefault(cluster, {})
        out: Obj | None = None
        try:
            for ns in sorted({str((m.get("metadata") or {}).get("namespace") or "") for m in manifests} - {""}):
                if ns not in ns_ok:
                    if await client.get("v1", "Namespace", ns) is None:
                        await client.apply({"apiVersion": "v1", "kind": "Namespace",
                                            "metadata": {"name": ns, "labels": {MANAGED_BY: MANAGER}}})
                    ns_ok.add(ns)
            for m in manifests:
                ref = Ref.of(m)
                digest = manifest_hash(m) if ref != work.main else None  # a dependent's, which may be held
                if ref in owned and self._holds(cluster, ref, digest):
                    await self._cancel_cleanup(cluster, ref)
                    continue
                how = self.fleet.informers.interpreter.of(ref.api_version, ref.kind)
                # first contact needs the member's copy only when one that is not DRO-DS's may be there
                first = ref not in owned and not client.foreign_names().absent(
                    ref.api_version, ref.kind, ref.name, ref.namespace or None)
                cur = await client.get(ref.api_version, ref.kind, ref.name, ref.namespace or None) \
                    if first or how.retains else None
                if ref not in owned:  # first contact: is it there, and did someone else create it?
                    if cur is not None and not is_managed(cur) and not may_adopt(m):
                        if ref.kind == CUSTOM_RESOURCE_DEFINITION.kind:
                            continue  # the member's own definition (its operator's) serves the kind: keep it
                        raise _Conflict(f"{ref.kind} {ref.namespace}/{ref.name} already exists in {cluster} "
                                        "and is not managed by DRO-DS")
                    owned.add(ref)
                await self._cancel_cleanup(cluster, ref)
                if cur is not None and how.retains and is_managed(cur):  # Karmada's Retain over the member's copy
                    m = how.retained(m, cur)
                out = await client.apply(m)
                if digest:  # keyed by the Work record's own Ref, whose strings the records share
                    kept = next((r for r in work.refs if r == ref), ref)
                    sent[kept] = (digest, str((out.get("metadata") or {}).get("resourceVersion") or ""))
        except WritesRefused:
            raise  # this process may no longer lead: nothing to record, the next leader applies it
        except _Conflict as e:
            return await self._failed(key, work, str(e), permanent=True, whole=whole)
        except MemberUnavailable as e:
            return await self._failed(key, work, f"unreachable: {e}", permanent=False, whole=whole)
        except MemberError as e:
            return await self._failed(key, work, str(e), permanent=e.status in PERMANENT_STATUS, whole=whole)
        except Exception as e:  # noqa: BLE001 - a client bug for one cluster must not stop the others
            log.exception("applying %s to %s failed", key, cluster)
            return await self._failed(key, work, f"{type(e).__name__}: {e}", permanent=False, whole=whole)
        self._retry_at.pop(key, None)
        await self._prune(cluster, key, work, client)
        now = self.clock()
        seen = [] if out is None else [manifest_status(
            out, rfc3339(now), last_usage(work.status, out),
            how=self.fleet.informers.interpreter.of(str(out.get("apiVersion")), str(out.get("kind"))))]
        status = WorkStatus(observedHash=work.hash, observedGeneration=work.generation, applied=True, manifests=seen,
                            appliedTime=rfc3339_ms(now))
        return await self._write_applied(work, status.model_dump(exclude_defaults=True), whole)

    def _holds(self, cluster: str, ref: Ref, digest: str | None) -> bool:
        """The member holds dependent ``ref`` as this controller last applied it: the same manifest (its
        ``digest``) was applied, and the copy followed by watch is at the resourceVersion that apply
        returned (`drods.controllers.copy_versions`). A Work whose workload changed then sends only the
        workload; its main object, whose apply the Work's status records, is always sent."""
        last = self._sent.get(cluster, {}).get(ref) if digest else None
        return last is not None and last[0] == digest and last[1] == self.fleet.copy_versions.version(cluster, ref)

    async def _write_applied(self, work: WorkRecord, applied: Obj, whole: Obj) -> float | None:
        """Record the apply (the work-status controller leaves the Work to this record until its view
        has it, `apply_records`). When that controller recorded the member's copy on the same spec
        meanwhile (its watch saw the apply before this apply was marked), the compare-and-swap is
        lost but the apply stands: "applied" goes onto that newer status, whose observation of the
        copy is the newer, instead of the Work being applied to the member again."""
        if revision := await self.fleet.write_work_status(work, applied, body=whole):
            self.fleet.applies.recorded(work.key, revision)
            return None
        latest = await self.fleet.stored_work(work.key)
        if latest is None:
            return None
        fresh, body = latest
        same_spec = (fresh.hash, fresh.generation, fresh.digest) == (work.hash, work.generation, work.digest)
        if not same_spec or fresh.deleting or fresh.holds_current:
            return None  # the spec moved, or it is going, or recorded already: the watch brings it back
        observed = fresh.status.get("manifests")
        if revision := await self.fleet.write_work_status(
                fresh, {**applied, **({"manifests": observed} if observed else {})}, body=body):
            self.fleet.applies.recorded(work.key, revision)
        return None

    async def _failed(self, key: str, work: WorkRecord, error: str, *, permanent: bool,
                      whole: Obj | None = None) -> float | None:
        st = work.status
        h = work.hash
        failures = (int(st.get("failures") or 0) if st.get("observedHash") == h and not st.get("applied") else 0) + 1
        delay = 30.0 if permanent else min(0.5 * 2 ** min(failures - 1, 6), 30.0)
        self._retry_at[key] = (h, self.clock() + delay)
        kept = [ManifestStatus.model_validate(m) for m in st.get("manifests") or [] if isinstance(m, dict)]
        status = WorkStatus(observedHash=h, observedGeneration=work.generation, applied=False, message=error[:500],
                            failures=failures, permanent=permanent, manifests=kept)
        again = await self._write_status(work, status, whole)
        return again if again is not None else delay

    async def _write_status(self, work: WorkRecord, status: WorkStatus, whole: Obj | None) -> float | None:
        await self.fleet.write_work_status(work, status.model_dump(exclude_defaults=True), body=whole)
        return None  # written, or changed meanwhile: the watch brings the new version back to the queue

    # ------------------------------------------------------------------ deletion
    async def _empty(self, cluster: str, key: str, work: WorkRecord, client: MemberClient | None,
                     why: str | None) -> float | None:
        # the workload first, then its dependents; what another live Work wants stays
        pending = [r for r in reversed(work.refs) if not self.fleet.wants(cluster, r, exclude=key)]
        binding = work.binding
        if client is None:
            await self._defer(cluster, binding, pending, why or "no client")
            return await self._release(work)
        done: list[Ref] = []
        try:
            await self._take_off(cluster, client, pending, done)
        except (MemberUnavailable, MemberError) as e:
            rest = [r for r in pending if r not in done]
            failures = self._delete_failures.get(key, 0) + 1
            if isinstance(e, MemberError) and failures < self.settings.applyFailureThreshold:
                self._delete_failures[key] = failures
                return min(0.5 * 2 ** (failures - 1), 30.0)
            await self._defer(cluster, binding, rest, str(e))
        self._delete_failures.pop(key, None)
        await self._reapply_sharers(cluster, key, [r for r in work.refs if r not in pending])
        for ns in {r.namespace for r in work.refs if r.namespace} & self._ns_deleted:
            # its namespace was deleted first: this may have been the last of it
            self.syncer(cluster).queue.add(f"{NAMESPACE_CHECK}{ns}")
        return await self._release(work)

    async def _drop_namespace(self, cluster: str, namespace: str) -> float | None:
        """Delete the member's ``namespace`` that DRO-DS made there (its label says so) once the control
        plane has none and no live Work wants anything in it; a member away gets a cleanup record."""
        if namespace not in self._ns_deleted or self.fleet.namespace_stored(namespace) or \
                self.fleet.wants_namespace(cluster, namespace):
            return None
        ref = Ref("v1", "Namespace", "", namespace)
        client, why = await self.fleet.clients.get(cluster)
        if client is None:
            await self._defer(cluster, "", [ref], why or "no client")
            return None
        try:
            cur = await client.get("v1", "Namespace", namespace)
            if cur is not None and is_managed(cur):
                await client.delete("v1", "Namespace", namespace, None)
                log.info("deleted namespace %s from %s: gone from the control plane", namespace, cluster)
        except (MemberUnavailable, MemberError) as e:
            await self._defer(cluster, "", [ref], str(e))
        self.fleet.ns_ok.get(cluster, set()).discard(namespace)
        return None

    async def _prune(self, cluster: str, key: str, work: WorkRecord, client: MemberClient) -> None:
        """Take off the member what the Work's manifests no longer list and no live Work wants there (a
        dependent deleted on the control plane, or one the template stopped naming): as Karmada deletes
        a dependent's own Work. What the member cannot take now goes to the cleanup records."""
        listed = set(work.refs)
        waiting = self._dropped.pop(key, set())
        if still := waiting & listed:  # this apply was of a version from before the drop: the next one's
            self._dropped[key] = still
        pending = [r for r in sorted(waiting - listed, key=str) if not self.fleet.wants(cluster, r)]
        done: list[Ref] = []
        try:
            await self._take_off(cluster, client, pending, done)
        except (MemberUnavailable, MemberError) as e:
            await self._defer(cluster, work.binding, [r for r in pending if r not in done], str(e))
        if done:
            log.info("removed %s from %s: the Work %s no longer lists them", ", ".join(map(str, done)), cluster, key)

    async def _take_off(self, cluster: str, client: MemberClient, refs: list[Ref], done: list[Ref]) -> None:
        """Remove ``refs`` from the member where DRO-DS's label says they are its (deleted, or released
        if they are to be preserved), appending each to ``done``; a member error ends it (raised)."""
        for ref in refs:
            cur = await client.get(ref.api_version, ref.kind, ref.name, ref.namespace or None)
            if cur is not None and is_managed(cur):
                await client.remove(ref.api_version, ref.kind, ref.name, ref.namespace or None, cur)
            self.fleet.owned.get(cluster, set()).discard(ref)
            self._sent.get(cluster, {}).pop(ref, None)
            done.append(ref)

    async def _reapply_sharers(self, cluster: str, key: str, kept: list[Ref]) -> None:
        """What this Work leaves because another Work wants it holds this Work's last apply (a
        Service a MultiClusterService made a LoadBalancer that also follows a workload): those Works
        apply their own version again."""
        if not kept:
            return
        for wkey in sorted(self.fleet.works_by_cluster.get(cluster, set()) - {key}):
            other = self.fleet.work(wkey)
            if other is not None and not other.deleting and any(r in other.refs for r in kept):
                await self.fleet.write_work_status(other, {**other.status, "applied": False, "observedHash": ""})

    async def _release(self, work: WorkRecord) -> float | None:
        with contextlib.suppress(NotFound):
            await self.registry.remove_finalizer(WORK, work.name, EXECUTION_FINALIZER)
        return None

    async def _defer(self, cluster: str, binding: str, refs: list[Ref], reason: str) -> None:
        """Record deletions a member could not take now; `drods.controllers.cleanup` does them later."""
        since = rfc3339(self.clock())
        for ref in refs:
            body = {"cluster": cluster, "apiVersion": ref.api_version, "kind": ref.kind,
                    "namespace": ref.namespace, "name": ref.name, "binding": binding, "since": since,
                    "reason": reason[:300]}
            await self.fleet.store.put(cleanup_key(cluster, ref), jsondoc.dumps(body))

    async def _cancel_cleanup(self, cluster: str, ref: Ref) -> None:
        key = cleanup_key(cluster, ref)
        if key in self.fleet.cleanups.cache:
            with contextlib.suppress(CasFailed):
                await self.fleet.store.delete(key)
            self.fleet.cleanups.cache.pop(key, None)
