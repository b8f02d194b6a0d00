"""The workload side of a pull-mode member's agent (M2, Karmada's karmada-agent).

The control plane cannot reach a pull-mode member, so propagation writes one ``Work`` per
(binding, cluster) with the exact manifests push mode would apply; the agent, next to the member:

* **follows** its cluster's Works: list, then watch (``/api/v1/agent/works``), relist after any
  break — with a jittered exponential backoff while the control plane cannot be reached, cut short
  as soon as it answers again: meanwhile the agent asks its ``/readyz`` (one small request, about every
  ``probe_every`` seconds, jittered so agents cut off together do not come back together), so an
  outage longer than the backoff's cap does not leave the Works unfollowed for up to that cap after
  it. The set of Works is cached in ``STATE_DIR/works.json`` (mode 0600: manifests may hold
  Secrets) on every change, written behind the event loop and before the change is applied;
* **applies** each Work whose hash the member does not hold yet, by server-side apply with the
  ownership metadata the manifests carry; an object that exists and is not DRO-DS's is refused,
  as in push mode (adopted when its manifest says ``overwrite``); a copy deleted behind its back is
  applied again; a Work marked ``suspendDispatching`` waits;
* **prunes** objects labelled ``multicluster.io/managed-by=drods`` for this cluster that no Work
  wants any more, and only right after a successful list or watch event — never while the control
  plane is unreachable (the set it holds may be out of date);
* **reports** each Work's status (``observedHash``, ``applied``, per-manifest status read back
  from the member, and the workloads' measured use, `drods.members.workload_usage`) whenever it
  differs from the status the control plane holds: on each pass, and ``STATUS_COALESCE_SECONDS``
  after a copy changes in the member (its kinds followed by watches, `drods.members.copy_watch`).

**Local autonomy.** When the control plane is unreachable the member keeps its last desired
state: the agent keeps applying the cached Works (also after its own restart, from the state
file), deletes nothing, and reconciles — relist, apply the differences, prune — when it returns.
Cut off, it also scales its share of autoscaled workloads (`drods.members.autonomy`), through
``replicas_for``: a local count that replaces a manifest's ``spec.replicas`` when it is applied.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import random
import time
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

from drods.members.agent import AgentRefused
from drods.members.client import PERMANENT_STATUS, MemberClient, MemberError, MemberUnavailable
from drods.members.copy_watch import FollowedCopies
from drods.members.state_file import StateFile, StateSaver
from drods.members.workload_usage import USAGE_KINDS, UsageReader
from drods.model import jsondoc
from drods.model.annotations import (
    ANN_CLUSTER,
    ANN_HASH,
    MANAGED_BY,
    MANAGED_SELECTOR,
    MANAGER,
    is_managed,
    run_report,
)
from drods.model.dispatch import may_adopt, preserved
from drods.model.kinds import WORKLOAD_KINDS
from drods.model.work import ManifestStatus, Ref, WorkStatus

log = logging.getLogger(__name__)
Obj = dict[str, Any]
WORKS = "/api/v1/agent/works"
READYZ = "/readyz"
UNREACHABLE = frozenset({502, 503, 504})  # a proxy's word for a control plane that is not there (or not ready)
STATUS_COALESCE_SECONDS = 0.5  # a followed copy's changes within this long are reported together
# What propagation sends, workloads before their dependents (so a pod never loses its ConfigMap first).
PRUNE_KINDS = tuple((k.api_version, k.kind) for k in WORKLOAD_KINDS if k.kind != "Namespace")


# per (apiVersion, kind): the member's DRO-DS copies by (namespace, name), None when not listed
Copies = dict[tuple[str, str], dict[tuple[str, str], Obj] | None]


def _refs(spec: Mapping[str, Any]) -> set[Ref]:
    return {Ref.of(m) for m in spec.get("manifests") or [] if isinstance(m, dict)}


def _listed_copy(m: Mapping[str, Any], listed: Mapping[tuple[str, str], Obj]) -> Obj | None:
    """Manifest ``m``'s copy among a kind's copies by (namespace, name)."""
    meta = m.get("metadata") or {}
    ns, name = str(meta.get("namespace") or ""), str(meta.get("name"))
    return listed.get((ns, name)) or (listed.get(("default", name)) if not ns else None)


def _written(obj: Obj) -> str:
    """What changes when anyone writes an object's spec: its generation; the resourceVersion for a
    kind that has none (a ConfigMap)."""
    meta = obj.get("metadata") or {}
    return f"g{meta['generation']}" if meta.get("generation") else f"r{meta.get('resourceVersion')}"


@dataclass(frozen=True, slots=True)
class ApplyFailure:
    """Why a Work's apply failed here: ``permanent`` when the same apply meets it again (another's object
    of that name, a manifest the member refuses); ``times`` in a row for the Work's ``hash``."""

    message: str
    permanent: bool = False
    times: int = 1
    hash: str = ""


