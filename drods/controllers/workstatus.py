"""The work-status controller (Karmada's): what push-mode members hold, recorded on their Works.

It lists each member's DRO-DS-managed workloads of the kinds its Works carry, and writes the main
manifest's status onto the Work when it changed — the same ``status.manifests`` a pull-mode agent
reports. A copy deleted behind DRO-DS's back (applied before the listing started, missing from it),
or whose spec was changed there (its generation rose past the one applied: `changed_in_member`),
marks its Work not applied, so the execution controller applies it again.

Between lists it follows each of those kinds through a watch (Karmada's member informers): a change
of a copy's status, or its deletion, is recorded when it happens, and what the watch brought is kept
(`_Listed`: the copy's status as a Work carries it, not the copy). While every kind of a member is
followed, the member is not listed again: every ``statusResyncSeconds`` the copies the watches keep are
checked against their Works (an informer's resync replays its cache; it does not list), and a watch
that fails is listed again by its reflector. While a kind is not followed (its watch failed, or the
member serves no watch) the member is listed every ``statusPollSeconds``, less often when its listing
is slow: never more than ~10 % of the time listing. Listing every followed member at each resync cost
the fleet and the control plane ~2,000 copies a second each at 30,000 Works over 100 members, however
little changed.

Every ``usagePollSeconds`` it also reads the workloads' use (`drods.members.workload_usage`: one pods
and one PodMetrics list per namespace; the pods from the member's followed pods once the health
controller follows them, `drods.members.pod_cache`) and writes it on the manifest status as ``usage``.
No watch brings it, so a member holding workloads is polled at least that often, followed or not.
"""

from __future__ import annotations

import asyncio
import contextlib
import enum
import logging
import random
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from drods.controllers.execution import manifest_status
from drods.controllers.fleet import MemberFleet
from drods.controllers.manifests import WORKLOAD_KINDS
from drods.controllers.settings import MemberSettings
from drods.controllers.work_record import WorkRecord
from drods.machinery.fence import LeadershipLost
from drods.machinery.periodic import Periodic
from drods.machinery.tasks import raise_ended, stop_tasks
from drods.members.client import COPY_WATCHES, MemberClient, MemberError, MemberUnavailable, history_gone
from drods.members.reflector import KindCalls, Reflector, without_managed_fields
from drods.members.workload_usage import UsageReader, key_of
from drods.model import jsondoc
from drods.model.annotations import MANAGED_SELECTOR
from drods.model.interpreter import Interpreter
from drods.model.packing import Packer
from drods.model.timefmt import parse_rfc3339, rfc3339
from drods.model.work import ManifestStatus, Ref

log = logging.getLogger(__name__)
Obj = dict[str, Any]
WATCH_SECONDS = 60.0  # how long a member holds one watch request open before it is made again
STALE_RETRY_SECONDS = 0.1
STALE_RETRIES = 50  # ~5 s of a Work view that has not caught up
Kind = tuple[str, str]  # (apiVersion, kind)


class Recorded(enum.Enum):
    """What recording a member copy's status on its Work did."""

    UNCHANGED = "unchanged"  # the Work already said it
    WRITTEN = "written"
    STALE = "stale"  # the Work changed since it was cached: nothing written


# what is kept of each member copy (`_Listed`): 30,000 copies repeat a few kinds' status shapes
SEEN_BYTES = Packer()


@dataclass(frozen=True, slots=True)
class _Listed:
    """What is kept of a member copy — by a poll while it writes the Works' statuses, by a watch while
    it follows the copy's kind: its status as a Work carries it, read when seen and kept encoded and
    packed (0.7 KB encoded where the model took 2.2), and for a workload the pod selector its usage is
    measured by. The copy itself (~10 KB decoded) is let go at once: every member's listing held through
    its writes was the largest passing part of the control plane's memory in a cold start."""

    ref: Ref
    resource_version: str
    packed_seen: bytes  # the `ManifestStatus` as a Work carries it, without usage, encoded and packed
    selector: Obj | None  # a workload kind's ``spec.selector``; None for the other kinds
    epoch: int  # the interpreter's epoch it was read in: a customization changed since, it is read again

    @classmethod
    def of(cls, obj: Obj, ref: Ref, seen: ManifestStatus, epoch: int) -> _Listed:
        meta = obj.get("metadata") or {}
        selector = (obj.get("spec") or {}).get("selector") if ref.kind in WORKLOAD_KINDS else None
        return cls(ref, str(meta.get("resourceVersion") or ""),
                   SEEN_BYTES.pack(jsondoc.dumps(seen.model_dump(exclude_none=True))),
                   selector if isinstance(selector, dict) else {} if ref.kind in WORKLOAD_KINDS else None, epoch)

    @property
    def workload(self) -> Obj | None:
        """A workload's kind, name, namespace and pod selector (`drods.members.workload_usage`)."""
        if self.selector is None:
            return None
        return {"kind": self.ref.kind, "metadata": {"name": self.ref.name, "namespace": self.ref.namespace},
                "spec": {"selector": self.selector}}

    def seen(self, usage: Obj | None) -> Obj:
        """The manifest status a Work carries for the copy, with ``usage`` when it was read."""
        out: Obj = jsondoc.loads(SEEN_BYTES.unpack(self.packed_seen))
        if usage is not None:
            out["usage"] = usage
        return out


