"""Cluster health (A3, A4, S11): the Ready condition, the not-ready taint, and the resource summary.

* **Push mode** — every ``probeIntervalSeconds`` (5 s) each cluster is probed through its
  `MemberClient` (``GET /version``, sent even while the client fails fast) and, when it answers and
  ``summaryIntervalSeconds`` (10 s) have passed, summarised (nodes, pods, metrics.k8s.io; the pods
  followed by a watch from the first summary on, not listed each time: `drods.members.pod_cache`). A member
  that answered another call within the interval (an apply, a listing) is not probed again: that
  answer is the probe, so a busy member is not sent probes on top of its work.
  A success makes it Ready=True at once; it turns
  Ready=False only after ``notReadyGraceSeconds`` (15 s: three missed probes) without a success — and
  then, for a member that hangs (a partition), at once: a probe is given up when the grace runs out.
  Before its first answer a cluster is Ready=Unknown. One task per cluster: a partitioned member
  costs its own probe timeouts, nobody else's.
* **Pull mode** (``spec.syncMode: Pull``) — judged by the age of the newest report: the status
  document ``/status/clusters/<name>`` or a report this process accepted; Ready=False after
  ``pullGraceSeconds`` (180 s) without one. Nothing is sent, so nothing is polled: the report times
  come from a watch of the status documents (one number per cluster), a report wakes the check of a
  cluster that is not Ready (checked every probe interval all the same), and a Ready one is looked at
  again only when its grace would run out or its heartbeat is due. 10,000 pull members were otherwise
  10,000 reads and decodes of their status documents every 5 s.
  An agent that cannot reach its member says so (`drods.model.reachability`, a watch of the clusters'
  domain events): Ready=False at once with reason ``ClusterNotReachable``, until a report or its
  ``ClusterReachable`` comes after it.
* Per cluster, the annotation ``multicluster.io/not-ready-grace-seconds`` overrides the grace.

While Ready is False the cluster carries the taint ``cluster.multicluster.io/not-ready:NoExecute``
in ``spec.taints`` (the scheduler filters NoExecute taints a placement does not tolerate); it is
removed on recovery. The Cluster's ``status`` also gets ``kubernetesVersion``, ``nodeSummary`` and
``resourceSummary`` (what ``kubectl get clusters`` shows; a pull member's ``resourceSummary`` from its
last report, refreshed with each write of its status, as Karmada's agent writes its own); it is
rewritten when one of those or the condition changes, or every ``heartbeatWriteSeconds`` to refresh
``lastHeartbeatTime`` — or
less often on a fleet so large that its heartbeats would pass ``heartbeatWritesPerSecond``: at
10,000 clusters, writes of nothing but a heartbeat had filled the store's writer and every other
component waited behind them (as Kubernetes rewrites an unchanged node status only every 5 min).
Each push-mode summary also goes to monitoring's pipeline as a ``source="kubernetes"`` report,
which keeps ``/status/clusters/<name>`` (the scheduler's view) current.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import random
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from drods.controllers.fleet import MemberFleet, decode_report_time
from drods.controllers.settings import GRACE_ANNOTATION, MemberSettings, annotation_seconds
from drods.errors import AlreadyExists, Conflict, NotFound
from drods.machinery.informer import subscribed
from drods.machinery.periodic import Periodic
from drods.machinery.tasks import raise_ended, stop_tasks
from drods.members.client import MemberError, MemberUnavailable
from drods.members.clients import is_pull
from drods.members.collector import report_from_summary
from drods.members.summary import ClusterSummary
from drods.model import member_status as ms
from drods.model.conditions import condition
from drods.model.keys import STATUS_PREFIX
from drods.model.kinds import CLUSTER
from drods.model.reachability import NOT_REACHABLE, Reachability
from drods.model.taints import NOT_READY_TAINT
from drods.model.timefmt import parse_rfc3339, rfc3339
from drods.monitor.statusdoc import scheduler_view
from drods.registry.patch import MERGE_PATCH

if TYPE_CHECKING:
    from drods.monitor.service import MonitorService

log = logging.getLogger(__name__)
Obj = dict[str, Any]


@dataclass
class _Health:
    first_seen: float
    last_ok: float | None = None
    last_error: str | None = None
    summary: ClusterSummary | None = None
    summarised: float = 0.0  # when the summary was last taken
    version: str | None = None
    written: float = 0.0  # when the heartbeat was last written
    ready: str = ""  # the Ready status last judged




def _stated(**values: tuple[float | None, int]) -> Obj:
    """The values a member stated, rounded to their digits; one it did not state is left out, not 0."""
    return {k: round(float(v), d) if d else int(v) for k, (v, d) in values.items() if v is not None}


def resource_summary(st: ms.MemberStatus) -> Obj:
    """What ``kubectl get clusters`` shows of a member's status (a report stating only capacity counts
    it as allocatable; what it does not state is left out)."""
    out: Obj = {}
    for res, part in ((ms.CPU, st.cpu), (ms.MEMORY, st.memory), (ms.GPU, st.gpu)):
        part = part or ms.Resource()
        allocatable = part.allocatable if part.allocatable is not None else part.capacity
        if res == ms.GPU and not allocatable:
            continue
        # used: what metrics.k8s.io measured when the member serves it (a report's ``used`` folds the
        # requests in for the water level: a pull member showed its requests as its use)
        used = part.measured if part.measured is not None else part.used
        out[res] = _stated(**{ms.ALLOCATABLE: (allocatable, 2), ms.ALLOCATED: (part.allocated, 2),
                              ms.USED: (used, 1)})
    if pods := _stated(**{ms.CAPACITY: (st.pods_capacity, 0), ms.USED: (st.pods_used, 0)}):
        out[ms.PODS] = pods
    out.update(_stated(**{ms.WATER_LEVEL: (st.water_level, 2)}))
    return out


class ClusterHealth:
    def __init__(self, fleet: MemberFleet, settings: MemberSettings, monitor: MonitorService, *,
                 clock: Callable[[], float] = time.time) -> None:
        """``monitor``: where member summaries go, as status reports."""
        self.fleet = fleet
        self.settings = settings
        self.monitor = monitor
        self.clock = clock
        self.state: dict[str, _Health] = {}
        self._tasks: dict[str, asyncio.Task[None]] = {}
        self._slots = asyncio.Semaphore(settings.probeConcurrency)
        self._reported: dict[str, asyncio.Event] = {}  # pull clusters: set by a report that may change Ready
        self._reach: dict[str, Reachability] = {}  # pull clusters: their agent's newest reachability event
        self._started_for = -1  # the fleet's membership the probe loops were last started for

    async def run(self) -> None:
        await self.fleet.synced.wait()
        reports, reach = self.fleet.informers.reports, self.fleet.informers.reachability
        try:
            with subscribed(*(((reports, self._on_report),) if reports is not None else ()),
                            *(((reach, self._on_reach),) if reach is not None else ())):
                for key, event in list(reach.cache.items()) if reach is not None else ():
                    self._on_reach(key, None, event)
                await Periodic("cluster-health", self._start_probes, min(0.5, self.settings.probeIntervalSeconds),
                               first_at_start=True).run()
        finally:
            await stop_tasks(self._tasks.values())

    def _on_report(self, key: str, old: float | None, new: float | None) -> None:
        name = key[len(STATUS_PREFIX):]
        st = self.state.get(name)
        if new is not None and new != old and (st is None or st.ready != "True") and name in self._reported:
            self._reported[name].set()  # Ready only moves a deadline: that waits for its check

    def _on_reach(self, _key: str, _old: Reachability | None, new: Reachability | None) -> None:
        """An agent said whether it reaches its member: kept if it is the cluster's newest, and its
        check woken (a Ready cluster too: the word of an agent is not a deadline to wait for)."""
        if new is None:
            return  # its lease ran out: a newer one or the reports have the word by then
        cur = self._reach.get(new.cluster)
        if cur is None or new.at > cur.at:
            self._reach[new.cluster] = new
            if new.cluster in self._reported:
                self._reported[new.cluster].set()

    async def _start_probes(self) -> None:
        """One probe loop per registered cluster (a loop ended by `LeadershipLost` ends this term)."""
        raise_ended(self._tasks.values())
        if self._started_for == self.fleet.membership:
            return
        self._started_for = self.fleet.membership
        names = {k[len(CLUSTER.key_prefix()):] for k in self.fleet.clusters.cache}
        for n in names - set(self._tasks):
            self._tasks[n] = asyncio.create_task(self._loop(n), name=f"health-{n}")
        for n in set(self._tasks) - names:
            self._tasks.pop(n).cancel()
            self.state.pop(n, None)
            self._reach.pop(n, None)

    async def _loop(self, name: str) -> None:
        """One cluster's probes: one every probe interval from the start of the last (at least
        50 ms apart); a failed probe is logged and counted (``cluster-health-probe``)."""
        started = time.monotonic()
        phased = False

        reported = self._reported.setdefault(name, asyncio.Event())

        async def probe() -> None:
            nonlocal started
            started = time.monotonic()
            reported.clear()  # a report from here on is news for the next check
            async with self._slots:
                await self.check(name)

        async def wait() -> None:
            nonlocal phased
            period = self.settings.probeIntervalSeconds
            pull = self._watched_pull(name)
            if not phased:  # the cluster's place in the round: clusters joined together (a fleet at
                phased = True  # start) would otherwise be probed and summarised together, every round
                period = random.uniform(0.0, period)
            elif pull:
                period = max(period, self._pull_wait(name))
            left = max(period - (time.monotonic() - started), 0.05)
            if not pull:
                await asyncio.sleep(left)
                return
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(left):
                    await reported.wait()

        try:
            await Periodic("cluster-health-probe", probe, None, wait=wait, first_at_start=True).run()
        finally:
            self._reported.pop(name, None)

    def _watched_pull(self, name: str) -> bool:
        """A pull cluster whose report times come from the watch (tests may leave it out)."""
        obj = self.fleet.cluster(name)
        return obj is not None and is_pull(obj) and self.fleet.informers.reports is not None

    def _pull_wait(self, name: str) -> float:
        """Seconds until a Ready pull cluster's check could find something new without a report: its
        grace running out, or its heartbeat due; at most a heartbeat period (0: the probe interval)."""
        obj, st = self.fleet.cluster(name), self.state.get(name)
        if obj is None or st is None or st.ready != "True":
            # not Ready: every probe interval, as a report this process's monitor accepted may not be
            # in the status document yet (an unchanged one is rewritten only every monitoring heartbeat)
            return 0.0
        now, every = self.clock(), self._heartbeat_every()
        deadline = (st.last_ok if st.last_ok is not None else st.first_seen) + self.grace(obj) - now
        return min(deadline, st.written + every - now, every)

    def _heartbeat_every(self) -> float:
        """How often an unchanged condition's heartbeat is written: ``heartbeatWriteSeconds``, or
        longer when the fleet's heartbeats would pass ``heartbeatWritesPerSecond``."""
        s = self.settings
        return max(s.heartbeatWriteSeconds, len(self._tasks) / s.heartbeatWritesPerSecond)

    def grace(self, obj: Obj) -> float:
        own = annotation_seconds(obj, GRACE_ANNOTATION)
        if own is not None:
            return own
        return self.settings.pullGraceSeconds if is_pull(obj) else self.settings.notReadyGraceSeconds

    async def check(self, name: str) -> None:
        obj = self.fleet.cluster(name)
        if obj is None:
            return
        now = self.clock()
        st = self.state.setdefault(name, _Health(first_seen=now))
        grace = self.grace(obj)
        if is_pull(obj):
            last = await self._last_report(name)
            if last is not None:
                st.last_ok = max(st.last_ok or 0.0, last)
            if self.fleet.informers.reports is not None and \
                    (st.ready != "True" or st.last_ok is None or now - st.last_ok >= grace):
                # the watch may lag behind a busy loop: the store has the last word on a cluster that
                # is not Ready or would turn NotReady (a Ready one only needs its deadline moved)
                stored = await self._stored_report(name)
                if stored is not None:
                    st.last_ok = max(st.last_ok or 0.0, stored)
            reach = self._reach.get(name)
            if reach is not None and reach.reachable:  # the agent read its member then: as good as a report
                st.last_ok = max(st.last_ok or 0.0, reach.at)
            # its ClusterNotReachable holds until a report or its ClusterReachable comes after it
            unreachable = reach if reach is not None and not reach.reachable and reach.at > (st.last_ok or 0.0) \
                else None
        else:
            await self._probe_within_grace(name, st, grace)
            now = self.clock()  # judged when the probe ended: a hanging one took seconds
            unreachable = None
        if unreachable is not None:
            ready, reason = "False", NOT_REACHABLE
            message = f"its agent cannot reach the member's API (said at {rfc3339(unreachable.at)}): " \
                f"{unreachable.message or 'no answer'}"
        elif st.last_ok is not None and now - st.last_ok < grace:
            ready, reason = "True", "ClusterReady"
            message = self._ready_message(obj, st)
        elif now - (st.last_ok or st.first_seen) >= grace:
            ready, reason = "False", "ClusterNotReady"
            since = f"since {rfc3339(st.last_ok)}" if st.last_ok else "yet"
            what = "report" if is_pull(obj) else "successful probe"
            message = f"no {what} {since} (grace {grace:g}s)" + (f": {st.last_error}" if st.last_error else "")
        else:
            cur = self._condition(obj)
            if cur is not None:  # within the grace: keep what it was
                ready, reason, message = str(cur.get("status")), str(cur.get("reason") or ""), \
                    str(cur.get("message") or "")
            else:
                ready, reason = "Unknown", "ClusterProbing"
                message = f"waiting for the first {'report' if is_pull(obj) else 'probe'}" + \
                    (f" ({st.last_error})" if st.last_error else "")
        st.ready = ready
        await self._write(name, obj, st, ready, reason, message, now)

    def _ready_message(self, obj: Obj, st: _Health) -> str:
        if is_pull(obj):
            return "agent reporting"
        s = st.summary
        if s is None:
            return f"answering ({st.version or 'version unknown'})"
        return f"{s.ready_nodes}/{s.node_count} nodes ready, {s.kubernetes_version or st.version or ''}".strip(", ")

    @staticmethod
    def _condition(obj: Obj) -> Obj | None:
        return condition(obj, "Ready")

    async def _probe_within_grace(self, name: str, st: _Health, grace: float) -> None:
        """`_probe`, given up when the grace runs out: a partitioned member neither answers nor refuses,
        and its client's own timeouts (a connect, then a 10 s read) had turned an 8 s grace into 25-33 s
        to NotReady, while the scheduler, the autoscaler and fail-back took it for Ready."""
        left = (st.last_ok if st.last_ok is not None else st.first_seen) + grace - self.clock()
        try:
            async with asyncio.timeout(max(left, self.settings.probeIntervalSeconds)):
                await self._probe(name, st)
        except TimeoutError:
            st.last_error = f"no answer within the grace ({grace:g}s): the member hangs"

    async def _probe(self, name: str, st: _Health) -> None:
        client, why = await self.fleet.clients.get(name)
        if client is None:
            st.last_error = why
            return
        # another call's answer this interval (an apply, a listing) stands for the probe — from when it
        # was heard, not from now: an answer heard just before a partition would otherwise give the
        # member up to a probe interval more of grace
        answered = client.state.last_success
        if st.version is None or not self._answered_since(answered, self.clock()):
            try:
                st.version = await client.probe()
            except (MemberUnavailable, MemberError) as e:
                st.last_error = str(e)[:300]
                return
            st.last_ok = self.clock()
        else:
            st.last_ok = max(st.last_ok or 0.0, answered or 0.0)
        st.last_error = None
        # due at the probe nearest the interval's end: a probe a moment early (its round's jitter, or the
        # last summary's own call) would otherwise wait a whole probe interval more (15 s for 10 s)
        probed = self.clock()
        if probed - st.summarised < self.settings.summaryIntervalSeconds - self.settings.probeIntervalSeconds / 2:
            return
        client.follow_pods()  # summarised every interval: its pods followed, not listed each time
        try:
            st.summary = await client.summary()
        except (MemberUnavailable, MemberError) as e:
            log.info("summary of %s failed: %s", name, e)
            return
        first = st.summarised == 0.0
        st.summarised = probed
        if first:  # the next one at the cluster's own place in the round: a fleet joined together would
            # otherwise be summarised together (nodes, pods, metrics of every member) every interval
            st.summarised -= random.uniform(0.0, self.settings.summaryIntervalSeconds)
        await self._feed(name, st.summary)

    def _answered_since(self, last_success: float | None, now: float) -> bool:
        """Whether the member answered a call within the last probe interval (the client's wall
        clock; an injected clock far from it never counts)."""
        return last_success is not None and 0.0 <= now - last_success < self.settings.probeIntervalSeconds

    async def _feed(self, name: str, summary: ClusterSummary) -> None:
        """The summary as this cluster's status, through monitoring's pipeline (one status document shape)."""
        from drods.monitor.report import MetricsReport

        report = report_from_summary(name, summary, self.clock())
        await self.monitor.start()
        # through this leader's fence, as every write of the member controllers (A6)
        await self.monitor.ingest(MetricsReport.model_validate(report), source="kubernetes", store=self.fleet.store)

    async def _last_report(self, name: str) -> float | None:
        times: list[float] = []
        reports = self.fleet.informers.reports
        stored = reports.cache.get(f"{STATUS_PREFIX}{name}") if reports is not None else \
            await self._stored_report(name)
        if stored is not None:
            times.append(stored)
        if self.monitor is not None:
            got = self.monitor.pipeline.normaliser.latest(name)
            if got is not None:
                times.append(float(got.received_ts))
        return max(times) if times else None

    async def _report(self, name: str) -> ms.MemberStatus | None:
        """A pull member's last report: the stored one, or one this process's monitor accepted since
        (the document is published after the report that wakes this check)."""
        kv = await self.fleet.store.get(f"{STATUS_PREFIX}{name}")
        doc = None if kv is None else ms.stored_document(kv.value)
        st = None if doc is None else doc.get("status")
        stored = ms.MemberStatus.read(st) if isinstance(st, dict) else None
        got = self.monitor.pipeline.normaliser.latest(name) if self.monitor is not None else None
        if got is None or (stored is not None and
                           (parse_rfc3339(stored.received_at) or 0.0) >= got.received_ts):
            return stored
        return ms.MemberStatus.read(scheduler_view(got))

    async def _stored_report(self, name: str) -> float | None:
        kv = await self.fleet.store.get(f"{STATUS_PREFIX}{name}")
        return decode_report_time(kv) if kv is not None else None

    async def _write(self, name: str, obj: Obj, st: _Health, ready: str, reason: str, message: str,
                     now: float) -> None:
        """Rewrite the status when something a reader cares about changed, or a heartbeat is due."""
        status = dict(obj.get("status") or {})
        conds = [c for c in status.get("conditions") or [] if isinstance(c, dict)]
        cur = next((c for c in conds if c.get("type") == "Ready"), None) or {}
        stamp = rfc3339(now)
        transition = cur.get("status") != ready or cur.get("reason") != reason
        # the member's last word: none yet for a cluster never heard from (not the time of this write)
        heartbeat = rfc3339(st.last_ok) if st.last_ok is not None else cur.get("lastHeartbeatTime")
        cond = {"type": "Ready", "status": ready, "reason": reason, "message": message,
                **({"lastHeartbeatTime": heartbeat} if heartbeat else {}),
                "lastTransitionTime": stamp if transition else cur.get("lastTransitionTime", stamp)}
        new = dict(status)
        new["conditions"] = [c for c in conds if c.get("type") != "Ready"] + [cond]
        if ready == "True" and st.summary is not None and not is_pull(obj):
            s = st.summary
            new["kubernetesVersion"] = s.kubernetes_version or st.version
            new["nodeSummary"] = {"totalNum": s.node_count, "readyNum": s.ready_nodes}
            new["resourceSummary"] = resource_summary(s.member_status)
        others = {k: v for k, v in new.items() if k != "conditions"}
        # a NotReady message carries the last error, which varies: it is refreshed with the heartbeat only
        material = transition or (ready == "True" and cur.get("message") != message) or \
            others != {k: v for k, v in status.items() if k != "conditions"}
        due = now - st.written >= self._heartbeat_every() and \
            (heartbeat != cur.get("lastHeartbeatTime") or cur.get("message") != message)
        written: Obj | None = None
        if (material or due) and ready == "True" and is_pull(obj):
            # a pull member's last report, as its agent would write it in Karmada: refreshed with the
            # writes made anyway (a report alone writes nothing: 10,000 members report every 15-30 s)
            report = await self._report(name)
            if report is not None:
                new["resourceSummary"] = resource_summary(report)
                if report.kubernetes_version is not None:
                    new["kubernetesVersion"] = report.kubernetes_version
                if report.nodes_total is not None and report.nodes_ready is not None:
                    new["nodeSummary"] = {"totalNum": int(report.nodes_total), "readyNum": int(report.nodes_ready)}
        if material or due:
            # the not-ready taint goes with the condition, in one write: a fleet of 10,000 returning had
            # written each cluster twice, and the scheduler saw each Ready a write before it could use it
            taints = self._taints(obj, ready == "False")
            spec = None if taints is None else {**(obj.get("spec") or {}), "taints": taints}
            try:
                written = await self.fleet.registry.update_status(
                    CLUSTER, name, new, resource_version=int(obj["metadata"]["resourceVersion"]), spec=spec)
                st.written = now
            except (NotFound, Conflict, AlreadyExists):
                return
            if transition:
                log.info("cluster %s Ready=%s (%s: %s)", name, ready, reason, message)
        await self._taint(name, ready == "False", written)

    def _taints(self, obj: Obj, tainted: bool) -> list[dict[str, Any]] | None:
        """The cluster's taints with the not-ready one as ``tainted`` says (None: they are so already)."""
        taints = [t for t in (obj.get("spec") or {}).get("taints") or [] if isinstance(t, dict)]
        has = any(t.get("key") == NOT_READY_TAINT and t.get("effect") == "NoExecute" for t in taints)
        if has == tainted:
            return None
        if tainted:
            return [*taints, {"key": NOT_READY_TAINT, "effect": "NoExecute", "timeAdded": rfc3339(self.clock())}]
        return [t for t in taints if t.get("key") != NOT_READY_TAINT]

    async def _taint(self, name: str, tainted: bool, written: Obj | None = None) -> None:
        """The taint alone, when the status had nothing to write (someone else changed the taints).
        ``written``: the object the status write just stored (the informer's copy is older until its
        event arrives: a patch on it lost its compare-and-swap, and the taint waited a probe interval)."""
        obj = written or self.fleet.cluster(name)
        if obj is None:
            return
        taints = self._taints(obj, tainted)
        if taints is None:
            return
        patch = {"metadata": {"resourceVersion": obj["metadata"]["resourceVersion"]}, "spec": {"taints": taints}}
        with contextlib.suppress(NotFound, Conflict, AlreadyExists):
            await self.fleet.registry.patch(CLUSTER, name, patch, MERGE_PATCH)
