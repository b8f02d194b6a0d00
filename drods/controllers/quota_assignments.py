"""A FederatedResourceQuota's ``staticAssignments`` on the members (Karmada's): each assigned cluster
gets a ResourceQuota of the quota's name in its namespace with the assignment's ``hard``, carried
by a Work like any propagated object (the execution controller applies it to push members and
empties them when the Work goes; a pull member's agent applies its own).

The Works are owned by the quota, not by a Binding: their ``spec.binding`` is
``FederatedResourceQuota_<namespace>_<name>`` (`quota_owner`; never a Binding's name, which has no
capitals or underscores), which the binding controller leaves alone. A pass, when a quota, one of its
Works or the clusters joined change and every ``RESYNC_SECONDS``, writes the Works that differ and deletes the
ones no assignment wants (an assignment removed, a quota deleted).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from typing import Any

from drods.controllers.fleet import MemberFleet
from drods.controllers.manifests import digest, own
from drods.controllers.work_record import WorkRecord
from drods.errors import AlreadyExists, ApiError, Conflict, NotFound
from drods.machinery.informer import Informer, subscribed
from drods.machinery.periodic import Periodic
from drods.machinery.tasks import yielding
from drods.model.annotations import LEADER_GENERATION
from drods.model.kinds import WORK
from drods.model.work import EXECUTION_FINALIZER, work_labels, work_name

log = logging.getLogger(__name__)
Obj = dict[str, Any]

RESYNC_SECONDS = 15.0
OWNER_PREFIX = "FederatedResourceQuota_"


def quota_owner(namespace: str, name: str) -> str:
    return f"{OWNER_PREFIX}{namespace}_{name}"


def is_quota_owner(binding: str) -> bool:
    """A Work's ``spec.binding`` naming a FederatedResourceQuota, not a Binding."""
    return binding.startswith(OWNER_PREFIX)


def member_quota(quota: Obj, cluster: str, hard: Obj) -> Obj:
    """The ResourceQuota ``cluster`` gets for ``quota``'s assignment, with DRO-DS's ownership marks."""
    meta = quota["metadata"]
    rq: Obj = {"apiVersion": "v1", "kind": "ResourceQuota",
               "metadata": {"name": meta["name"], "namespace": meta["namespace"]},
               "spec": {"hard": {k: str(v) for k, v in hard.items()}}}
    return own(rq, binding=quota_owner(meta["namespace"], meta["name"]), binding_uid=str(meta.get("uid") or ""),
               template_generation=int(meta.get("generation") or 1), cluster=cluster, overrides=[])


class QuotaAssignments:
    def __init__(self, fleet: MemberFleet, quotas: Informer, generation: int) -> None:
        self.fleet = fleet
        self.quotas = quotas
        self.generation = generation
        # the keys of the quotas' Works, kept from the Work events: a pass does not sort 200,000
        # Works of Bindings to find them, and a Binding's Work wakes no pass
        self.owned: set[str] = set()

    async def run(self) -> None:
        await self.fleet.synced.wait()
        changed = asyncio.Event()
        passes = Periodic("federated-quota-assignments", self.tick, RESYNC_SECONDS, wake=changed,
                          first_at_start=True, coalesce_s=0.2)

        def on_quota(_key: str, _old: object, _new: object) -> None:
            changed.set()

        def on_work(key: str, old: object, new: object) -> None:
            if self.observe(key, old, new):
                changed.set()

        def on_cluster(_key: str, old: Obj | None, new: Obj | None) -> None:
            if old is None or new is None or old.get("spec") != new.get("spec"):
                changed.set()  # joined, left, or its sync mode may differ: not a status report

        with subscribed((self.quotas, on_quota), (self.fleet.works, on_work), (self.fleet.clusters, on_cluster)):
            async for key, work in yielding(list(self.fleet.works.cache.items())):
                self.observe(key, None, work)
            await passes.run()

    def observe(self, key: str, old: object, new: object) -> bool:
        """Keep `owned` as a Work changes; True when it is a quota's."""
        work = new if new is not None else old
        if not (isinstance(work, WorkRecord) and is_quota_owner(work.binding)):
            return False
        if new is None:
            self.owned.discard(key)
        else:
            self.owned.add(key)
        return True

    def wanted(self) -> dict[str, Obj]:
        """Work name → the Work body every current assignment to a known cluster wants."""
        out: dict[str, Obj] = {}
        for q in self.quotas.cache.values():
            meta = q["metadata"]
            if meta.get("deletionTimestamp"):
                continue
            owner = quota_owner(meta["namespace"], meta["name"])
            for a in (q.get("spec") or {}).get("staticAssignments") or []:
                cluster = a["clusterName"]
                if self.fleet.cluster(cluster) is None:
                    continue
                manifests = [member_quota(q, cluster, a["hard"])]
                # the owner has capitals and underscores (never a Binding's name): not for an object name
                wmeta: Obj = {"name": work_name(f"federatedresourcequota.{meta['namespace']}.{meta['name']}",
                                                cluster),
                              "labels": work_labels(owner, cluster),
                              "annotations": {LEADER_GENERATION: str(self.generation)}}
                if not self.fleet.pull(cluster):
                    wmeta["finalizers"] = [EXECUTION_FINALIZER]
                out[wmeta["name"]] = {"apiVersion": WORK.api_version, "kind": WORK.kind, "metadata": wmeta,
                                      "spec": {"cluster": cluster, "binding": owner, "manifests": manifests,
                                               "hash": digest(manifests)}}
        return out

    async def tick(self) -> int:
        """One pass; returns how many Works it wrote or deleted."""
        wanted = self.wanted()
        cache = self.fleet.works.cache
        have: dict[str, WorkRecord] = {w.name: w for w in (cache.get(k) for k in list(self.owned))
                                       if isinstance(w, WorkRecord)}
        changes = 0
        for name, body in sorted(wanted.items()):
            cur = have.get(name)
            if cur is not None and cur.deleting:
                continue  # recreated once gone
            if cur is not None and cur.hash == body["spec"]["hash"]:
                continue
            whole = await self.fleet.work_object(cur) if cur is not None else None  # the update's base
            if cur is not None and whole is None:
                continue  # changed meanwhile: the watch wakes the next pass
            if cur is not None:
                body["metadata"]["resourceVersion"] = str(cur.revision)
            with contextlib.suppress(NotFound, Conflict, AlreadyExists):
                try:
                    await self.fleet.registry.batch_upsert([(WORK, body)], results=False, trusted=True,
                                                           current={WORK.key(name): whole} if whole else None)
                    changes += 1
                except ApiError as e:
                    log.warning("quota Work %s: %s", name, e.message)
        for name in sorted(have.keys() - wanted.keys()):
            if not have[name].deleting:
                with contextlib.suppress(NotFound, Conflict):
                    await self.fleet.registry.delete(WORK, name)
                    changes += 1
        return changes
