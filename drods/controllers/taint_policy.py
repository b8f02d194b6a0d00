"""ClusterTaintPolicy controller (Karmada's): keeps each cluster's ``spec.taints`` in step with the
policies whose ``targetClusters`` select it (`drods.model.taint_policy`).

A pass runs when a cluster or a policy changes (a health probe flipping a condition is a cluster
change) and every ``RESYNC_SECONDS``, over the clusters changed since the last (every cluster when a
policy changed, and at each resync: `drods.machinery.changed`). For each and each policy selecting it, in name order:
when every ``addOnConditions`` entry holds, the policy's taints are added (a taint of the same key
and effect takes the policy's value); else, when every ``removeOnConditions`` entry holds, they are
removed. One merge patch per changed cluster, guarded by its resourceVersion (a lost race is judged
again on the next pass, which the cluster's own change wakes).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable, Sequence
from typing import Any

from drods.controllers.fleet import MemberFleet
from drods.controllers.overrides import cluster_matches
from drods.errors import AlreadyExists, Conflict, Invalid, NotFound
from drods.machinery.changed import ChangedKeys
from drods.machinery.informer import Informer, subscribed
from drods.machinery.periodic import Periodic
from drods.machinery.tasks import yielding
from drods.model.kinds import CLUSTER, CLUSTER_TAINT_POLICY
from drods.model.policy import OverrideClusterSelector
from drods.model.taint_policy import ClusterTaintPolicySpec, PolicyTaint, all_hold
from drods.model.timefmt import rfc3339
from drods.registry.patch import MERGE_PATCH

log = logging.getLogger(__name__)
Obj = dict[str, Any]

RESYNC_SECONDS = 30.0


def _selector(spec: ClusterTaintPolicySpec) -> OverrideClusterSelector:
    t = spec.targetClusters
    if t is None:
        return OverrideClusterSelector()
    return OverrideClusterSelector(names=list(t.clusterNames), labelSelector=t.labelSelector,
                                   exclude=list(t.exclude), fieldSelector=t.fieldSelector)


def _fields(cluster: Obj) -> dict[str, str]:
    spec = cluster.get("spec") or {}
    return {k: str(spec[k]) for k in ("provider", "region", "zone", "city") if spec.get(k)}


def tainted(cluster: Obj, policies: Sequence[ClusterTaintPolicySpec], now: str) -> list[Obj] | None:
    """The cluster's taints once ``policies`` (in order) have acted, or None: nothing changes."""
    meta = cluster.get("metadata") or {}
    name = str(meta.get("name") or "")
    conditions = [c for c in (cluster.get("status") or {}).get("conditions") or [] if isinstance(c, dict)]
    before = [t for t in (cluster.get("spec") or {}).get("taints") or [] if isinstance(t, dict)]
    taints = list(before)
    for p in policies:
        if not cluster_matches(_selector(p), name, meta.get("labels") or {}, _fields(cluster)):
            continue
        if all_hold(p.addOnConditions, conditions):
            taints = _added(taints, p.taints, now)
        elif all_hold(p.removeOnConditions, conditions):
            drop = {(t.key, t.effect) for t in p.taints}
            taints = [t for t in taints if (t.get("key"), t.get("effect")) not in drop]
    return None if taints == before else taints


def _added(taints: list[Obj], add: Sequence[PolicyTaint], now: str) -> list[Obj]:
    out = list(taints)
    for t in add:
        i = next((i for i, c in enumerate(out) if (c.get("key"), c.get("effect")) == (t.key, t.effect)), None)
        if i is None:
            out.append({"key": t.key, "value": t.value, "effect": t.effect, "timeAdded": now})
        elif (out[i].get("value") or "") != t.value:
            out[i] = {**out[i], "value": t.value}
    return out


class ClusterTaintPolicies:
    def __init__(self, fleet: MemberFleet, policies: Informer, *,
                 clock: Callable[[], float] = time.time) -> None:
        self.fleet = fleet
        self.policies = policies
        self.clock = clock
        self.changed = ChangedKeys(RESYNC_SECONDS, clock)

    async def run(self) -> None:
        await self.fleet.synced.wait()
        changed = asyncio.Event()
        passes = Periodic("cluster-taint-policies", self.tick, RESYNC_SECONDS, wake=changed, first_at_start=True)

        def on_cluster(key: str, _old: Obj | None, _new: Obj | None) -> None:
            self.changed.mark(key)
            changed.set()

        def on_policy(_key: str, _old: Obj | None, _new: Obj | None) -> None:
            self.changed.everything()
            changed.set()

        with subscribed((self.fleet.clusters, on_cluster), (self.policies, on_policy)):
            await passes.run()

    def _specs(self) -> list[ClusterTaintPolicySpec]:
        out = []
        for key, obj in sorted(self.policies.cache.items()):
            try:
                out.append(ClusterTaintPolicySpec.model_validate(obj.get("spec") or {}))
            except ValueError:  # validated on the way in; one stored by another version may not be
                log.warning("ClusterTaintPolicy %s: invalid spec, skipped",
                            key[len(CLUSTER_TAINT_POLICY.key_prefix()):])
        return out

    async def tick(self) -> list[str]:
        """One pass over the clusters changed since the last; returns those whose taints it changed."""
        keys = self.changed.take(lambda: list(self.fleet.clusters.cache))
        specs = self._specs()
        if not specs:
            return []
        now = rfc3339(self.clock())
        changed: list[str] = []
        async for key in yielding(keys):
            cluster = self.fleet.clusters.cache.get(key)
            if cluster is None:
                continue
            taints = tainted(cluster, specs, now)
            if taints is None:
                continue
            name = key[len(CLUSTER.key_prefix()):]
            patch = {"metadata": {"resourceVersion": cluster["metadata"]["resourceVersion"]},
                     "spec": {"taints": taints}}
            with contextlib.suppress(NotFound, Conflict, AlreadyExists, Invalid):
                await self.fleet.registry.patch(CLUSTER, name, patch, MERGE_PATCH)
                changed.append(name)
                log.info("cluster %s: taints now %s", name,
                         ", ".join(f"{t['key']}:{t['effect']}" for t in taints) or "none")
        return changed
