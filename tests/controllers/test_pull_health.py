"""Pull members' health from a watch of their reports, and heartbeats a large fleet can afford.

A pull member sends nothing to be probed: its Ready condition follows its reports. Checking each one
every probe interval read and decoded 10,000 status documents every 5 s; a check now comes when a
report may change Ready (a cluster that is not Ready reports) or when the grace or the heartbeat
runs out. And a fleet whose heartbeats would pass ``heartbeatWritesPerSecond`` writes them further
apart: at 10,000 clusters heartbeat-only writes had filled the store's writer.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from drods.controllers.fleet import decode_reachability, decode_report_time
from drods.controllers.health import ClusterHealth, _Health
from drods.controllers.settings import MemberSettings
from drods.machinery.informer import Informer
from drods.model import jsondoc, reachability
from drods.model.keys import CLUSTER_EVENTS_PREFIX, STATUS_PREFIX
from drods.model.timefmt import rfc3339, rfc3339_ms
from drods.store.sqlite import SqliteStore

Obj = dict[str, Any]


class _Fleet:
    """One pull cluster held as the informer would hold it; status writes counted and kept."""

    def __init__(self, reports: Informer | None, reachability: Informer | None = None) -> None:
        self.obj: Obj = {"metadata": {"name": "c1", "resourceVersion": "1"}, "spec": {"syncMode": "Pull"},
                         "status": {}}
        self.synced = asyncio.Event()
        self.synced.set()
        self.membership = 1
        self.clusters = _Cache({"/registry/multicluster.io/clusters/c1": self.obj})
        self.informers = _Informers(reports, reachability)
        self.registry = self
        self.store = _NoReports()
        self.writes: list[Obj] = []
        self.ready_changed = asyncio.Event()

    def cluster(self, name: str) -> Obj | None:
        return self.obj if name == "c1" else None

    async def update_status(self, _kind: object, name: str, status: Obj, *, resource_version: int,
                            spec: Obj | None = None) -> Obj:
        before = _ready(self.obj)
        rv = str(resource_version + 1)
        self.obj = {**self.obj, "metadata": {"name": name, "resourceVersion": rv}, "status": status,
                    "spec": self.obj["spec"] if spec is None else spec}
        self.writes.append(status)
        if _ready(self.obj) != before:
            self.ready_changed.set()
        return self.obj

    async def patch(self, _kind: object, _name: str, body: Obj, _type: object) -> Obj:
        self.obj = {**self.obj, "spec": {**self.obj["spec"], **body["spec"]}}
        return self.obj


class _NoReports:
    async def get(self, _key: str) -> None:
        return None


class _Cache:
    def __init__(self, cache: dict[str, Obj]) -> None:
        self.cache = cache


class _Informers:
    def __init__(self, reports: Informer | None, reachability: Informer | None = None) -> None:
        self.reports = reports
        self.reachability = reachability


def _condition(obj: Obj) -> Obj:
    conds = (obj.get("status") or {}).get("conditions") or []
    return next(c for c in conds if c.get("type") == "Ready")


def _ready(obj: Obj) -> str | None:
    conds = (obj.get("status") or {}).get("conditions") or []
    return next((c["status"] for c in conds if c.get("type") == "Ready"), None)


class _Counted(ClusterHealth):
    checks = 0

    async def check(self, name: str) -> None:
        self.checks += 1
        await super().check(name)


async def _report(store: SqliteStore, at: float) -> None:
    doc = {"publishedAt": rfc3339_ms(at), "status": {"receivedAt": rfc3339_ms(at)}}
    await store.put(f"{STATUS_PREFIX}c1", jsondoc.dumps(doc))


async def _until(cond: Any, deadline_s: float, what: str) -> None:
    end = time.monotonic() + deadline_s
    while not cond():
        assert time.monotonic() < end, what
        await asyncio.sleep(0.02)


@contextlib.asynccontextmanager
async def _watched(tmp_path: Path, health_of: Any) -> AsyncIterator[tuple[SqliteStore, Informer, _Fleet, Any]]:
    """A store, the watch of its reports, a fleet of one pull cluster and ``health_of(fleet)``, all
    stopped afterwards (the health controller is started by the test, when it wants)."""
    store = SqliteStore(str(tmp_path / "db"))
    reports = Informer(store, STATUS_PREFIX, decode_report_time)
    watch = asyncio.create_task(reports.run())
    fleet = _Fleet(reports)
    tasks: list[asyncio.Task[None]] = [watch]
    try:
        await reports.wait_synced()
        yield store, reports, fleet, lambda: tasks.append(asyncio.create_task(health_of(fleet).run()))
    finally:
        for t in tasks:
            t.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        await store.close()


async def test_a_report_makes_a_pull_cluster_ready_at_once_and_a_ready_one_is_not_polled(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("drods.controllers.health.random.uniform", lambda _a, _b: 0.0)  # the first check at once
    # a probe interval far longer than the test: only a report's wake-up can make it Ready in time
    settings = MemberSettings(probeIntervalSeconds=60, pullGraceSeconds=600, heartbeatWriteSeconds=600)
    health = None

    def made(fleet: _Fleet) -> _Counted:
        nonlocal health
        health = _Counted(fleet=fleet, settings=settings, monitor=None)  # type: ignore[arg-type]
        return health

    async with _watched(tmp_path, made) as (store, _reports, fleet, start):
        start()
        # the first check, and the one the round's phasing (0 s here) brings 50 ms after it: from then
        # on only a report wakes a check (a check counted before then could be either)
        await _until(lambda: health is not None and health.checks >= 2, 5, "the first checks")
        assert health is not None and _ready(fleet.obj) == "Unknown"
        assert "lastHeartbeatTime" not in _condition(fleet.obj)  # never heard from: no heartbeat to show
        fleet.ready_changed.clear()
        checks = health.checks
        at = time.time()
        await _report(store, at)
        await asyncio.wait_for(fleet.ready_changed.wait(), 5)
        assert _ready(fleet.obj) == "True" and health.checks == checks + 1
        assert _condition(fleet.obj)["lastHeartbeatTime"] == rfc3339(at)
        await _report(store, time.time())  # a Ready cluster's report only moves its deadline
        await asyncio.sleep(0.5)
        assert health.checks == checks + 1, "a Ready pull cluster was checked again for a report"


async def test_a_silent_pull_cluster_turns_not_ready_at_its_grace_without_being_polled(tmp_path: Path) -> None:
    settings = MemberSettings(probeIntervalSeconds=0.05, pullGraceSeconds=1.5, heartbeatWriteSeconds=600)
    health = None

    def made(fleet: _Fleet) -> _Counted:
        nonlocal health
        health = _Counted(fleet=fleet, settings=settings, monitor=None)  # type: ignore[arg-type]
        return health

    async with _watched(tmp_path, made) as (store, reports, fleet, start):
        await _report(store, time.time())
        await _until(lambda: reports.cache.get(f"{STATUS_PREFIX}c1") is not None, 5, "the report in the watch")
        start()
        await _until(lambda: _ready(fleet.obj) == "True", 5, "Ready from the report")
        silent = time.monotonic()
        await _until(lambda: _ready(fleet.obj) == "False", 5, "NotReady once the grace ran out")
        assert time.monotonic() - silent < 2.5
        assert health is not None and health.checks <= 4, "polled: every probe interval made ~30 checks"
        await _report(store, time.time())  # back: Ready again at once
        await _until(lambda: _ready(fleet.obj) == "True", 2, "Ready again on the next report")


async def test_a_large_fleets_heartbeats_are_spaced_to_the_write_budget() -> None:
    now = 1_000.0
    fleet = _Fleet(None)
    settings = MemberSettings(heartbeatWriteSeconds=20, heartbeatWritesPerSecond=10, pullGraceSeconds=600)
    health = ClusterHealth(fleet=fleet, settings=settings, monitor=None,  # type: ignore[arg-type]
                           clock=lambda: now)
    health._tasks = {f"c{i}": None for i in range(2_000)}  # type: ignore[misc]  # 2,000 clusters: one each 200 s
    st = health.state["c1"] = _Health(first_seen=now, last_ok=now)
    await health.check("c1")
    assert len(fleet.writes) == 1  # Unknown → True is written at once
    for step in (30.0, 100.0, 199.0):  # newer reports: only the heartbeat moved
        now, st.last_ok = 1_000.0 + step, 1_000.0 + step
        await health.check("c1")
    assert len(fleet.writes) == 1, "a heartbeat was written before the fleet's budget allowed it"
    now, st.last_ok = 1_201.0, 1_201.0
    await health.check("c1")
    assert len(fleet.writes) == 2
    health._tasks = {}  # a small fleet: every heartbeatWriteSeconds
    now, st.last_ok = 1_222.0, 1_222.0
    await health.check("c1")
    assert len(fleet.writes) == 3


async def test_a_watch_that_lags_never_turns_a_reporting_cluster_not_ready(tmp_path: Path) -> None:
    """The watch of the reports may run behind a busy loop (10,000 members report every 30 s):
    before a pull cluster turns NotReady the store is read, and a report there keeps it Ready."""
    store = SqliteStore(str(tmp_path / "db"))
    reports = Informer(store, STATUS_PREFIX, decode_report_time)  # not run: its copy stays old
    now = time.time()
    reports.cache[f"{STATUS_PREFIX}c1"] = now - 1_000.0
    await _report(store, now - 5.0)
    fleet = _Fleet(reports)
    fleet.store = store  # type: ignore[assignment]
    health = ClusterHealth(fleet=fleet, settings=MemberSettings(pullGraceSeconds=180),  # type: ignore[arg-type]
                           monitor=None)  # type: ignore[arg-type]
    try:
        health.state["c1"] = _Health(first_seen=now - 1_000.0)
        await health.check("c1")
        assert _ready(fleet.obj) == "True", fleet.obj["status"]
    finally:
        await store.close()


class _Reported:
    """The store's copy of c1's last report."""

    def __init__(self) -> None:
        self.doc: Obj | None = None

    async def get(self, _key: str) -> Any:
        return None if self.doc is None else type("KV", (), {"value": jsondoc.dumps(self.doc)})()


async def test_a_pull_clusters_resource_summary_comes_from_its_report_with_the_writes_made_anyway() -> None:
    """What ``kubectl get clusters`` shows of a pull member (nodes, cpu, water level) was empty: only
    push members were summarised. Its last report fills it, refreshed with the heartbeat, not per report."""
    now = 1_000.0
    fleet = _Fleet(None)
    fleet.store = reports = _Reported()  # type: ignore[assignment]
    reports.doc = {"status": {"receivedAt": rfc3339_ms(now), "cpu": {"capacity": 64, "used": 46.3},
                              "memory": {"capacity": 256, "used": 240.8}, "waterLevel": 0.94}}
    settings = MemberSettings(heartbeatWriteSeconds=20, pullGraceSeconds=600)
    health = ClusterHealth(fleet=fleet, settings=settings, monitor=None,  # type: ignore[arg-type]
                           clock=lambda: now)
    st = health.state["c1"] = _Health(first_seen=now, last_ok=now)
    await health.check("c1")
    # what the report did not state (allocated, pods) is left out, not written as 0
    assert len(fleet.writes) == 1 and fleet.writes[0]["resourceSummary"] == {
        "cpu": {"allocatable": 64.0, "used": 46.3}, "memory": {"allocatable": 256.0, "used": 240.8},
        "waterLevel": 0.94}
    reports.doc["status"]["waterLevel"] = 0.5  # a newer report: no write of its own
    now, st.last_ok = 1_010.0, 1_010.0
    await health.check("c1")
    assert len(fleet.writes) == 1
    now, st.last_ok = 1_021.0, 1_021.0  # the heartbeat's write carries it
    await health.check("c1")
    assert len(fleet.writes) == 2 and fleet.writes[1]["resourceSummary"]["waterLevel"] == 0.5
    assert "nodeSummary" not in fleet.writes[1] and "kubernetesVersion" not in fleet.writes[1]  # not reported
    # an agent's report names its nodes and version: the VERSION and NODES columns show them
    reports.doc["status"].update(nodes={"total": 3, "ready": 2}, kubernetesVersion="v1.30.0")
    now, st.last_ok = 1_042.0, 1_042.0
    await health.check("c1")
    assert fleet.writes[2]["nodeSummary"] == {"totalNum": 3, "readyNum": 2}
    assert fleet.writes[2]["kubernetesVersion"] == "v1.30.0"
    # the report's used folds the requests in (the water level's max(used, allocated)); what metrics.k8s.io
    # measured, when stated, is what the member uses
    reports.doc["status"]["cpu"] = {"capacity": 24, "allocated": 1, "used": 1, "measured": 0.5}
    now, st.last_ok = 1_063.0, 1_063.0
    await health.check("c1")
    assert fleet.writes[3]["resourceSummary"]["cpu"] == {"allocatable": 24.0, "allocated": 1.0, "used": 0.5}


async def _said(store: SqliteStore, reachable: bool, message: str = "") -> None:
    """What the agent's ``POST /api/v1/metrics/events`` stores."""
    body = json.dumps(reachability.event("c1", reachable, message)).encode()
    await store.put(f"{CLUSTER_EVENTS_PREFIX}c1/{time.time_ns():020d}", body)