@dataclass(frozen=True, slots=True)
class _Sent:
    digest: str  # the manifest's ANN_HASH
    local: int | None  # the local replica count sent in its place (regional autonomy)
    written: str  # `_written` of what the apply returned


@dataclass(slots=True)
class _Work:
    spec: Obj
    status: Obj = field(default_factory=dict)  # as the control plane holds it


def _unreachable(e: Exception) -> bool:
    """Whether ``e`` says the control plane is not there (no connection, or a proxy's 502/503/504), rather
    than that it answered wrongly: only then is it worth asking when it is back."""
    if isinstance(e, httpx.HTTPStatusError):
        return e.response.status_code in UNREACHABLE
    return isinstance(e, httpx.TransportError)


class WorkAgent:
    def __init__(self, cluster: str, member: MemberClient, http: httpx.AsyncClient, state_dir: Path, *,
                 resync: float = 3.0, max_backoff: float = 30.0, watch_timeout: int = 240,
                 usage_interval: float = 15.0, clock: Callable[[], float] = time.time,
                 first_backoff: float = 1.0, probe_every: float = 2.0) -> None:
        """``first_backoff`` … ``max_backoff``: the waits between relists while they fail; ``probe_every``:
        about how often the control plane is asked whether it is back meanwhile."""
        self.cluster = cluster
        self.member = member
        self.http = http
        self.state_file = StateFile(Path(state_dir) / "works.json", cluster)
        self.saver = StateSaver(self.state_file, self._state)
        self.resync = resync
        self.max_backoff = max_backoff
        self.first_backoff = first_backoff
        self.probe_every = probe_every
        self.watch_timeout = watch_timeout
        self.works: dict[str, _Work] = {}
        self.applied: dict[str, str] = {}  # work → hash the member holds
        self.errors: dict[str, ApplyFailure] = {}  # work → why its last apply failed, how often in a row
        self.authoritative = False  # works mirror the control plane right now: pruning is safe
        self.prune_due = False
        self.ns_ok: set[str] = set()
        self.owned: set[Ref] = set()  # objects this agent applied and has not seen gone since
        self.sent: dict[Ref, _Sent] = {}  # each object's last apply by this agent
        self._held_kinds: set[tuple[str, str]] = set()  # (apiVersion, kind) some Work has held
        self._prune_failing = False  # said once while the member stays away, not at every retry
        self.wake = asyncio.Event()
        # the control plane answers again (local autonomy's calls, or this agent's probe): relist now
        self.reachable = asyncio.Event()
        # A local replica count for a manifest (regional autonomy), None to apply it as sent.
        self.replicas_for: Callable[[Mapping[str, Any]], int | None] | None = None
        self.usage = UsageReader(usage_interval)
        self.clock = clock
        self.copies = FollowedCopies(member, self._copy_changed)
        self.status_coalesce = STATUS_COALESCE_SECONDS
        self._report_due: asyncio.TimerHandle | None = None
        self._reported_later: set[str] = set()  # Works the last pass left to the next one (just applied)

    # ------------------------------------------------------------------ the state file
    def load(self) -> None:
        """The last desired state, so a restart without the control plane still knows it."""
        doc = self.state_file.load()
        if doc is not None and isinstance(doc.get("works"), dict):
            self.works = {str(n): _Work(dict(s)) for n, s in doc["works"].items() if isinstance(s, dict)}
            for w in self.works.values():
                self._hold(w.spec)
            log.info("loaded %d cached Work(s) from %s", len(self.works), self.state_file.path)

    def _state(self) -> dict[str, Any]:
        return {"works": {n: w.spec for n, w in sorted(self.works.items())}}

    def save(self) -> None:
        """Soon, behind the loop (`StateSaver`); a pass waits for it before it applies."""
        self.saver.request()

    # ------------------------------------------------------------------ running
    async def run(self, stop: asyncio.Event) -> None:
        """Until ``stop``; raises `AgentRefused` when the token is refused."""
        self.load()
        tasks = [asyncio.create_task(self._follow(stop), name="works-follow"),
                 asyncio.create_task(self._reconcile_loop(stop), name="works-reconcile")]
        stopper = asyncio.create_task(stop.wait())
        try:
            done, _ = await asyncio.wait([*tasks, stopper], return_when=asyncio.FIRST_COMPLETED)
            for t in done:
                if t is not stopper:
                    t.result()  # a refused token ends the agent
        finally:
            for t in [*tasks, stopper]:
                t.cancel()
            await asyncio.gather(*tasks, stopper, return_exceptions=True)
            await self.saver.flush()
            if self._report_due is not None:
                self._report_due.cancel()
                self._report_due = None
            await self.copies.close()

    def _copy_changed(self) -> None:
        """A followed copy changed in the member: a pass reports it, ``status_coalesce`` later (a copy's
        status changes several times as it rolls out; one report carries them)."""
        if self._report_due is None:
            self._report_due = asyncio.get_running_loop().call_later(self.status_coalesce, self._report_now)

    def _report_now(self) -> None:
        self._report_due = None
        self.wake.set()

    async def _follow(self, stop: asyncio.Event) -> None:
        backoff = self.first_backoff
        while not stop.is_set():
            try:
                rv = await self._list()
                backoff = self.first_backoff
                await self._watch(rv)
            except (httpx.HTTPError, ValueError, KeyError, TypeError) as e:
                self.authoritative = False
                wait = random.uniform(backoff / 2, backoff)  # agents cut off together do not retry together
                log.warning("cannot follow the Works of %s: %s; retrying in %.1fs", self.cluster, e, wait)
                await self._wait_to_retry(stop, wait, probe=_unreachable(e))
                backoff = min(backoff * 2, self.max_backoff)

    async def _wait_to_retry(self, stop: asyncio.Event, seconds: float, *, probe: bool) -> None:
        """``seconds``, or less: until `reachable` is set — by local autonomy's calls when it runs, or,
        when the control plane could not be reached (``probe``), by `_probe` — so the agent follows its
        Works within about ``probe_every`` of the control plane's return, however long it was away. (The
        metrics heartbeat says nothing here: it runs on its own, with its own backoff up to 60 s.)"""
        self.reachable.clear()
        waits: list[asyncio.Future[Any]] = [asyncio.ensure_future(stop.wait()),
                                            asyncio.ensure_future(self.reachable.wait())]
        if probe and seconds > self.probe_every / 2:
            waits.append(asyncio.ensure_future(self._probe()))
        try:
            await asyncio.wait(waits, timeout=seconds, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for w in waits:
                w.cancel()
            await asyncio.gather(*waits, return_exceptions=True)

    async def _probe(self) -> None:
        """Ask the control plane whether it is ready, every ``probe_every`` seconds (jittered by half), until
        it is: one small request, cheaper than a relist of every Work, and refused at once (or by its
        proxy) while it is down. Sets `reachable` when it answers 200."""
        while True:
            await asyncio.sleep(self.probe_every * random.uniform(0.5, 1.5))
            try:
                r = await self.http.get(READYZ, timeout=max(1.0, self.probe_every))
            except httpx.HTTPError as e:
                log.debug("control plane of %s still away: %s", self.cluster, e)
                continue
            if r.status_code == 200:
                log.info("control plane of %s answers again: following its Works", self.cluster)
                self.reachable.set()
                return

    def _check(self, r: httpx.Response) -> None:
        if r.status_code in (401, 403):
            raise AgentRefused(f"the control plane refused the token for cluster {self.cluster}: "
                               f"HTTP {r.status_code} {r.text[:300]}")
        r.raise_for_status()

    async def _list(self) -> str:
        r = await self.http.get(WORKS)
        self._check(r)
        body = jsondoc.loads(r.content)
        fresh = {str(o["metadata"]["name"]): _Work(dict(o.get("spec") or {}), dict(o.get("status") or {}))
                 for o in body.get("items") or []}
        changed = {n: w.spec for n, w in fresh.items()} != {n: w.spec for n, w in self.works.items()}
        self.works = fresh
        for w in fresh.values():
            self._hold(w.spec)
        if changed:
            self.save()
        self.authoritative = True
        self.prune_due = True
        self.wake.set()
        return str(body["metadata"]["resourceVersion"])

    async def _watch(self, rv: str) -> None:
        params = {"watch": "true", "resourceVersion": rv, "timeoutSeconds": str(self.watch_timeout)}
        timeout = httpx.Timeout(10.0, read=self.watch_timeout + 30.0)
        async with self.http.stream("GET", WORKS, params=params, timeout=timeout) as r:
            if r.status_code != 200:
                await r.aread()
                self._check(r)
            async for line in r.aiter_lines():
                if not line.strip():
                    continue
                ev = jsondoc.loads(line)
                obj = ev.get("object") or {}
                if ev.get("type") == "ERROR":
                    log.info("watch ended: %s; relisting", obj.get("message"))
                    return
                name = str(obj["metadata"]["name"])
                if ev.get("type") == "DELETED":
                    if self.works.pop(name, None) is not None:
                        self.save()
                    self.prune_due = True
                    self.wake.set()
                    continue
                spec, cur = dict(obj.get("spec") or {}), self.works.get(name)
                self.works[name] = _Work(spec, dict(obj.get("status") or {}))
                if cur is not None and cur.spec == spec:
                    continue  # a status (this agent's own report coming back): nothing to apply
                self.save()
                self._hold(spec)
                if cur is not None and _refs(cur.spec) - _refs(spec):
                    self.prune_due = True  # an object left the Work: pruning has something to do
                self.wake.set()

    async def _reconcile_loop(self, stop: asyncio.Event) -> None:
        while not stop.is_set():
            self.wake.clear()
            try:
                await self.reconcile_once()
            except (AgentRefused, asyncio.CancelledError):
                raise
            except Exception:  # noqa: BLE001 - one bad pass must not end the agent
                log.exception("reconciling the Works of %s failed", self.cluster)
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self.wake.wait(), self.resync)

    # ------------------------------------------------------------------ one pass
    async def reconcile_once(self) -> None:
        await self.saver.flush()  # what is applied is on disk first: a restart cut off applies no older state
        works = dict(self.works)
        # taken with the Works it prunes against: a relist during this pass (an agent restarted over its
        # cached Works) asks the next pass, which holds what the relist found, to prune
        prune = self.authoritative and self.prune_due
        self.prune_due = self.prune_due and not prune
        just_applied: set[str] = set()
        self._put_back_changed(works)
        for name, w in sorted(works.items()):
            h = str(w.spec.get("hash") or "")
            if self.applied.get(name) != h and not w.spec.get("suspendDispatching"):
                err = await self.apply(w.spec)
                if err is None:
                    self.applied[name] = h
                    just_applied.add(name)
                    self.errors.pop(name, None)
                else:
                    self.applied.pop(name, None)
                    last = self.errors.get(name)
                    times = last.times + 1 if last is not None and last.hash == h else 1
                    self.errors[name] = ApplyFailure(err.message, err.permanent, times, h)
                    log.warning("applying Work %s failed (%d in a row): %s", name, times, err.message)
        for name in (self.applied.keys() | self.errors.keys()) - works.keys():
            self.applied.pop(name, None)
            self.errors.pop(name, None)
        if prune and not await self.prune(works):
            self.prune_due = True
        later = just_applied - self._reported_later  # a Work applied pass after pass is still reported
        self._reported_later = later
        await self._report_statuses(works, later=later)
        if later:
            self._copy_changed()

    async def _report_statuses(self, works: Mapping[str, _Work], later: Collection[str] = ()) -> None:
        """Each Work's status as the member shows it, with its workloads' usage (read every
        ``usage.interval``: one pods and one PodMetrics list per namespace), reported when changed.
        The member's copies are listed once per kind, not read one by one. A Work in ``later`` was
        just applied: its copies are changing (a new workload rolls out), so its report waits for the
        pass ``status_coalesce`` on, which carries "applied" and the first steps of the rollout in one."""
        try:
            copies = await self._copies(works)
        except MemberUnavailable as e:
            log.debug("reading the copies in %s failed: %s", self.cluster, e)
            return
        read: dict[str, Obj] = {}
        held: list[Obj] = []
        for name, w in sorted(works.items()):
            status = await self.status_of(name, w.spec, held, copies)
            if status is not None:
                read[name] = status
        usage = await self.usage.read(self.member, held, self.clock())
        for name, status in read.items():
            for m in status.get("manifests") or []:
                doc = usage.get((m.get("namespace") or "default", m.get("kind"), m.get("name")))
                if doc is not None and m.get("status") is not None:
                    m["usage"] = doc
            if self.authoritative and status != works[name].status and name not in later:
                await self.report(name, works[name], status)

    async def apply(self, spec: Mapping[str, Any]) -> ApplyFailure | None:
        """Apply a Work's manifests in order; None, or why it failed (and whether trying again can help)."""
        try:
            for m in spec.get("manifests") or []:
                meta = m.get("metadata") or {}
                ns = meta.get("namespace")
                if ns and ns not in self.ns_ok:
                    if await self.member.get("v1", "Namespace", ns) is None:
                        await self.member.apply({"apiVersion": "v1", "kind": "Namespace",
                                                 "metadata": {"name": ns, "labels": {MANAGED_BY: MANAGER}}})
                    self.ns_ok.add(ns)
                ref = Ref.of(m)
                if ref not in self.owned and not self.member.foreign_names().absent(
                        ref.api_version, ref.kind, ref.name, ns):  # first contact: did someone else create it?
                    cur = await self.member.get(ref.api_version, ref.kind, ref.name, ns)
                    if cur is not None and not is_managed(cur) and not may_adopt(m):
                        return ApplyFailure(f"{m.get('kind')} {ns or ''}/{meta.get('name')} already exists in "
                                            f"{self.cluster} and is not managed by DRO-DS", permanent=True)
                local = self.replicas_for(m) if self.replicas_for is not None else None
                digest = (meta.get("annotations") or {}).get(ANN_HASH)
                if digest and self._holds(ref, m, str(digest), local):
                    continue
                if local is not None:
                    m = {**m, "spec": {**(m.get("spec") or {}), "replicas": local}}
                out = await self.member.apply(m)
                self.copies.applied(out)
                self.owned.add(ref)
                if digest:
                    self.sent[ref] = _Sent(str(digest), local, _written(out))
        except MemberUnavailable as e:
            return ApplyFailure(f"unreachable: {e}")
        except MemberError as e:
            return ApplyFailure(str(e), permanent=e.status in PERMANENT_STATUS)
        except Exception as e:  # noqa: BLE001 - a bad manifest must not stop the others
            return ApplyFailure(f"{type(e).__name__}: {e}")
        return None

    def _put_back_changed(self, works: Mapping[str, _Work]) -> None:
        """A copy whose spec was changed in the member since this agent applied it (its generation rose
        past the one the apply left: ``kubectl scale`` or ``set image`` there) has its Work applied again
        in this pass, as Karmada's agent puts a changed copy back. Only the copies a watch brought as
        changed are looked at; a kind without a generation (a ConfigMap) is not."""
        for obj in self.copies.take_modified():
            ref = Ref.of(obj)
            sent = self.sent.get(ref)
            generation = (obj.get("metadata") or {}).get("generation")
            if sent is None or not sent.written.startswith("g") or not isinstance(generation, int) or \
                    generation <= int(sent.written[1:]):
                continue
            for name, w in works.items():
                if name in self.applied and ref in _refs(w.spec):
                    log.warning("%s was changed in the member (generation %d, applied at %s): applying Work %s "
                                "again", ref, generation, sent.written[1:], name)
                    self.applied.pop(name)

    def _holds(self, ref: Ref, m: Mapping[str, Any], digest: str, local: int | None) -> bool:
        """The member holds this manifest as this agent last applied it: the same manifest (its digest)
        and local count were sent, and the copy followed by watch was written by nobody since (its
        generation, or resourceVersion for a kind without one, as that apply left it). A Work whose
        workload changed then re-sends only the workload, not its unchanged dependents."""
        sent = self.sent.get(ref)
        if sent is None or (sent.digest, sent.local) != (digest, local):
            return False
        followed = self.copies.listed((ref.api_version, ref.kind))
        cur = None if followed is None else _listed_copy(m, followed)
        return cur is not None and _written(cur) == sent.written

    def _hold(self, spec: Mapping[str, Any]) -> None:
        """Note the kinds a Work holds: pruning lists them, beside the workload kinds, once no Work
        wants an object of them (listing each kind DRO-DS knows would ask a member for kinds it may
        not serve)."""
        self._held_kinds.update((r.api_version, r.kind) for r in _refs(spec) if r.kind != "Namespace")

    async def prune(self, works: Mapping[str, _Work]) -> bool:
        """Delete DRO-DS's objects for this cluster that no Work wants; False when the member failed."""
        wanted = {Ref.of(m) for w in works.values() for m in w.spec.get("manifests") or []}
        try:
            for api_version, kind in (*PRUNE_KINDS, *sorted(self._held_kinds - set(PRUNE_KINDS))):
                for it in await self.member.list_objects(api_version, kind, label_selector=MANAGED_SELECTOR):
                    meta = it.get("metadata") or {}
                    if (meta.get("annotations") or {}).get(ANN_CLUSTER) != self.cluster:
                        continue  # another cluster's copy (a member shared by two registrations)
                    ref = Ref(api_version, kind, str(meta.get("namespace") or ""), str(meta.get("name")))
                    if ref in wanted:
                        continue
                    log.info("pruning %s: no Work wants it any more%s", ref,
                             " (preserved: released, not deleted)" if preserved(it) else "")
                    await self.member.remove(api_version, kind, ref.name, ref.namespace or None, it)
                    self.owned.discard(ref)
                    self.sent.pop(ref, None)
        except (MemberUnavailable, MemberError) as e:
            (log.debug if self._prune_failing else log.warning)("pruning in %s failed: %s", self.cluster, e)
            self._prune_failing = True
            return False
        if self._prune_failing:
            log.info("pruning in %s works again", self.cluster)
            self._prune_failing = False
        return True

    async def _copies(self, works: Mapping[str, _Work]) -> Copies:
        """DRO-DS's copies in the member of every kind the Works hold, by (namespace, name): a followed
        kind's from its watch (`drods.members.copy_watch`), the others one list per kind; None for a
        kind the member would not list (its objects are read one by one)."""
        kinds = sorted({(str(m.get("apiVersion")), str(m.get("kind"))) for w in works.values()
                        for m in w.spec.get("manifests") or [] if isinstance(m, dict)})
        self.copies.follow(kinds)
        out: Copies = {}
        for api_version, kind in kinds:
            followed = self.copies.listed((api_version, kind))
            if followed is not None:
                out[(api_version, kind)] = followed
                continue
            try:
                items = await self.member.list_objects(api_version, kind, label_selector=MANAGED_SELECTOR)
            except MemberError:
                out[(api_version, kind)] = None
                continue
            out[(api_version, kind)] = {(str((it.get("metadata") or {}).get("namespace") or ""),
                                         str((it.get("metadata") or {}).get("name"))): it for it in items}
        return out

    async def _copy(self, m: Mapping[str, Any], copies: Copies | None) -> Obj | None:
        """The member's copy of manifest ``m``: from the kind's list when there is one, else read."""
        meta = m.get("metadata") or {}
        api_version, kind, name = str(m.get("apiVersion")), str(m.get("kind")), str(meta.get("name"))
        ns = str(meta.get("namespace") or "")
        listed = copies.get((api_version, kind)) if copies is not None else None
        if listed is None:
            return await self.member.get(api_version, kind, name, ns or None)
        return _listed_copy(m, listed)

    async def status_of(self, name: str, spec: Mapping[str, Any], held: list[Obj] | None = None,
                        copies: Copies | None = None) -> Obj | None:
        """The Work's status as the member shows it now; None when the member can't be read.
        The member's workloads it read are added to ``held`` (for their usage); ``copies``: the
        member's copies as `_copies` listed them (else each is read)."""
        h = str(spec.get("hash") or "")
        rows: list[ManifestStatus] = []
        try:
            for m in spec.get("manifests") or []:
                meta = m.get("metadata") or {}
                ns = str(meta.get("namespace") or "")
                cur = await self._copy(m, copies)
                if cur is None:
                    self.owned.discard(Ref.of(m))
                if cur is None and self.applied.get(name) == h:
                    self.applied.pop(name, None)  # deleted behind our back: apply it again
                    self.wake.set()
                cmeta = (cur or {}).get("metadata") or {}
                if cur is not None and held is not None and cur.get("kind") in USAGE_KINDS:
                    held.append(cur)
                rows.append(ManifestStatus(
                    apiVersion=str(m.get("apiVersion")), kind=str(m.get("kind")), namespace=ns,
                    name=str(meta.get("name")), status=None if cur is None else dict(cur.get("status") or {}),
                    generation=cmeta.get("generation") if cur is not None else None,
                    manifestHash=(cmeta.get("annotations") or {}).get(ANN_HASH), report=run_report(cur)))
        except (MemberUnavailable, MemberError) as e:
            log.debug("reading the status of %s failed: %s", name, e)
            return None
        applied = self.applied.get(name) == h
        failed = None if applied else self.errors.get(name)
        # as the execution controller reports a push member's: the binding is Failed after the threshold
        # of failures in a row, or at once for a refusal the same apply meets again (a conflict)
        return WorkStatus(observedHash=h if applied or failed is not None else "",
                          applied=applied, message=failed.message[:1000] if failed is not None else "",
                          failures=failed.times if failed is not None else 0,
                          permanent=failed.permanent if failed is not None else False,
                          manifests=rows).model_dump(mode="json")

    async def report(self, name: str, w: _Work, status: Obj) -> None:
        try:
            r = await self.http.put(f"{WORKS}/{name}/status", json=status)
        except httpx.HTTPError as e:
            log.warning("reporting the status of Work %s failed: %s", name, e)
            return
        if r.status_code == 401:
            raise AgentRefused(f"the control plane refused the token: HTTP 401 {r.text[:300]}")
        if r.status_code != 200:  # 404: deleted meanwhile (the watch will say so); 403: not ours
            log.warning("status of Work %s not accepted: HTTP %d %s", name, r.status_code, r.text[:300])
            return
        if self.works.get(name) is w:
            w.status = status


