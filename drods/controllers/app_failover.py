"""Application failover (Karmada's ``failover.application``): a workload leaves a member whose copy
stayed unhealthy past the policy's ``tolerationSeconds``.

Cluster failover (`drods.controllers.failover`) watches clusters; this watches each copy's health
(`drods.model.app_failover.copy_health` of the Binding's ``status.clusters[]`` entry, i.e. what the
member reports). The clock of a copy starts when it is first seen unhealthy and stops when it is
healthy again; it lives in memory (as in Karmada), so a new leader starts counting afresh — a move
is late after a fail-over of the control plane, never early.

When it runs out, one write to the Binding adds a graceful eviction task for the cluster (with the
state the policy's ``statePreservation`` reads from the failed copy's status) and asks for a
re-placement from scratch (``spec.rescheduleTriggeredAt`` and the reason, which the decision record
and ``drods explain`` show). The scheduler then leaves the cluster out and the binding controller
removes the old copy as the task's ``purgeMode`` says. Once the move is over (`task_done`) the task
goes, its preserved labels kept in ``spec.preservedLabelState``.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from typing import Any

from drods.controllers.cluster_eviction import preserved_state
from drods.controllers.fleet import MemberFleet
from drods.controllers.rescheduler import Rescheduler, trigger
from drods.errors import ApiError
from drods.machinery.informer import subscribed
from drods.machinery.periodic import Periodic
from drods.model.app_failover import (
    PRODUCER,
    ApplicationFailoverBehavior,
    GracefulEvictionTask,
    copy_health,
    declared_behavior,
    eviction_task,
    eviction_tasks,
    task_done,
)
from drods.model.kinds import BINDING
from drods.model.timefmt import parse_rfc3339, rfc3339
from drods.registry.patch import MERGE_PATCH

log = logging.getLogger(__name__)
Obj = dict[str, Any]


def failover_message(cluster: str, since: float, toleration: int) -> str:
    return f"application failover: the copy in {cluster} unhealthy since {rfc3339(since)} (toleration {toleration}s)"


class ApplicationFailover:
    """One per leadership term of the member controllers; ``tick`` is one pass (tests call it)."""

    def __init__(self, fleet: MemberFleet, rescheduler: Rescheduler, *, interval_s: float = 1.0,
                 clock: Callable[[], float] = time.time) -> None:
        self.fleet = fleet
        self.rescheduler = rescheduler
        self.interval_s = interval_s
        self.clock = clock
        self.watched: set[str] = set()  # bindings whose spec asks for application failover
        self.unhealthy_since: dict[tuple[str, str], float] = {}  # (binding, cluster) → first seen unhealthy

    def _on_binding(self, key: str, _old: Obj | None, new: Obj | None) -> None:
        name = key[len(BINDING.key_prefix()):]
        if new is not None and ((new.get("spec") or {}).get("failover") or {}).get("application"):
            self.watched.add(name)
        else:
            self.watched.discard(name)

    async def run(self) -> None:
        await self.fleet.synced.wait()
        for key, obj in list(self.fleet.bindings.cache.items()):
            self._on_binding(key, None, obj)
        changed = asyncio.Event()

        def on_change(key: str, old: Obj | None, new: Obj | None) -> None:
            self._on_binding(key, old, new)
            changed.set()

        passes = Periodic("application-failover", self.tick, self.interval_s, wake=changed, first_at_start=True,
                          coalesce_s=0.05)
        with subscribed((self.fleet.bindings, on_change)):
            await passes.run()

    async def tick(self) -> list[tuple[str, str]]:
        """One pass; returns the (binding, cluster) pairs moved."""
        now = self.clock()
        moved: list[tuple[str, str]] = []
        seen: set[tuple[str, str]] = set()
        for name in sorted(self.watched):
            try:
                moved += await self._binding(name, now, seen)
            except Exception:  # noqa: BLE001 - one binding's failure must not stop the others' failover
                log.exception("application failover of %s failed", name)
        for gone in self.unhealthy_since.keys() - seen:
            del self.unhealthy_since[gone]
        return moved

    async def _binding(self, name: str, now: float, seen: set[tuple[str, str]]) -> list[tuple[str, str]]:
        """One binding's part of a pass: a move off a cluster its copy failed on, or its finished moves."""
        binding = self.fleet.bindings.cache.get(BINDING.key(name))
        behavior = declared_behavior(binding, "application", ApplicationFailoverBehavior) \
            if binding is not None else None
        if binding is None or behavior is None or (binding.get("metadata") or {}).get("deletionTimestamp"):
            return []
        for cluster, since in self._overdue(name, binding, behavior, now, seen):
            if await self._evict(name, binding, behavior, cluster, since, now):
                return [(name, cluster)]  # one eviction per write: the next pass sees the stored task
        await self._finish(name, binding, now)
        return []

    def _overdue(self, name: str, binding: Obj, behavior: ApplicationFailoverBehavior, now: float,
                 seen: set[tuple[str, str]]) -> list[tuple[str, float]]:
        """The placed clusters whose copy has been unhealthy past the toleration (with since when)."""
        spec, status = binding.get("spec") or {}, binding.get("status") or {}
        evicted = {t.fromCluster for t in eviction_tasks(spec)}
        placed = {str(t.get("cluster")) for t in status.get("placement") or [] if isinstance(t, dict)}
        out: list[tuple[str, float]] = []
        for entry in status.get("clusters") or []:
            cluster = str(entry.get("cluster") or "") if isinstance(entry, dict) else ""
            if cluster not in placed or cluster in evicted or copy_health(entry) != "Unhealthy":
                continue
            key = (name, cluster)
            seen.add(key)
            since = self.unhealthy_since.setdefault(key, now)
            if now - since >= behavior.decisionConditions.tolerationSeconds:
                out.append((cluster, since))
        return out

    async def _finish(self, name: str, binding: Obj, now: float) -> None:
        """Take this controller's finished tasks off the Binding, their preserved labels kept."""
        spec, status = binding.get("spec") or {}, binding.get("status") or {}
        tasks = [t for t in eviction_tasks(spec) if t.producer == PRODUCER]
        if not tasks:
            return
        works = self.fleet.works_of(name)
        placed = {str(t.get("cluster")) for t in status.get("placement") or [] if isinstance(t, dict)}
        health = {str(e.get("cluster")): copy_health(e) for e in status.get("clusters") or [] if isinstance(e, dict)}
        healthy = bool(placed) and all(health.get(c) == "Healthy" for c in placed)
        done = [t for t in tasks if task_done(t, now, parse_rfc3339(t.creationTimestamp), new_copies_healthy=healthy,
                                             old_copy_gone=t.fromCluster not in works)]
        if not done:
            return
        kept = [raw for raw in spec.get("gracefulEvictionTasks") or []
                if not (isinstance(raw, dict) and any(_same_task(raw, t) for t in done))]
        labels: dict[str, str] = {}
        for t in done:
            labels.update(t.preservedLabelState)
        patch: Obj = {"gracefulEvictionTasks": kept}
        if labels:
            patch["preservedLabelState"] = labels
        try:
            await self.rescheduler.registry.patch(BINDING, name, {"spec": patch}, MERGE_PATCH)
        except ApiError as e:
            log.warning("taking %s's finished eviction tasks off failed: %s", name, e.message)
            return
        log.info("%s: the moves off %s are over", name, ", ".join(sorted(t.fromCluster for t in done)))

    async def _evict(self, name: str, binding: Obj, behavior: ApplicationFailoverBehavior, cluster: str,
                     since: float, now: float) -> bool:
        spec = binding.get("spec") or {}
        message = failover_message(cluster, since, behavior.decisionConditions.tolerationSeconds)
        task = eviction_task(binding, cluster, rfc3339(now),
                             preserved_state(self.fleet, name, binding, cluster, behavior.statePreservation),
                             message=message, purgeMode=behavior.purgeMode,
                             gracePeriodSeconds=behavior.gracePeriodSeconds
                             if behavior.purgeMode in ("Gracefully", "Graciously") else None)
        tasks = [*(spec.get("gracefulEvictionTasks") or []), task.model_dump(mode="json", exclude_none=True)]
        try:
            await trigger(self.rescheduler.registry, name, message, self.rescheduler.clock,
                          spec={"gracefulEvictionTasks": tasks})
        except ApiError as e:
            log.warning("application failover of %s off %s failed: %s", name, cluster, e.message)
            return False
        self.unhealthy_since.pop((name, cluster), None)
        log.info("%s: %s", name, message)
        return True


def _same_task(raw: Obj, task: GracefulEvictionTask) -> bool:
    return raw.get("fromCluster") == task.fromCluster and raw.get("producer", PRODUCER) == task.producer and \
        raw.get("creationTimestamp") == task.creationTimestamp