async def test_an_agent_that_cannot_reach_its_member_turns_it_not_ready_at_once_not_at_the_grace(
        tmp_path: Path) -> None:
    # a grace and a probe interval far longer than the test: only the agent's word can turn it NotReady
    settings = MemberSettings(probeIntervalSeconds=60, pullGraceSeconds=600, heartbeatWriteSeconds=600)
    store = SqliteStore(str(tmp_path / "db"))
    reports = Informer(store, STATUS_PREFIX, decode_report_time)
    reach = Informer(store, CLUSTER_EVENTS_PREFIX, decode_reachability)
    fleet = _Fleet(reports, reach)
    tasks = [asyncio.create_task(reports.run()), asyncio.create_task(reach.run())]
    try:
        await reports.wait_synced()
        await reach.wait_synced()
        await store.put(f"{CLUSTER_EVENTS_PREFIX}c1/{time.time_ns():020d}",
                        json.dumps({"cluster": "c1", "type": "NodeNotReady", "severity": "critical"}).encode())
        await _report(store, time.time())
        await _until(lambda: reports.cache.get(f"{STATUS_PREFIX}c1") is not None, 5, "the report in the watch")
        tasks.append(asyncio.create_task(ClusterHealth(fleet=fleet, settings=settings,  # type: ignore[arg-type]
                                                       monitor=None).run()))
        await _until(lambda: _ready(fleet.obj) == "True", 5, "Ready from the report (another event changes nothing)")

        await _said(store, False, "HTTPSConnectionPool: connection refused")
        await _until(lambda: _ready(fleet.obj) == "False", 5, "NotReady on the agent's word")
        cond = next(c for c in fleet.obj["status"]["conditions"] if c["type"] == "Ready")
        assert cond["reason"] == "ClusterNotReachable" and "connection refused" in cond["message"]
        assert any(t["key"] == "cluster.multicluster.io/not-ready" for t in fleet.obj["spec"].get("taints") or [])

        await _report(store, time.time() - 30)  # a report older than the agent's word does not undo it
        await asyncio.sleep(0.3)
        assert _ready(fleet.obj) == "False"
        await _said(store, True, "answering again")
        await _until(lambda: _ready(fleet.obj) == "True", 5, "Ready again when the agent reads its member again")
        assert not any(t["key"] == "cluster.multicluster.io/not-ready" for t in fleet.obj["spec"].get("taints") or [])

        await _said(store, False, "read timed out")
        await _until(lambda: _ready(fleet.obj) == "False", 5, "NotReady on the agent's word again")
        await _report(store, time.time())  # a report after it: the member answers
        await _until(lambda: _ready(fleet.obj) == "True", 5, "Ready again on a newer report")
    finally:
        for t in tasks:
            t.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        await store.close()
