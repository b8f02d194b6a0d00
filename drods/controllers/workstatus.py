"""The work-status controller (Karmada's): what push-mode members hold, recorded on their Works.

Every ``statusPollSeconds`` (less often for a member whose listing is slow: never more than ~10 % of
the time listing) it lists each member's DRO-DS-managed workloads of the kinds its Works carry, and
writes the main manifest's status onto the Work when it changed — the same ``status.manifests`` a
pull-mode agent reports. A copy deleted behind DRO-DS's back (applied before the listing started,
missing from it) marks its Work not applied, so the execution controller applies it again.

Every ``usagePollSeconds`` it also reads the workloads' use (`drods.members.workload_usage`: one pods
and one PodMetrics list per namespace) and writes it on the manifest status as ``usage``.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from typing import Any

from drods.controllers.execution import manifest_status
from drods.controllers.fleet import MemberFleet
from drods.controllers.manifests import WORKLOAD_KINDS
from drods.controllers.settings import MemberSettings
from drods.controllers.work_record import WorkRecord
from drods.machinery.periodic import Periodic
from drods.machinery.tasks import raise_ended, stop_tasks
from drods.members.client import MemberError, MemberUnavailable
from drods.members.workload_usage import UsageReader, key_of
from drods.model.annotations import MANAGED_SELECTOR
from drods.model.interpreter import Interpreter
from drods.model.timefmt import parse_rfc3339, rfc3339
from drods.model.work import Ref

log = logging.getLogger(__name__)
Obj = dict[str, Any]


def main_ref(work: WorkRecord, interpreter: Interpreter | None = None) -> Ref | None:
    """The Work's main object when its status is aggregated: a workload kind, a Pod
    (`drods.controllers.pod_status`), an Ingress or a Service (a MultiClusterIngress and a
    LoadBalancer MultiClusterService read their load balancers), or a kind whose interpreter
    customization declares a status rule or scripts status or health."""
    main = work.main
    if main is None:
        return None
    if main.kind in WORKLOAD_KINDS or main.kind in ("Pod", "Ingress", "Service"):
        return main
    if interpreter is None or not interpreter.of(main.api_version, main.kind).reports_status:
        return None
    return main


class WorkStatusController:
    def __init__(self, fleet: MemberFleet, settings: MemberSettings, *,
                 clock: Callable[[], float] = time.time) -> None:
        self.fleet = fleet
        self.settings = settings
        self.clock = clock
        self._pollers: dict[str, asyncio.Task[None]] = {}
        # per cluster: binding → (the Work's and the member object's resourceVersions) last found in
        # agreement, so an unchanged pair costs nothing on the next poll
        self._agreed: dict[str, dict[str, tuple[str, str]]] = {}
        self._usage: dict[str, UsageReader] = {}  # per cluster: its workloads' last usage reading

    async def run(self) -> None:
        try:
            await Periodic("work-status", self._start_pollers, min(1.0, self.settings.statusPollSeconds),
                           first_at_start=True).run()
        finally:
            await stop_tasks(list(self._pollers.values()))

    async def _start_pollers(self) -> None:
        """One poller per push member holding Works; none for the others (a poller ended by
        `LeadershipLost` ends this term)."""
        raise_ended(self._pollers.values())
        wanted = {c for c, keys in self.fleet.works_by_cluster.items()
                  if keys and self.fleet.cluster(c) is not None and not self.fleet.pull(c)}
        for c in wanted - set(self._pollers):
            self._pollers[c] = asyncio.create_task(self._poll(c), name=f"work-status-{c}")
        for c in set(self._pollers) - wanted:
            self._pollers.pop(c).cancel()

    async def _poll(self, cluster: str) -> None:
        """One cluster's polls: a poll period (or ten times the last poll's cost, if longer) after
        the last one; a failed poll is logged and counted (``work-status-poll``)."""
        cost = 0.0

        async def poll() -> None:
            nonlocal cost
            started = time.monotonic()
            try:
                await self.poll_once(cluster)
            finally:
                cost = time.monotonic() - started

        async def wait() -> None:
            await asyncio.sleep(max(self.settings.statusPollSeconds, cost * 10))

        await Periodic("work-status-poll", poll, None, wait=wait).run()

    async def poll_once(self, cluster: str) -> None:
        tracked: dict[str, tuple[Ref, WorkRecord]] = {}  # binding → (main object, Work)
        for key in self.fleet.works_by_cluster.get(cluster, set()):
            work = self.fleet.work(key)
            ref = main_ref(work, self.fleet.informers.interpreter) if work is not None else None
            if work is None or ref is None or work.deleting:
                continue
            tracked[work.binding] = (ref, work)
        kinds = sorted({(r.api_version, r.kind) for r, _ in tracked.values()})
        agreed = self._agreed.setdefault(cluster, {})
        for gone in agreed.keys() - tracked.keys():
            del agreed[gone]
        client = self.fleet.clients.cached(cluster)
        if not kinds or client is None or client.state.condition == "NotReady":
            return
        found: dict[str, Obj] = {}  # binding → the member's copy
        # by what it is, not by the binding annotation: a Service a MultiClusterService delivers may
        # also follow a workload there, and the last apply's binding is the one the annotation names
        by_ref = {ref: b for b, (ref, _) in tracked.items()}
        for api_version, kind in kinds:
            started = self.clock()
            try:
                items = await client.list_objects(api_version, kind, label_selector=MANAGED_SELECTOR)
            except (MemberUnavailable, MemberError):
                return
            for it in items:
                if (b := by_ref.get(Ref.of(it))) is not None:
                    found[b] = it
            await self._missing(cluster, kind, tracked, found, started)
        reader = self._usage.setdefault(cluster, UsageReader(self.settings.usagePollSeconds))
        usage = await reader.read(client, [it for it in found.values() if it.get("kind") in WORKLOAD_KINDS],
                                  self.clock())
        for b, it in found.items():
            self.fleet.owned.setdefault(cluster, set()).add(Ref.of(it))
            work, meta = tracked[b][1], it.get("metadata") or {}
            doc = usage.get(key_of(it))
            versions = (str(work.revision), str(meta.get("resourceVersion")))
            if doc is None and agreed.get(b) == versions and meta.get("resourceVersion"):
                continue
            if not await self._record(work, it, doc):
                agreed[b] = versions

    async def _missing(self, cluster: str, kind: str, tracked: dict[str, tuple[Ref, WorkRecord]],
                       found: dict[str, Obj], started: float) -> None:
        """Works of ``kind`` applied before the listing started whose object the member no longer holds."""
        for b, (ref, work) in tracked.items():
            if ref.kind != kind or b in found:
                continue
            st = work.status
            applied_at = parse_rfc3339(st.get("appliedTime"))
            if st.get("applied") and applied_at is not None and applied_at < started:
                log.info("%s: %s is missing in the member; applying it again", cluster, ref)
                self.fleet.owned.get(cluster, set()).discard(ref)
                await self._write(work, {**st, "applied": False, "observedHash": ""})

    async def _record(self, work: WorkRecord, obj: Obj, usage: Obj | None = None) -> bool:
        """Write ``obj``'s status (and usage) on ``work`` if it differs from what the Work says; True if written."""
        st = dict(work.status)
        how = self.fleet.informers.interpreter.of(str(obj.get("apiVersion")), str(obj.get("kind")))
        fresh = manifest_status(obj, rfc3339(self.clock()), usage, how).model_dump(exclude_none=True)
        old = [m for m in st.get("manifests") or [] if isinstance(m, dict)]
        same = [m for m in old if (m.get("kind"), m.get("namespace") or "", m.get("name")) ==
                (fresh["kind"], fresh.get("namespace") or "", fresh["name"])]
        if same and {k: v for k, v in same[0].items() if k != "observedTime"} == \
                {k: v for k, v in fresh.items() if k != "observedTime"}:
            return False
        st["manifests"] = [m for m in old if m not in same] + [fresh]
        await self._write(work, st)
        return True

    async def _write(self, work: WorkRecord, status: Obj) -> None:
        await self.fleet.write_work_status(work, status)
