"""Deletions that wait for a member (M3: "nothing left behind", also for members that were down).

When a copy must go but its member can't be reached (down, partitioned, credentials broken), the
execution controller records it under ``/cleanup/<cluster>/<kind>/<namespace>/<name>`` and moves
on. This loop retries those records every ``cleanupIntervalSeconds`` and at once when a cluster
changes (e.g. it is Ready again), one task per cluster so a slow member delays only its own.
A record is dropped without deleting anything when the object is wanted on that cluster again
(the workload came back before the member did), and an object is deleted only when it carries
DRO-DS's ``managed-by`` label. Records of unregistered clusters are dropped.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from typing import Any

from drods.controllers.fleet import MemberFleet, ready_condition
from drods.machinery.periodic import Periodic
from drods.machinery.tasks import stop_tasks
from drods.members.client import MemberError, MemberUnavailable
from drods.model.annotations import is_managed
from drods.model.keys import CLEANUP_PREFIX
from drods.model.work import Ref
from drods.store import CasFailed

log = logging.getLogger(__name__)


class Cleanup:
    def __init__(self, fleet: MemberFleet, interval_s: float) -> None:
        self.fleet = fleet
        self.interval_s = interval_s
        self._busy: set[str] = set()
        self._tasks: set[asyncio.Task[None]] = set()

    def pending(self) -> dict[str, list[tuple[str, dict[str, Any]]]]:
        """Records by cluster: [(store key, record)]."""
        out: dict[str, list[tuple[str, dict[str, Any]]]] = {}
        for key, rec in list(self.fleet.cleanups.cache.items()):
            cluster = key[len(CLEANUP_PREFIX):].split("/", 1)[0]
            out.setdefault(cluster, []).append((key, rec))
        return out

    async def run(self) -> None:
        await self.fleet.synced.wait()
        try:
            await Periodic("cleanup", self._start_due, self.interval_s, wake=self.fleet.cluster_changed,
                           first_at_start=True).run()
        finally:
            await stop_tasks(self._tasks)

    async def _start_due(self) -> None:
        """A task for each cluster with records and none running."""
        for cluster, records in self.pending().items():
            if cluster in self._busy:
                continue
            self._busy.add(cluster)
            t = asyncio.create_task(self._cluster(cluster, records))
            self._tasks.add(t)
            t.add_done_callback(self._tasks.discard)

    async def _cluster(self, cluster: str, records: list[tuple[str, dict[str, Any]]]) -> None:
        try:
            await self.clean(cluster, records)
        except Exception:
            log.exception("cleanup in %s failed", cluster)
        finally:
            self._busy.discard(cluster)

    async def clean(self, cluster: str, records: list[tuple[str, dict[str, Any]]]) -> int:
        """Try the cluster's records; returns how many objects were deleted."""
        fleet = self.fleet
        if fleet.cluster(cluster) is None:
            for key, _ in records:
                await self._drop(key)
            return 0
        if ready_condition(fleet.cluster(cluster)) == "False":
            return 0  # the health controller will tell us (cluster change) when it is back
        client, _ = await fleet.clients.get(cluster)
        if client is None:
            return 0
        deleted = 0
        for key, rec in records:
            try:
                ref = Ref(str(rec["apiVersion"]), str(rec["kind"]), str(rec.get("namespace") or ""), str(rec["name"]))
            except KeyError:
                await self._drop(key)
                continue
            implicit = not rec.get("binding")  # a namespace made for a Work's objects, no Work's own
            if self._wanted(cluster, ref, implicit):
                await self._drop(key)  # wanted there again: leave the object alone
                continue
            try:
                cur = await client.get(ref.api_version, ref.kind, ref.name, ref.namespace or None)
                if cur is not None and is_managed(cur) and not self._wanted(cluster, ref, implicit):
                    await client.delete(ref.api_version, ref.kind, ref.name, ref.namespace or None)
                    deleted += 1
                    log.info("cleanup: deleted %s from %s (pending since %s)", ref, cluster, rec.get("since"))
            except MemberUnavailable:
                return deleted  # still away; next round
            except MemberError as e:
                if e.status != 404:
                    log.warning("cleanup of %s in %s: %s", ref, cluster, e)
                    continue
            fleet.owned.get(cluster, set()).discard(ref)
            await self._drop(key)
        return deleted

    def _wanted(self, cluster: str, ref: Ref, implicit: bool) -> bool:
        """An object is wanted while a live Work wants it; a namespace DRO-DS made for the objects it
        placed (``implicit``) also while the control plane has it or a live Work wants anything in it."""
        if implicit and ref.api_version == "v1" and ref.kind == "Namespace":
            return self.fleet.namespace_stored(ref.name) or self.fleet.wants_namespace(cluster, ref.name)
        return self.fleet.wants(cluster, ref)

    async def _drop(self, key: str) -> None:
        with contextlib.suppress(CasFailed):
            await self.fleet.store.delete(key)
        self.fleet.cleanups.cache.pop(key, None)