def _main_row(status: Obj) -> Obj:
    """The main object's row of a Work's ``status.manifests`` (the last one), {} when there is none."""
    rows = status.get("manifests") or []
    return rows[-1] if rows and isinstance(rows[-1], dict) else {}


def recorded_hash(status: Obj) -> str | None:
    """The manifest hash of the main object as its last apply recorded it on the Work."""
    return _main_row(status).get("manifestHash") or None


def overwritten(work: WorkRecord, status: Obj, seen: Obj) -> bool:
    """The member's copy carries another manifest than the one applied for this Work, which says it
    holds its current spec: someone wrote over it — a deposed leader whose apply was already on its
    way, or a hand — and it is to be applied again, not recorded as it is."""
    recorded, held = recorded_hash(status), seen.get("manifestHash")
    return work.holds_current and bool(recorded) and bool(held) and held != recorded


def changed_in_member(work: WorkRecord, status: Obj, seen: Obj) -> tuple[int, int] | None:
    """The member's copy still carries the manifest last applied for this Work, but its spec changed
    since (its generation rose: ``kubectl scale`` or ``set image`` in the member, another controller
    there): (the generation applied, the member's now), to be applied again as Karmada's work-status
    controller puts a changed copy back. Status changes leave the generation alone; an apply of our
    own that moved it is recorded before its copy's events are looked at (`apply_records`)."""
    last = _main_row(status)
    applied, now = last.get("generation"), seen.get("generation")
    same = (last.get("kind"), last.get("namespace") or "", last.get("name")) == \
        (seen.get("kind"), seen.get("namespace") or "", seen.get("name"))
    if not (work.holds_current and same and isinstance(applied, int) and isinstance(now, int) and now > applied):
        return None
    recorded = last.get("manifestHash")
    return (applied, now) if recorded and seen.get("manifestHash") == recorded else None


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


def _version_of(obj: Obj) -> tuple[Ref, str]:
    """What is kept of a dependent's copy (in the member client's thread): what it is (the strings that
    every copy of a kind repeats shared), its resourceVersion."""
    ref = Ref.of(obj)
    return (Ref(sys.intern(ref.api_version), sys.intern(ref.kind), sys.intern(ref.namespace), ref.name),
            str((obj.get("metadata") or {}).get("resourceVersion") or ""))


