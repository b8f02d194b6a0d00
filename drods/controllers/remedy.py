"""Karmada's Remedy controller: keeps each cluster's ``status.remedyActions`` the actions of the
Remedies that hold for it (`drods.model.remedy`). A pass runs when a cluster or a Remedy changes (a
health probe flipping a condition is a cluster change) and every ``RESYNC_SECONDS``; it looks at the
clusters that changed since the last pass (every cluster when a Remedy changed, and at each resync:
`drods.machinery.changed`); one status merge patch per cluster whose actions changed."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable
from typing import Any

from drods.controllers.fleet import MemberFleet
from drods.errors import AlreadyExists, Conflict, Invalid, NotFound
from drods.machinery.changed import ChangedKeys
from drods.machinery.informer import Informer, subscribed
from drods.machinery.periodic import Periodic
from drods.machinery.tasks import yielding
from drods.model.kinds import CLUSTER, REMEDY
from drods.model.remedy import RemedySpec, remedy_actions
from drods.registry.patch import MERGE_PATCH

log = logging.getLogger(__name__)
Obj = dict[str, Any]

RESYNC_SECONDS = 30.0


class Remedies:
    def __init__(self, fleet: MemberFleet, remedies: Informer, *, clock: Callable[[], float] = time.time) -> None:
        self.fleet = fleet
        self.remedies = remedies
        self.clock = clock
        self.changed = ChangedKeys(RESYNC_SECONDS, clock)

    async def run(self) -> None:
        await self.fleet.synced.wait()
        await self.remedies.wait_synced()
        changed = asyncio.Event()
        passes = Periodic("remedies", self.tick, RESYNC_SECONDS, wake=changed, first_at_start=True)

        def on_cluster(key: str, _old: Obj | None, _new: Obj | None) -> None:
            self.changed.mark(key)
            changed.set()

        def on_remedy(_key: str, _old: Obj | None, _new: Obj | None) -> None:
            self.changed.everything()
            changed.set()

        with subscribed((self.fleet.clusters, on_cluster), (self.remedies, on_remedy)):
            await passes.run()

    def _specs(self) -> list[RemedySpec]:
        out = []
        for key, obj in sorted(self.remedies.cache.items()):
            if (obj.get("metadata") or {}).get("deletionTimestamp"):
                continue
            try:
                out.append(RemedySpec.model_validate(obj.get("spec") or {}))
            except ValueError:  # validated on the way in; one stored by another version may not be
                log.warning("Remedy %s: invalid spec, skipped", key[len(REMEDY.key_prefix()):])
        return out

    async def tick(self) -> list[str]:
        """One pass over the clusters changed since the last; returns those whose remedy actions it changed."""
        specs = self._specs()
        changed: list[str] = []
        async for key in yielding(self.changed.take(lambda: list(self.fleet.clusters.cache))):
            cluster = self.fleet.clusters.cache.get(key)
            if cluster is None:
                continue
            name = key[len(CLUSTER.key_prefix()):]
            status = cluster.get("status") or {}
            conditions = [c for c in status.get("conditions") or [] if isinstance(c, dict)]
            actions = remedy_actions(name, conditions, specs)
            if actions == list(status.get("remedyActions") or []):
                continue
            with contextlib.suppress(NotFound, Conflict, AlreadyExists, Invalid):
                await self.fleet.registry.patch(CLUSTER, name, {"status": {"remedyActions": actions or None}},
                                                MERGE_PATCH, subresource="status")
                changed.append(name)
                log.info("cluster %s: remedy actions now %s", name, ", ".join(actions) or "none")
        return changed
