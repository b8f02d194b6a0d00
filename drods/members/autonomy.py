"""Regional autonomy, the agent's side (SPEC M2): a pull-mode member that scales alone while cut off.

While the control plane answers, the agent caches, for each workload on its cluster that a
FederatedHPA owns, what it needs to decide alone (``GET /api/v1/agent/autoscalers``, saved in
``STATE_DIR/autonomy.json``): the bounds in effect, the metric targets, the behaviour, the desired
total and its cluster's share. It decides nothing then — the control plane's autoscaler does.

When the control plane has not answered for ``grace_s`` (no connection, a timeout, or a
gateway's 502/503/504), the agent is cut off; an answer that is an error is not a cut (the
control plane is there and decides). Every ``period_s``
it then reads each workload's own pods' use in its member (the usage the Work agent measures from
metrics.k8s.io PodMetrics, the same Σ use ÷ Σ requests the central autoscaler reads) and applies the central
autoscaler's own rule (`drods.model.scaling`: `recommend`, then `behave` with the
FederatedHPA's behaviour) to its share. The other clusters' replicas are taken as they were
(total − share), so the share is bounded by ``min − others`` (at least one replica) and
``max − others``: the total stays within the autoscaler's bounds. A change is applied by
re-applying the cluster's Work with the new count (`drods.members.works.WorkAgent.replicas_for`),
so nothing the Works do not hold is ever created, and recorded as a decision (time, local counts,
the total it makes, the utilisation read), saved with the cache so a restarted agent keeps both.

When the control plane answers again, the agent reports its decisions (``POST
/api/v1/agent/autonomy``); the control plane adopts the last one per workload as the desired
total (`drods.autoscaling.autonomy`), or drops it when the workload or its autoscaler was deleted
meanwhile — the Works' relist then prunes the copy. The agent drops its local counts once its
decisions are answered, and central decisions resume.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
from pydantic import ValidationError

from drods.members.agent import AgentRefused
from drods.members.client import MemberClient
from drods.members.state_file import StateFile
from drods.members.works import WorkAgent
from drods.model import scaling
from drods.model.autoscaling import Behavior, MetricSpec
from drods.model.timefmt import rfc3339_ms
from drods.model.workload_usage import WorkloadUsage

log = logging.getLogger(__name__)
AUTOSCALERS = "/api/v1/agent/autoscalers"
AUTONOMY = "/api/v1/agent/autonomy"
Workload = tuple[str, str, str, str]  # apiVersion, kind, namespace, name
# A gateway's answers for a control plane behind it that is down: as good as no answer. Any other
# answer means the control plane is there (even failing), and the agent must not decide alongside it.
UNREACHABLE = frozenset({502, 503, 504})


@dataclass(frozen=True, slots=True)
class AutonomySettings:
    period_s: float = 15.0  # the central autoscaler's sync period
    grace_s: float = 45.0  # the control plane unanswered this long: cut off


@dataclass(frozen=True, slots=True)
class Cached:
    """One workload the agent may scale alone (an item of ``GET /api/v1/agent/autoscalers``)."""

    workload: Workload
    autoscaler: str
    uid: str
    lo: int
    hi: int
    metrics: tuple[MetricSpec, ...]
    behavior: Behavior | None
    total: int
    local: int

    @classmethod
    def parse(cls, item: Mapping[str, Any]) -> Cached:
        w = item["workload"]
        behavior = item.get("behavior")
        return cls((str(w["apiVersion"]), str(w["kind"]), str(w.get("namespace") or "default"), str(w["name"])),
                   str(item["autoscaler"]["name"]), str(item["autoscaler"].get("uid") or ""),
                   int(item["minReplicas"]), int(item["maxReplicas"]),
                   tuple(MetricSpec.model_validate(m) for m in item.get("metrics") or []),
                   Behavior.model_validate(behavior) if behavior else None,
                   int(item["total"]), int(item["local"]))


def wid(w: Workload) -> str:
    return f"{w[1]}/{w[2]}/{w[3]}"


@dataclass
class AutonomyAgent:
    cluster: str
    member: MemberClient
    http: httpx.AsyncClient
    works: WorkAgent
    state_dir: Path
    settings: AutonomySettings = field(default_factory=AutonomySettings)
    clock: Callable[[], float] = time.time
    items: list[dict[str, Any]] = field(default_factory=list)  # the cache, as the control plane sent it
    decisions: list[dict[str, Any]] = field(default_factory=list)  # not yet answered
    overrides: dict[str, int] = field(default_factory=dict)  # workload id → this cluster's count now
    windows: dict[str, scaling.Window] = field(default_factory=dict)
    unreachable_since: float | None = None
    idle: dict[str, str] = field(default_factory=dict)  # workload → why its last cut-off pass decided nothing

    def __post_init__(self) -> None:
        self.state_file = StateFile(Path(self.state_dir) / "autonomy.json", self.cluster)
        self.works.replicas_for = self.replicas_for

    # ------------------------------------------------------------------ the state file
    def load(self) -> None:
        doc = self.state_file.load()
        if doc is not None:
            self.items = [i for i in doc.get("autoscalers") or [] if isinstance(i, dict)]
            self.decisions = [d for d in doc.get("decisions") or [] if isinstance(d, dict)]
            self.overrides = {str(k): int(v) for k, v in (doc.get("overrides") or {}).items()
                              if isinstance(v, int)}

    def save(self) -> None:
        self.state_file.save({"autoscalers": self.items, "decisions": self.decisions, "overrides": self.overrides})

    # ------------------------------------------------------------------ the Works' hook
    def replicas_for(self, manifest: Mapping[str, Any]) -> int | None:
        """The local count for a manifest the agent scaled while cut off, else None."""
        if not self.overrides:
            return None
        meta = manifest.get("metadata") or {}
        return self.overrides.get(f"{manifest.get('kind')}/{meta.get('namespace') or 'default'}/{meta.get('name')}")

    def _work_of(self, w: Workload) -> tuple[str, int] | None:
        """(Work name, replicas it asks for) of the workload's copy on this cluster."""
        for name, work in self.works.works.items():
            for m in work.spec.get("manifests") or []:
                meta = m.get("metadata") or {}
                if (m.get("apiVersion"), m.get("kind"), meta.get("namespace") or "default", meta.get("name")) == w:
                    replicas = (m.get("spec") or {}).get("replicas")
                    return name, int(replicas) if isinstance(replicas, int) else 1
        return None

    # ------------------------------------------------------------------ running
    async def run(self, stop: asyncio.Event) -> None:
        while not stop.is_set():
            try:
                await self.step()
            except (AgentRefused, asyncio.CancelledError):
                raise
            except Exception:  # noqa: BLE001 - one bad pass must not end the agent
                log.exception("autonomy pass for %s failed", self.cluster)
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), self.settings.period_s)

    async def step(self) -> None:
        """One period: talk to the control plane, or — cut off for ``grace_s`` — decide alone."""
        now = self.clock()
        try:
            r: httpx.Response | None = await self.http.get(AUTOSCALERS)
        except httpx.TransportError as e:
            r = None
            log.debug("autoscaling bounds of %s unreadable: %s", self.cluster, e)
        if r is None or r.status_code in UNREACHABLE:
            if self.unreachable_since is None:
                self.unreachable_since = now
                log.warning("control plane unreachable from %s", self.cluster)
            if now - self.unreachable_since >= self.settings.grace_s:
                await self.decide(now)
            return
        try:
            self._check(r)
            items = list(r.json()["items"])
        except (httpx.HTTPStatusError, ValueError, KeyError, TypeError) as e:
            # it answers, wrongly: not cut off, so no local decision beside the central ones
            self.unreachable_since = None
            log.warning("the control plane refused the autoscaling bounds of %s: %s", self.cluster, e)
            return
        if self.unreachable_since is not None:
            self.works.reachable.set()  # back: the Works relist (and prune) now
        self.unreachable_since = None
        if self.decisions:
            await self.report()
        if not self.decisions:  # everything answered: the control plane decides again
            self.windows.clear()
            if items != self.items or self.overrides:
                self.items, self.overrides = items, {}
                self.save()

    def _check(self, r: httpx.Response) -> None:
        if r.status_code in (401, 403):
            raise AgentRefused(f"the control plane refused the token for cluster {self.cluster}: "
                               f"HTTP {r.status_code} {r.text[:300]}")
        r.raise_for_status()

    def _usage(self, w: Workload, now: float) -> WorkloadUsage | None:
        """The workload's own pods' use in this member, from the Work agent's last usage reading;
        None when unmeasured or stale (then no decision is taken)."""
        reader = self.works.usage
        # read in the Work agent's passes: cut off, no watch event wakes them, so they come every resync
        if reader.read_at is None or \
                now - reader.read_at > 3 * max(reader.interval, self.settings.period_s, self.works.resync):
            return None
        return WorkloadUsage.from_doc(reader.docs.get((w[2], w[1], w[3])))

    async def decide(self, now: float) -> None:
        """Cut off: the HPA rule on each cached workload's own pods' utilisation in this member."""
        changed = False
        for item in self.items:
            try:
                c = Cached.parse(item)
            except (KeyError, TypeError, ValueError, ValidationError):
                continue
            found = self._work_of(c.workload)
            if found is None:
                self._idle(wid(c.workload), "it has no Work here")
                continue
            work, asked = found
            key = wid(c.workload)
            current = self.overrides.get(key, asked)
            if current <= 0:
                continue
            others = max(c.total - c.local, 0)
            lo = max(c.lo - others, 1)
            hi = max(c.hi - others, lo)
            # Resource metrics only: the Pods/Object/External ones come from the control plane's Prometheus
            usage = self._usage(c.workload, self.clock())
            seen = [(m.resource.name, o) for m in c.metrics if m.resource is not None and usage is not None
                    and (o := usage.observe(m.resource)) is not None]
            util = {name: value for name, (value, _t, _c) in seen}
            observations = [(value, target) for _name, (value, target, _c) in seen]
            if not observations:
                self._idle(key, "no fresh usage reading" if usage is None else "no resource metric in its reading")
                continue
            self.idle.pop(key, None)
            recommendation = min(max(scaling.recommend(current, observations), lo), hi)
            outcome, self.windows[key] = scaling.behave(current, recommendation,
                                                          self.windows.get(key, scaling.Window()),
                                                          c.behavior, now, lo, hi)
            if outcome.desired == current:
                continue
            w = c.workload
            self.decisions.append({
                "workload": {"apiVersion": w[0], "kind": w[1], "namespace": w[2], "name": w[3]},
                "autoscaler": c.autoscaler, "uid": c.uid, "time": rfc3339_ms(now),
                "fromReplicas": current, "toReplicas": outcome.desired, "total": others + outcome.desired,
                "utilisation": {k: round(v, 2) for k, v in util.items()}})
            log.warning("cut off: scaling %s in %s %d → %d (total %d, bounds [%d, %d], %s)", key, self.cluster,
                        current, outcome.desired, others + outcome.desired, c.lo, c.hi,
                        ", ".join(f"{k} {v:.3g}" for k, v in util.items()))
            self.overrides[key] = outcome.desired
            self.works.applied.pop(work, None)  # apply the Work again, with the local count
            changed = True
        if changed:
            self.save()
            self.works.wake.set()

    def _idle(self, key: str, why: str) -> None:
        """Say once (per workload, per reason) why a cut-off pass takes no local decision."""
        if self.idle.get(key) != why:
            self.idle[key] = why
            log.info("cut off: no local decision for %s in %s: %s", key, self.cluster, why)

    async def report(self) -> None:
        """Send the decisions; those answered (adopted, duplicate, deleted) are done."""
        try:
            r = await self.http.post(AUTONOMY, json={"decisions": self.decisions})
        except httpx.HTTPError as e:
            log.warning("reporting %d local decision(s) failed: %s", len(self.decisions), e)
            return
        if r.status_code in (401, 403):
            self._check(r)
        if r.status_code == 422:  # cannot ever be accepted: keeping it would block the others
            log.error("local decisions refused: %s", r.text[:500])
            answered = {wid(_workload(d)) for d in self.decisions}
        elif r.status_code != 200:
            log.warning("local decisions not taken: HTTP %d %s", r.status_code, r.text[:300])
            return
        else:
            answered = set()
            for res in r.json().get("results") or []:
                answered.add(str(res.get("workload")))
                log.warning("local scaling of %s: %s — %s", res.get("workload"), res.get("outcome"),
                            res.get("message"))
        self.decisions = [d for d in self.decisions if wid(_workload(d)) not in answered]
        for key in answered:
            self.overrides.pop(key, None)
            self.windows.pop(key, None)
        self.save()


def _workload(d: Mapping[str, Any]) -> Workload:
    w = d.get("workload") or {}
    return (str(w.get("apiVersion")), str(w.get("kind")), str(w.get("namespace") or "default"), str(w.get("name")))
