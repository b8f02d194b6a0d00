"""The pure pieces of the integration: status document codec, auto-ops policy, collector shaping."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path

import pytest

from drods.machinery.fence import Fence, FencedStore, LeadershipLost
from drods.machinery.journal import entry_key
from drods.model.keys import lease_key, status_key
from drods.model.reschedule import RescheduleRequest, RescheduleResult
from drods.monitor.autoops import AutoOps, AutoOpsPolicy, RestoreWatch, execute
from drods.monitor.collectors.prometheus import PrometheusCollector
from drods.monitor.report import MetricsReport, NormalisedStatus, normalise
from drods.monitor.service import MonitorService, MonitorSettings
from drods.monitor.statusdoc import allocation_errors, build_doc, comparable, scheduler_view, status_from_dict
from drods.store.sqlite import SqliteStore

T0 = 1_700_000_000.0


def test_status_document_round_trips_with_provenance() -> None:
    rep = MetricsReport.model_validate({
        "cluster": "c", "timestamp": datetime.fromtimestamp(T0, UTC), "cpuCapacity": 64, "cpuUsage": 50,
        "memoryCapacity": 256, "memoryAvailable": 192, "gpuCapacity": 4, "gpuUsage": 25, "storageCapacity": 1000,
        "storageAvailable": 400, "networkIn": 10, "networkOut": 5, "pods": 12, "requestRate": 3,
        "largestNodeFree": {"cpu": 4, "memory": 16, "gpu": 1}, "cpuAllocatable": 60, "podsCapacity": 110,
        "nodes": 3, "readyNodes": 2, "kubernetesVersion": "v1.30.0"})
    st = normalise(rep, T0 + 1)
    assert isinstance(st, NormalisedStatus)
    doc = build_doc(st, rep.model_dump(mode="json"), T0 + 2)
    back = status_from_dict(doc["observed"])
    assert back is not None and back.cluster == "c" and back.ts == T0 and back.received_ts == T0 + 1
    assert dict(back.values) == dict(st.values)
    view = scheduler_view(back)
    assert view == doc["status"]
    assert view["cpu"] == {"capacity": 64.0, "used": 32.0, "allocatable": 60.0}
    assert view["pods"] == {"used": 12, "capacity": 110.0} and view["storage"] == {"capacity": 1000.0,
                                                                                   "available": 400.0}
    assert view["nodes"] == {"total": 3.0, "ready": 2.0} and view["kubernetesVersion"] == "v1.30.0"  # a pull
    # member's Cluster status shows them (`drods.controllers.health`)
    assert "timestamp" not in comparable(view) and "receivedAt" not in comparable(view)
    assert allocation_errors({"cpuAllocated": -1, "gpuAllocatable": True, "podsCapacity": 3}) == [
        {"field": "cpuAllocated", "message": "must be a finite non-negative number"},
        {"field": "gpuAllocatable", "message": "must be a finite non-negative number"}]
    assert status_from_dict({"cluster": "x"}) is None


def test_history_keys_sort_by_time() -> None:
    keys = [entry_key("/h/", T0 + dt) for dt in (0, 0.5, 86_400, 1e6)]
    assert keys == sorted(keys) and keys[0].startswith("/h/20231114/22/13/20/")
    assert entry_key("/h/", T0, "a/b c") == entry_key("/h/", T0, "a/b c")  # deterministic (dedup)


async def test_autoops_policy_cooldown_rate_limit_capacity_and_hook() -> None:
    ops = AutoOps(AutoOpsPolicy(cooldownSeconds=600, maxActionsPerHour=2, minAvailableClusters=1))
    assert not ops.decide("evacuate", "a", T0, candidates=0).act  # nowhere to move to
    assert ops.decide("evacuate", "a", T0, candidates=3).act
    ops.record("a", T0)
    assert "cooldown" in ops.decide("evacuate", "a", T0 + 60, candidates=3).reason
    ops.record("b", T0 + 1)
    assert "rate limit" in ops.decide("evacuate", "c", T0 + 2, candidates=3).reason
    assert ops.decide("evacuate", "c", T0 + 3601, candidates=3).act  # the hour slid by
    assert not AutoOps(AutoOpsPolicy(enabled=False)).decide("evacuate", "a", T0, candidates=3).act

    records: list[tuple[str, str, dict[str, object]]] = []

    async def record(kind: str, reason: str, **kw: object) -> bool:
        records.append((kind, reason, kw))
        return True

    async def hook(req: RescheduleRequest) -> RescheduleResult:
        return RescheduleResult(False, message=f"no room for {req.cluster}")

    fresh = AutoOps(AutoOpsPolicy())
    assert (await execute(fresh, "preallocate", "p", "peak ahead", T0, candidates=2, details={}, hook=None,
                          record=record))[0] == "no-hook"
    outcome, result = await execute(fresh, "evacuate", "q", "hot", T0, candidates=2, details={}, hook=hook,
                                    record=record)
    assert outcome == "refused" and result is not None and not result.accepted
    assert await execute(fresh, "evacuate", "q", "hot", T0 + 1, candidates=2, details={}, hook=hook,
                         record=record) == ("skipped", None)
    # Restoring needs no other cluster to move to, but waits out the cooldown the evacuation started.
    assert fresh.ready_at("q") == T0 + 900 and fresh.ready_at("never") == 0
    assert "cooldown" in fresh.decide("restore", "q", T0 + 899, candidates=0).reason
    assert fresh.decide("restore", "q", T0 + 900, candidates=0).act
    assert not AutoOps(AutoOpsPolicy(restore=False)).decide("restore", "q", T0, candidates=0).act
    assert [r[0] for r in records] == ["PreAllocate", "Evacuate", "Evacuate"]
    assert records[1][2]["details"]["result"]["message"] == "no room for q"  # type: ignore[index]


async def test_failback_is_paced_by_its_window_not_the_hourly_rate_limit() -> None:
    ops = AutoOps(AutoOpsPolicy(cooldownSeconds=0, maxActionsPerHour=1, failbackAfterSeconds=300))
    ops.record("x", T0)  # the hour's one evacuation is spent
    assert "rate limit" in ops.decide("evacuate", "y", T0, candidates=3).reason
    # fail-back needs no other cluster below its limit and is not held by the hourly rate limit ...
    assert ops.decide("failback", "r", T0, candidates=0).act
    records: list[str] = []

    async def record(kind: str, reason: str, **kw: object) -> None:
        records.append(kind)

    async def hook(req: RescheduleRequest) -> RescheduleResult:
        return RescheduleResult(True, 4, f"back to {req.cluster}", ("web",))

    for i, c in enumerate("rst"):  # ... nor counts against it: a recovered region fails back at once
        assert (await execute(ops, "failback", c, "Ready again", T0 + i, candidates=0, details={}, hook=hook,
                              record=record))[0] == "executed"
    assert records == ["Rebalance"] * 3 and ops.state() == {"lastAction": {"x": T0}, "recentActions": [T0]}
    assert not AutoOps(AutoOpsPolicy(failback=False)).decide("failback", "r", T0, candidates=0).act
    # the damping window: Ready and calm failbackAfterSeconds in a row; a relapse starts it again
    watch = RestoreWatch(ops, ops.policy.failbackAfterSeconds)
    watch.moved("r")
    assert watch.due("r", True, T0) is None and watch.due("r", True, T0 + 299) is None
    assert watch.due("r", False, T0 + 300) is None  # NotReady again
    assert watch.due("r", True, T0 + 310) is None and watch.due("r", True, T0 + 610) == T0 + 310


def test_autoops_state_is_handed_to_the_next_leader() -> None:
    ops = AutoOps(AutoOpsPolicy(cooldownSeconds=600, maxActionsPerHour=2))
    ops.record("a", T0)
    ops.record("b", T0 + 10)
    doc = json.loads(json.dumps(ops.state()))  # as the store keeps it
    heir = AutoOps(AutoOpsPolicy(cooldownSeconds=600, maxActionsPerHour=2))
    heir.restore(doc, T0 + 60)
    assert "cooldown" in heir.decide("evacuate", "a", T0 + 60, candidates=3).reason
    assert "rate limit" in heir.decide("evacuate", "c", T0 + 60, candidates=3).reason
    late = AutoOps(AutoOpsPolicy(cooldownSeconds=600, maxActionsPerHour=2))
    late.restore(doc, T0 + 3700)  # an hour later nothing of it counts any more
    assert late.decide("evacuate", "a", T0 + 3700, candidates=3).act and late.state()["recentActions"] == []
    AutoOps(AutoOpsPolicy()).restore(None, T0)  # nothing stored yet


async def test_a_collector_that_lost_its_lease_writes_no_status(tmp_path: Path) -> None:
    """A6: a pulled report goes through the collectors' fence; with a stale one nothing is written."""
    store = SqliteStore(str(tmp_path / "drods.db"))
    svc = MonitorService(store, tmp_path, MonitorSettings(), clock=lambda: T0)
    report = MetricsReport.model_validate({"cluster": "c", "timestamp": T0, "cpuCapacity": 8, "cpuUsage": 50,
                                           "memoryCapacity": 32, "memoryAvailable": 16})
    stale = FencedStore(store, Fence(lease_key("monitor-collectors"), 12345))
    with pytest.raises(LeadershipLost):
        await svc.ingest(report, "prometheus", store=stale)
    assert await store.get(status_key("c")) is None
    rev = await store.put(lease_key("monitor-collectors"), b"me")
    report = MetricsReport.model_validate({**report.model_dump(), "timestamp": T0 + 1})
    assert (await svc.ingest(report, "prometheus", store=FencedStore(store, Fence(lease_key("monitor-collectors"),
                                                                                   rev)))).published
    assert await store.get(status_key("c")) is not None
    await store.close()


def test_prometheus_values_are_shaped_into_a_valid_report() -> None:
    col = PrometheusCollector(clock=lambda: T0)
    body = col.shape("c", {"cpuCapacity": 16, "cpuUsage": 100.4, "memoryCapacity": 64, "memoryAvailable": 64.2,
                           "storageAvailable": 5, "pods": 11.6, "networkIn": -0.0001, "largestNodeFree.cpu": 20})
    rep = MetricsReport.model_validate(body)
    assert rep.cpuUsage == 100 and rep.memoryAvailable == 64 and rep.pods == 12 and rep.networkIn == 0
    assert rep.storageAvailable is None  # meaningless without a capacity
    assert rep.largestNodeFree is not None and rep.largestNodeFree.cpu == 16
    assert 'cluster="we\\"ird"' in col.promql("memoryCapacity", 'we"ird')
    assert "[2m]" in col.promql("cpuUsage", "c")


@pytest.mark.parametrize("text", ["30s", "5m", "1h", "1d", "90"])
def test_step_parsing(text: str) -> None:
    from drods.api.routes.history import format_step, parse_step

    assert format_step(parse_step(text)) in (text, "90s", "1m")