class WorkStatusController:
    def __init__(self, fleet: MemberFleet, settings: MemberSettings, *,
                 clock: Callable[[], float] = time.time) -> None:
        self.fleet = fleet
        self.settings = settings
        self.clock = clock
        self._pollers: dict[str, asyncio.Task[None]] = {}
        self._started_for = -1  # the fleet's membership the pollers were last started for
        # per cluster: binding → (the Work's and the member object's resourceVersions, the usage reading
        # and the interpreter's epoch) last found in agreement: unchanged, nothing to compare next poll
        self._agreed: dict[str, dict[str, tuple[str, str, str, str]]] = {}
        self._usage: dict[str, UsageReader] = {}  # per cluster: its workloads' last usage reading
        # per cluster: the watch following each (apiVersion, kind) its Works carry
        self._watches: dict[str, dict[Kind, asyncio.Task[None]]] = {}
        self._following: dict[str, set[Kind]] = {}  # per cluster: the kinds whose watch is up
        # per cluster, per followed kind: its copies as the watch last brought them
        self._copies: dict[str, dict[Kind, dict[Ref, _Listed]]] = {}
        self._phased: set[str] = set()  # clusters polled at their own point of the period
        # per cluster: the watch following each kind of the Works' dependents (`copy_versions`)
        self._dependent_watches: dict[str, dict[Kind, asyncio.Task[None]]] = {}

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
        if self._started_for == self.fleet.membership:
            return
        self._started_for = self.fleet.membership
        wanted = {c for c, keys in self.fleet.works_by_cluster.items()
                  if keys and self.fleet.cluster(c) is not None and not self.fleet.pull(c)}
        for c in wanted - set(self._pollers):
            self._pollers[c] = asyncio.create_task(self._poll(c), name=f"work-status-{c}")
        for c in set(self._pollers) - wanted:
            self._pollers.pop(c).cancel()

    async def _poll(self, cluster: str) -> None:
        """One cluster's lists, and the watches between them: a list a poll period (or a resync
        period while every kind is followed; ten times the last list's cost, if longer) after the
        last one; a failed list is logged and counted (``work-status-poll``)."""
        cost = 0.0
        events: asyncio.Queue[tuple[str, _Listed]] = asyncio.Queue()
        consumer = asyncio.create_task(self._consume(cluster, events), name=f"work-status-events-{cluster}")

        async def poll() -> None:
            nonlocal cost
            raise_ended([consumer])
            started = time.monotonic()
            try:
                kinds = await self.poll_once(cluster)
            finally:
                cost = time.monotonic() - started
            self._follow(cluster, kinds, events)
            self._follow_dependents(cluster, kinds, gone)
            await self._missing_dependents(cluster)
            await self._missing_unfollowed(cluster)

        async def wait() -> None:
            """The period, and meanwhile a dependent's copy deleted in the member brought back at once
            (after the poll period: a burst goes together, and a deleting Work's record arrives)."""
            deadline = time.monotonic() + self.wait_seconds(cluster, cost)
            while (left := deadline - time.monotonic()) > 0:
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(gone.wait(), left)
                if gone.is_set():
                    gone.clear()
                    await asyncio.sleep(self.settings.statusPollSeconds)
                    await self._missing_dependents(cluster)

        gone = asyncio.Event()  # the dependents' watch saw a copy deleted

        try:
            # the first list at once: the watches start from it
            await Periodic("work-status-poll", poll, None, wait=wait, first_at_start=True).run()
        finally:
            await stop_tasks([consumer, *self._watches.pop(cluster, {}).values(),
                              *self._dependent_watches.pop(cluster, {}).values()])
            self.fleet.copy_versions.unsynced(cluster)
            self._following.pop(cluster, None)
            self._copies.pop(cluster, None)
            self._phased.discard(cluster)

    def wait_seconds(self, cluster: str, cost: float) -> float:
        """Seconds to the cluster's next poll: its list period, at least ten times the last list's
        cost. The first wait once every kind is followed is a point of the period of the cluster's own:
        a fleet joined together would otherwise be listed (and its usage read and written on every
        Work) all at once every period, stalling the control plane for a second or two each time."""
        period = self.list_period(cluster)
        if cluster not in self._phased and self._all_followed(cluster):
            self._phased.add(cluster)
            period = random.uniform(0.0, period)
        return max(period, cost * 10)

    def _all_followed(self, cluster: str) -> bool:
        followed = self._watches.get(cluster, {}).keys()
        return bool(followed) and self._following.get(cluster, set()) >= followed

    def list_period(self, cluster: str) -> float:
        """Seconds to the cluster's next poll: ``statusPollSeconds`` while a kind its Works carry is not
        followed (the poll lists it); ``statusResyncSeconds`` while a watch follows every kind (the poll
        checks the copies it keeps), and no longer than ``usagePollSeconds`` when one of them is a
        workload kind — the poll reads the usage, which no watch brings."""
        if not self._all_followed(cluster):
            return self.settings.statusPollSeconds
        if any(kind in WORKLOAD_KINDS for _, kind in self._watches[cluster]):
            return min(self.settings.statusResyncSeconds, self.settings.usagePollSeconds)
        return self.settings.statusResyncSeconds

    def _follow(self, cluster: str, kinds: list[Kind], events: asyncio.Queue[tuple[str, _Listed]]) -> None:
        """A watch for each kind the cluster's Works carry now; none for the others."""
        watches = self._watches.setdefault(cluster, {})
        for gone in set(watches) - set(kinds):
            watches.pop(gone).cancel()
            self._following.get(cluster, set()).discard(gone)
            self._copies.get(cluster, {}).pop(gone, None)
        for kind in kinds:
            if kind not in watches or watches[kind].done():
                watches[kind] = asyncio.create_task(self._watch(cluster, kind, events),
                                                    name=f"work-status-watch-{cluster}-{kind[1]}")

    async def _watch(self, cluster: str, kind: Kind, events: asyncio.Queue[tuple[str, _Listed]]) -> None:
        """List (for where to start) and watch one kind of the cluster's managed objects, keeping
        what was seen of each; its events go to ``events`` in order. Listed again when the member no
        longer has the history (410); after any other failure, tried again a poll period later (the
        lists go on meanwhile)."""
        following = self._following.setdefault(cluster, set())
        copies: dict[Ref, _Listed] = {}

        def listed(objs: list[Obj]) -> None:
            copies.clear()
            for obj in objs:  # what changed between the poll's list and this one
                it = self.seen_copy(obj)
                copies[it.ref] = it
                events.put_nowait(("MODIFIED", it))
            self._copies.setdefault(cluster, {})[kind] = copies
            following.add(kind)

        def changed(event: str, obj: Obj) -> None:
            it = self.seen_copy(obj)
            if event == "DELETED":
                copies.pop(it.ref, None)
            elif event in ("ADDED", "MODIFIED"):
                copies[it.ref] = it
            events.put_nowait((event, it))

        # the member client's threads only trim a copy; what is kept of it is read on the event loop, as
        # before copies were kept (read in those threads, a cold start of 30,000 Works lost every lease
        # once: a hundred members' threads then compete with the loop for the GIL)
        calls = KindCalls(self._client_of(cluster), kind, MANAGED_SELECTOR)
        await Reflector[Obj](
            name=f"{cluster} {kind[1]}", list_call=calls.list, watch_call=calls.watch, replace=listed,
            transform=without_managed_fields, apply=changed, unsynced=lambda: following.discard(kind),
            expired=history_gone, expired_unsynced=True,
            watch_seconds=WATCH_SECONDS, retry_seconds=self.settings.statusPollSeconds).run()

    def _client_of(self, cluster: str) -> Callable[[], MemberClient]:
        def client() -> MemberClient:
            if (c := self.fleet.clients.cached(cluster)) is None:
                raise MemberUnavailable(cluster, "no client")
            return c
        return client

    def _follow_dependents(self, cluster: str, main_kinds: list[Kind], gone: asyncio.Event) -> None:
        """A watch for the kinds of the cluster's Works' dependents (their resourceVersions only:
        `copy_versions`), the commonest first, in the member client's watch threads the main kinds
        leave (none while the member could not be listed)."""
        watches = self._dependent_watches.setdefault(cluster, {})
        room = COPY_WATCHES - len(main_kinds) if main_kinds else 0
        counts = self.fleet.dependent_kinds(cluster)
        kinds = sorted(set(counts) - set(main_kinds), key=lambda k: (-counts[k], k))[:max(room, 0)]
        for stale in set(watches) - set(kinds):
            watches.pop(stale).cancel()
            self.fleet.copy_versions.unsynced(cluster, stale)
        for kind in kinds:
            if kind not in watches or watches[kind].done():
                watches[kind] = asyncio.create_task(self._watch_dependents(cluster, kind, gone),
                                                    name=f"work-status-dependents-{cluster}-{kind[1]}")

    async def _watch_dependents(self, cluster: str, kind: Kind, gone: asyncio.Event) -> None:
        """List and watch one kind of the cluster's managed objects for their resourceVersions; a
        deletion sets ``gone``."""
        versions = self.fleet.copy_versions

        def changed(event: str, copy: tuple[Ref, str]) -> None:
            if event in ("ADDED", "MODIFIED"):
                versions.changed(cluster, kind, copy[0], copy[1])
            elif event == "DELETED":
                versions.changed(cluster, kind, copy[0], None)
                gone.set()

        calls = KindCalls(self._client_of(cluster), kind, MANAGED_SELECTOR)
        await Reflector[tuple[Ref, str]](
            name=f"{cluster} {kind[1]} (dependents)", list_call=calls.list, watch_call=calls.watch,
            replace=lambda copies: versions.listed(cluster, kind, copies), transform=_version_of,
            apply=changed, unsynced=lambda: versions.unsynced(cluster, kind), expired=history_gone,
            expired_unsynced=True, watch_seconds=WATCH_SECONDS, retry_seconds=self.settings.statusPollSeconds).run()

    async def _missing_unfollowed(self, cluster: str) -> None:
        """The dependents' kinds no watch follows (the main kinds took the member client's watch
        threads) listed at each poll, so that one deleted in the member comes back within a poll period
        too: with Deployments and Services as main kinds none was followed, and a deleted ConfigMap
        stayed gone. A listing is true only at its moment: the kinds are unknown again right after."""
        watched = self._dependent_watches.get(cluster, {})
        kinds = [k for k in self.fleet.dependent_kinds(cluster) if k not in watched]  # a main kind's too
        if not kinds:
            return
        versions = self.fleet.copy_versions
        try:
            for kind in kinds:
                try:
                    objs, _ = await KindCalls(self._client_of(cluster), kind, MANAGED_SELECTOR).list()
                except Exception as e:  # noqa: BLE001 - a kind the member can't list now is looked at next poll
                    log.debug("%s: listing %s for missing dependents failed: %s", cluster, kind[1], e)
                    continue
                versions.listed(cluster, kind, [_version_of(o) for o in objs])
            await self._missing_dependents(cluster, listed=True)
        finally:
            for kind in kinds:
                versions.unsynced(cluster, kind)

    async def _missing_dependents(self, cluster: str, *, listed: bool = False) -> None:
        """Works applied a while ago (longer than a watch event may trail the apply) whose dependent, of a
        kind followed by watch (or just ``listed``), the member no longer holds: marked not applied, so the execution
        controller applies them again (Karmada re-creates a deleted dependent the same way)."""
        if not self._dependent_watches.get(cluster) and not listed:
            return
        versions = self.fleet.copy_versions
        owned = self.fleet.owned.get(cluster, set())
        # only what DRO-DS applied there: a member's own object (a CRD its operator installed, left as
        # it is) carries no DRO-DS label, and no watch of DRO-DS's copies will ever show it. Looked up
        # from the copies first: nearly always none is missing, and then no Work is walked.
        missing = {r for r in owned if versions.holds(cluster, r) is False}
        if not missing:
            return
        now = self.clock()
        for work, dependents in self.fleet.live_dependents(cluster):
            gone = [r for r in dependents if r in missing]
            if not gone or not work.holds_current or self.fleet.applies.pending(work):
                continue
            st = work.status
            applied_at = parse_rfc3339(st.get("appliedTime"))
            if applied_at is None or applied_at >= now - self.settings.statusPollSeconds:
                continue  # the watch event of a copy applied a moment ago may still be on its way
            log.info("%s: %s is missing in the member; applying %s again", cluster, gone[0], work.name)
            owned.difference_update(gone)  # its next apply makes first contact again
            try:
                await self._write(work, {**st, "applied": False, "observedHash": ""})
            except LeadershipLost:
                raise
            except Exception:  # noqa: BLE001 - one Work's write failing must not stop the cluster's others
                log.exception("%s: marking %s not applied failed", cluster, work.name)

    def seen_copy(self, obj: Obj) -> _Listed:
        """What is kept of a member copy seen now."""
        ref = Ref.of(obj)
        return _Listed.of(obj, ref, self._seen(obj, rfc3339(self.clock())), self._epoch)

    @property
    def _epoch(self) -> int:
        return self.fleet.informers.interpreter.epoch

    async def _consume(self, cluster: str, events: asyncio.Queue[tuple[str, _Listed]]) -> None:
        """Every event waiting at once, as one batch: the last of each object's (the others are
        history), matched to the Works through one index of them. An event whose write lost the
        compare-and-swap (the Work changed since it was cached: an apply just recorded) is tried
        again once the newer Work has had time to arrive, not left to the next list."""
        stale: dict[Ref, tuple[str, _Listed]] = {}  # by object: the event to write again
        tries = 0
        while True:
            latest, stale = stale, {}
            if latest:
                await asyncio.sleep(STALE_RETRY_SECONDS)
            else:
                event, it = await events.get()
                latest[it.ref] = (event, it)
            while not events.empty():  # newer than any stale one
                event, it = events.get_nowait()
                latest[it.ref] = (event, it)
            for ref, (event, it) in latest.items():
                for work in self._delivering(cluster, ref):
                    try:
                        if not await self._on_event(cluster, event, it, work, self.clock()):
                            stale[ref] = (event, it)
                    except (MemberUnavailable, MemberError):
                        pass
                    except LeadershipLost:
                        raise  # the term is over: `_poll` ends with it
                    except Exception:  # noqa: BLE001 - one write failing must not stop the cluster's events
                        log.exception("%s: recording the status of %s failed", cluster, ref)
            tries = tries + 1 if stale else 0
            if tries > STALE_RETRIES:  # the Work view does not catch up: the next list records them
                stale, tries = {}, 0

    async def _on_event(self, cluster: str, event: str, it: _Listed, work: WorkRecord, now: float) -> bool:
        """A member copy changed (its status recorded on its Work) or went away (applied before:
        its Work is marked not applied, so it is applied again). False when the write found the
        Work changed since it was cached, or the execution controller's record of an apply is still
        coming (`apply_records`): the event is looked at again with the newer Work."""
        ref = it.ref
        if event == "DELETED":
            st = work.status
            applied_at = parse_rfc3339(st.get("appliedTime"))
            if st.get("applied") and applied_at is not None and applied_at < now:
                log.info("%s: %s was deleted in the member; applying it again", cluster, ref)
                self.fleet.owned.get(cluster, set()).discard(ref)
                self._agreed.get(cluster, {}).pop(work.binding, None)
                return await self._write(work, {**st, "applied": False, "observedHash": ""})
            return True
        if event not in ("ADDED", "MODIFIED"):
            return True
        if self.fleet.applies.pending(work):
            return False  # the apply's own record is coming: look at the copy again once the view has it
        self.fleet.owned.setdefault(cluster, set()).add(ref)
        reader = self._usage.get(cluster)
        workload = it.workload
        usage = reader.docs.get(key_of(workload)) if reader is not None and workload is not None else None
        return await self._record(work, it.seen(usage)) is not Recorded.STALE

    def _delivering(self, cluster: str, ref: Ref) -> list[WorkRecord]:
        """The cluster's Works (not being deleted) whose status follows ``ref`` as their main object (two
        bindings may deliver the same object: a Service a MultiClusterService delivers may also follow a
        workload there)."""
        interpreter = self.fleet.informers.interpreter
        return [w for w in self.fleet.live_works_delivering(cluster, ref) if main_ref(w, interpreter) is not None]

    def _works_by_ref(self, cluster: str) -> dict[Ref, list[WorkRecord]]:
        """The cluster's Works (not being deleted) by their main object, where its status is followed."""
        interpreter = self.fleet.informers.interpreter
        return {ref: works for ref, works in self.fleet.live_works_by_main(cluster).items()
                if main_ref(works[0], interpreter) is not None}

    async def poll_once(self, cluster: str) -> list[Kind]:
        """The cluster's managed objects of each kind its Works carry — as its watch keeps them when the
        kind is followed, else listed (and listed once more when what the watch keeps was read before an
        interpreter customization changed) — recorded on their Works; returns those kinds (none when the
        member could not be listed: no watch is kept on a member that does not answer)."""
        by_ref = self._works_by_ref(cluster)
        tracked = {w.binding: (ref, w) for ref, works in by_ref.items() for w in works}  # binding → (object, Work)
        kinds = sorted({(r.api_version, r.kind) for r, _ in tracked.values()})
        agreed = self._agreed.setdefault(cluster, {})
        for gone in agreed.keys() - tracked.keys():
            del agreed[gone]
        client = self.fleet.clients.cached(cluster)
        if not kinds or client is None or client.state.condition == "NotReady":
            return []
        found: dict[str, _Listed] = {}  # binding → what was listed of the member's copy
        # by what it is, not by the binding annotation: the last apply's binding is the one the
        # annotation names, and every binding delivering the object finds it
        followed = self._following.get(cluster, set())
        for api_version, kind in kinds:
            started = self.clock()
            kept = self._copies.get(cluster, {}).get((api_version, kind))
            if (api_version, kind) in followed and kept is not None and \
                    all(it.epoch == self._epoch for it in kept.values()):
                # an event may trail the apply it reports by a moment: only an older apply is missing
                started -= self.settings.statusPollSeconds
                for it in kept.values():
                    for w in by_ref.get(it.ref, ()):
                        found[w.binding] = it
            else:
                try:
                    items = await client.list_objects(api_version, kind, label_selector=MANAGED_SELECTOR)
                except (MemberUnavailable, MemberError):
                    return []
                observed, epoch = rfc3339(self.clock()), self._epoch
                for obj in items:
                    ref = Ref.of(obj)
                    ref_works = by_ref.get(ref)
                    old = kept.get(ref) if kept is not None else None
                    if not ref_works and old is None:
                        continue
                    listed = _Listed.of(obj, ref, self._seen(obj, observed), epoch)
                    for w in ref_works or ():
                        found[w.binding] = listed
                    if kept is not None and old is not None and old.resource_version == listed.resource_version:
                        # read again under a changed customization; a newer version is the watch's
                        kept[ref] = listed
                del items
            await self._missing(cluster, kind, tracked, found, started)
        reader = self._usage.setdefault(cluster, UsageReader(self.settings.usagePollSeconds))
        usage = await reader.read(client, [c.workload for c in found.values() if c.workload is not None],
                                  self.clock())
        for b, c in found.items():
            self.fleet.owned.setdefault(cluster, set()).add(c.ref)
            work = tracked[b][1]
            workload = c.workload
            doc = usage.get(key_of(workload)) if workload is not None else None
            # the Work, the copy and the usage reading found in agreement last time: nothing to compare
            versions = (str(work.revision), c.resource_version, "" if doc is None else str(reader.read_at),
                        str(c.epoch))
            if agreed.get(b) == versions and c.resource_version:
                continue
            if await self._record(work, c.seen(doc)) is Recorded.UNCHANGED:
                agreed[b] = versions
        return kinds

    async def _missing(self, cluster: str, kind: str, tracked: dict[str, tuple[Ref, WorkRecord]],
                       found: dict[str, _Listed], started: float) -> None:
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

    def _seen(self, obj: Obj, observed: str) -> ManifestStatus:
        """``obj``'s status as its Work carries it (the kind's interpretation applied), without usage."""
        how = self.fleet.informers.interpreter.of(str(obj.get("apiVersion")), str(obj.get("kind")))
        return manifest_status(obj, observed, None, how)

    async def _record(self, work: WorkRecord, fresh: Obj) -> Recorded:
        """Write a member copy's status (and usage), as a Work carries it, on ``work`` if it differs
        from what the Work says — or, when the copy carries another manifest than the Work's last
        apply (`overwritten`), mark the Work not applied, so it is applied again."""
        st = dict(work.status)
        if overwritten(work, st, fresh):  # ``st``: the Work's status, decoded once for both
            log.warning("%s: %s holds manifest %s, not the %s applied for its Work (written over since): "
                        "applying it again", work.cluster, work.main, fresh.get("manifestHash"), recorded_hash(st))
            self._agreed.get(work.cluster, {}).pop(work.binding, None)
            return Recorded.WRITTEN if await self._write(work, {**st, "applied": False, "observedHash": ""}) \
                else Recorded.STALE
        if (moved := changed_in_member(work, st, fresh)) is not None:
            log.warning("%s: %s was changed in the member (generation %d, applied at %d): applying it again",
                        work.cluster, work.main, moved[1], moved[0])
            self._agreed.get(work.cluster, {}).pop(work.binding, None)
            message = f"{work.main} was changed in the member (generation {moved[0]} → {moved[1]}): applied again"
            return Recorded.WRITTEN if await self._write(
                work, {**st, "applied": False, "observedHash": "", "message": message}) else Recorded.STALE
        old = [m for m in st.get("manifests") or [] if isinstance(m, dict)]
        same = [m for m in old if (m.get("kind"), m.get("namespace") or "", m.get("name")) ==
                (fresh["kind"], fresh.get("namespace") or "", fresh["name"])]
        if same and {k: v for k, v in same[0].items() if k != "observedTime"} == \
                {k: v for k, v in fresh.items() if k != "observedTime"}:
            return Recorded.UNCHANGED
        st["manifests"] = [m for m in old if m not in same] + [fresh]
        return Recorded.WRITTEN if await self._write(work, st) else Recorded.STALE

    async def _write(self, work: WorkRecord, status: Obj) -> bool:
        return bool(await self.fleet.write_work_status(work, status))
