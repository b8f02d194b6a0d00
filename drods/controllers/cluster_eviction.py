"""Karmada's ``failover.cluster``: a binding moved off a cluster by failover (NotReady past its
toleration) or by a NoExecute taint it does not tolerate (`drods.controllers.failover`) gets a graceful
eviction task — the same record application failover writes (`drods.model.app_failover`) — when its
policy declares ``failover.cluster``: ``purgeMode`` (Directly / Gracefully) says how the binding
controller removes the old copy, ``statePreservation`` reads values from the failed copy's last
reported status and the new copies carry them as labels. The task keeps the cluster out of the
binding's placement while the cluster is NotReady or tainted; `release` takes it off once it is not
(so placement may come back, as without the task). Without ``failover.cluster`` the binding is just
re-placed, as S11 always did.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from typing import Any

from drods.controllers.aggregate import member_status
from drods.controllers.fleet import MemberFleet
from drods.controllers.rescheduler import Rescheduler, trigger
from drods.errors import ApiError
from drods.model.annotations import FAILED_OVER_FROM, failed_over_from
from drods.model.app_failover import (
    TAINT_PRODUCER,
    TAINT_REASON,
    ClusterFailoverBehavior,
    StatePreservation,
    declared_behavior,
    eviction_task,
    preserved_labels,
)
from drods.model.kinds import BINDING
from drods.model.timefmt import rfc3339
from drods.model.work import Ref
from drods.registry.patch import MERGE_PATCH

log = logging.getLogger(__name__)
Obj = dict[str, Any]


def preserved_state(fleet: MemberFleet, name: str, binding: Obj, cluster: str,
                    preservation: StatePreservation | None) -> dict[str, str]:
    """The labels ``preservation``'s rules read from the copy's last status reported from ``cluster``."""
    if preservation is None:
        return {}
    resource = (binding.get("spec") or {}).get("resource") or {}
    ref = Ref(str(resource.get("apiVersion")), str(resource.get("kind")), str(resource.get("namespace") or ""),
              str(resource.get("name")))
    return preserved_labels(preservation.rules, member_status(fleet.works_of(name).get(cluster), ref))


async def evict(fleet: MemberFleet, rescheduler: Rescheduler, name: str, binding: Obj, cluster: str, reason: str,
                now: float, *, failed_over: bool = False) -> tuple[bool, Obj | None]:
    """Move ``name`` off ``cluster``: with a graceful eviction task when its policy declares
    ``failover.cluster`` (True), else a plain re-placement; a move off a failed cluster (``failed_over``)
    is remembered, so it can fail back. Also returns the Binding as written, when the write returns
    it (a move off another cluster next starts from it). Raises ApiError when the write fails."""
    behavior = declared_behavior(binding, "cluster", ClusterFailoverBehavior)
    if behavior is None:
        if failed_over:
            return False, await rescheduler.failover(name, cluster, reason)
        await rescheduler.binding(name, reason)
        return False, None
    task = eviction_task(binding, cluster, rfc3339(now),
                         preserved_state(fleet, name, binding, cluster, behavior.statePreservation),
                         message=reason, reason=TAINT_REASON, producer=TAINT_PRODUCER, purgeMode=behavior.purgeMode)
    kept = [t for t in (binding.get("spec") or {}).get("gracefulEvictionTasks") or []
            if not (isinstance(t, dict) and t.get("fromCluster") == cluster and t.get("producer") == TAINT_PRODUCER)]
    remembered = {FAILED_OVER_FROM: ",".join(sorted({*failed_over_from(binding), cluster}))} if failed_over else None
    return True, await trigger(rescheduler.registry, name, reason, rescheduler.clock, remembered,
                               spec={"gracefulEvictionTasks": [*kept, task.model_dump(mode="json", exclude_none=True)]})


def _taint_tasks(binding: Obj | None) -> list[Obj]:
    return [t for t in ((binding or {}).get("spec") or {}).get("gracefulEvictionTasks") or []
            if isinstance(t, dict) and t.get("producer") == TAINT_PRODUCER]


def tasked(fleet: MemberFleet) -> set[str]:
    """The bindings holding a TaintManager eviction task (one scan, when a leader starts)."""
    prefix = len(BINDING.key_prefix())
    return {k[prefix:] for k, b in list(fleet.bindings.cache.items()) if _taint_tasks(b)}


async def release(fleet: MemberFleet, rescheduler: Rescheduler, failing: set[str], bindings: Iterable[str]) -> set[str]:
    """Take the TaintManager eviction tasks for clusters no longer ``failing`` (NotReady or
    NoExecute-tainted) off ``bindings``; returns those left with no such task."""
    cleared: set[str] = set()
    for name in bindings:
        binding = fleet.bindings.cache.get(BINDING.key(name))
        tasks = [t for t in ((binding or {}).get("spec") or {}).get("gracefulEvictionTasks") or []
                 if isinstance(t, dict)]
        kept = [t for t in tasks if t.get("producer") != TAINT_PRODUCER or t.get("fromCluster") in failing]
        if binding is not None and len(kept) < len(tasks):
            try:
                await rescheduler.registry.patch(BINDING, name, {"spec": {"gracefulEvictionTasks": kept}},
                                                 MERGE_PATCH)
            except ApiError as e:
                log.warning("releasing %s's eviction tasks failed: %s", name, e.message)
                continue
        if not _taint_tasks({"spec": {"gracefulEvictionTasks": kept}}):
            cleared.add(name)
    return cleared
