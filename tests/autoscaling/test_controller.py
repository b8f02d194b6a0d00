"""The autoscaler controller over a real store with an injected clock: decisions, resuming the
behaviour window from the store under a new leader, cron rules, and the one-owner rule."""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

from cryptography.fernet import Fernet

from drods.autoscaling.controller import (
    Autoscaler,
    AutoscalerSettings,
    decode_feedback,
    decode_not_ready,
    decode_utilisation,
)
from drods.autoscaling.cron import next_fire
from drods.machinery.informer import Informer, subscribed
from drods.machinery.journal import Journal
from drods.model.autoscaling import CronRule
from drods.model.events import EVENT
from drods.model.keys import AUTOSCALING_PREFIX, FEEDBACK_PREFIX, STATUS_PREFIX, status_key
from drods.model.kinds import BINDING, CLUSTER, CRON_FEDERATED_HPA, FEDERATED_HPA, by_kind
from drods.model.timefmt import parse_rfc3339, rfc3339_ms
from drods.registry.objects import ObjectRegistry, decode_binding_kept, decode_stored
from drods.registry.secrets import SecretBox
from drods.store.sqlite import SqliteStore
from tests.monitor_e2e.conftest import eventually

REF = {"apiVersion": "apps/v1", "kind": "Deployment", "name": "web"}


class Clock:
    def __init__(self, t: float) -> None:
        self.t = t

    def __call__(self) -> float:
        return self.t


@contextlib.asynccontextmanager
async def _autoscaler(store: SqliteStore, clock: Clock,
                      forecast: Any = None) -> AsyncIterator[tuple[Autoscaler, list[Informer]]]:
    infs = {"hpas": Informer(store, FEDERATED_HPA.key_prefix(), decode_stored),
            "crons": Informer(store, CRON_FEDERATED_HPA.key_prefix(), decode_stored),
            "bindings": Informer(store, BINDING.key_prefix(), decode_binding_kept),
            "clusters": Informer(store, STATUS_PREFIX, decode_utilisation),
            "feedback": Informer(store, FEEDBACK_PREFIX, decode_feedback),
            "members": Informer(store, CLUSTER.key_prefix(), decode_not_ready)}
    tasks = [asyncio.create_task(i.run()) for i in infs.values()]
    for i in infs.values():
        await i.wait_synced()
    registry = ObjectRegistry(store, SecretBox(Fernet.generate_key()))
    try:
        yield Autoscaler(registry, store, **infs, settings=AutoscalerSettings(sync_seconds=15.0),
                         clock=clock, forecast=forecast), list(infs.values())
    finally:
        for t in tasks:
            t.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)


async def _cluster(store: SqliteStore, name: str, used: float, capacity: float = 10.0, **view: Any) -> None:
    doc = {"status": {"cpu": {"capacity": capacity, "used": used}, **view}}
    await store.put(status_key(name), json.dumps(doc).encode())


def usage_doc(percent: float, pods: int) -> dict[str, Any]:
    """A cluster's usage of the workload: ``pods`` ready pods requesting 1 core each, at ``percent``."""
    return {"cpu": {"used": f"{round(percent * pods * 10)}m", "requested": str(pods)},
            "memory": {"used": "64Mi", "requested": f"{128 * pods}Mi"}, "pods": pods, "readyPods": pods}


async def _binding(registry: ObjectRegistry, replicas: int, where: dict[str, int],
                   util: dict[str, float] | None = None) -> None:
    """The workload's Binding placed as ``where``, its pods at ``util`` (cluster → CPU %) there."""
    name = "deployment-default-web"
    current = await registry.try_get(BINDING, name)
    spec = {"resource": {**REF, "namespace": "default"}, "replicas": replicas}
    if current is None:
        await registry.create(BINDING, {"apiVersion": BINDING.api_version, "kind": "Binding",
                                        "metadata": {"name": name}, "spec": spec})
    else:
        current["spec"] = spec
        await registry.update(BINDING, current)
    await registry.update_status(BINDING, name, {"phase": "Scheduled", "placement": [
        {"cluster": c, "replicas": n} for c, n in where.items()], "clusters": [
        {"cluster": c, "replicas": n, **({"usage": usage_doc(util[c], n)} if util and c in util else {})}
        for c, n in where.items()]})


async def _status_after(a: Autoscaler, kind: Any, name: str, key: str, ok: Any) -> dict[str, Any]:
    """Reconcile ``key`` once its inputs are in the informers, then wait for its status to land."""
    inf = a.hpas if kind is FEDERATED_HPA else a.crons
    a.sync_index()  # what run() does once the informers are synced (changes keep it current)
    await a.reconcile(key)

    async def landed() -> dict[str, Any] | None:
        st = (inf.cache.get(key) or {}).get("status") or {}
        return st if ok(st) else None

    return await eventually(landed, 5.0, f"{name} status")


def _hpa(name: str = "web") -> dict[str, Any]:
    return {"apiVersion": FEDERATED_HPA.api_version, "kind": "FederatedHPA",
            "metadata": {"name": name, "namespace": "default"},
            "spec": {"scaleTargetRef": REF, "minReplicas": 1, "maxReplicas": 20,
                     "metrics": [{"type": "Resource", "resource": {"name": "cpu", "target": {
                         "type": "Utilization", "averageUtilization": 60}}}],
                     "behavior": {"scaleDown": {"stabilizationWindowSeconds": 60}}}}


async def _hot_web(a: Autoscaler, store: SqliteStore, key: str) -> None:
    """web's 4 replicas at 90 % of their CPU on a and b, its FederatedHPA (60 %) created and in the informers."""
    await _cluster(store, "a", 9.0)
    await _cluster(store, "b", 9.0)
    await _binding(a.registry, 4, {"a": 2, "b": 2}, {"a": 90.0, "b": 90.0})
    await a.registry.create(FEDERATED_HPA, _hpa(), "default")
    await eventually(lambda: _ready(a, key), 5.0, "inputs in the informers")


async def test_decides_records_and_a_new_leader_resumes_the_window(tmp_path: Path) -> None:
    store = SqliteStore(str(tmp_path / "s.db"))
    clock = Clock(1_800_000_000.0)
    key = FEDERATED_HPA.key("web", "default")
    try:
        async with _autoscaler(store, clock) as (a, _):
            await _hot_web(a, store, key)
            st = await _status_after(a, FEDERATED_HPA, "web", key, lambda s: "desiredReplicas" in s)
            # 90 % against 60 %: ceil(4 × 1.5) = 6
            assert st["desiredReplicas"] == 6 and st["currentReplicas"] == 4
            # as autoscaling/v2 types it: an int32 percentage, and the use per pod beside it
            assert st["currentMetrics"][0]["resource"]["current"] == {"averageUtilization": 90, "averageValue": "900m"}
            assert st["scaleEvents"] == [{"time": "2027-01-15T08:00:00.000Z", "change": 2}]
            # told as kube's HPA tells it, on the FederatedHPA (`kubectl describe federatedhpa web`)
            told = await eventually(lambda: _events(store, "SuccessfulRescale", 1), 5.0, "the rescale's Event")
            assert told[0]["message"] == "New size: 6; reason: cpu resource utilization (percentage of request) " \
                "above target" and told[0]["type"] == "Normal"
            assert (told[0]["involvedObject"]["kind"], told[0]["involvedObject"]["name"]) == ("FederatedHPA", "web")
            # Within the sync period the same generation is not evaluated again (our own write).
            assert await a.reconcile(key) == 15.0
            # A period later, evaluated again: a condition whose status holds keeps its lastTransitionTime
            first = {c["type"]: c for c in st["conditions"]}
            clock.t += 16.0
            again = await _status_after(a, FEDERATED_HPA, "web", key,
                                        lambda s: parse_rfc3339(s.get("lastEvaluatedTime")) == clock.t)
            held = [c for c in again["conditions"] if c["status"] == first.get(c["type"], {}).get("status")]
            assert held and all(c["lastTransitionTime"] == first[c["type"]]["lastTransitionTime"] for c in held)
        page = await Journal(store, AUTOSCALING_PREFIX, clock=clock).query(clock.t - 1, clock.t + 1, 10)
        assert [(e["from"], e["to"], e["metrics"][0]["value"]) for e in page.items] == [(4, 6, 90.0)]

        # A new leader, later, load gone: the 6 recommended 5 s ago (kept in the status) holds the
        # scale-down for the 60 s window, then it goes.
        clock.t += 20.0
        async with _autoscaler(store, clock) as (a, _):
            await _binding(a.registry, 6, {"a": 3, "b": 3}, {"a": 20.0, "b": 20.0})
            await _cluster(store, "a", 2.0)
            await _cluster(store, "b", 2.0)
            await eventually(lambda: _util(a, 20.0), 5.0, "the new utilisation")
            st = await _status_after(a, FEDERATED_HPA, "web", key,
                                     lambda s: parse_rfc3339(s.get("lastEvaluatedTime")) == clock.t)
            assert st["desiredReplicas"] == 6  # ceil(6 × 20/60) = 2, held by the window
            conds = {c["type"]: c for c in st["conditions"]}  # as kube's HPA says a held scale-down
            assert conds["AbleToScale"]["reason"] == "ScaleDownStabilized"
            assert (conds["ScalingLimited"]["status"], conds["ScalingLimited"]["reason"]) == ("False",
                                                                                          "DesiredWithinRange")
            clock.t += 61.0
            st = await _status_after(a, FEDERATED_HPA, "web", key,
                                     lambda s: parse_rfc3339(s.get("lastEvaluatedTime")) == clock.t)
            assert st["desiredReplicas"] == 2
            told = await eventually(lambda: _events(store, "SuccessfulRescale", 2), 5.0, "the scale-down's Event")
            assert sorted(e["message"] for e in told)[0] == "New size: 2; reason: All metrics below target"
    finally:
        await store.close()


async def test_deleting_an_autoscaler_journals_the_count_going_back_to_the_template(tmp_path: Path) -> None:
    """The workload drops to its template's count when its FederatedHPA goes: a decision like any other
    rescale, which the journal (and so `drods explain`, the dashboard's timeline) did not show."""
    store = SqliteStore(str(tmp_path / "s.db"))
    clock = Clock(1_800_000_000.0)
    key = FEDERATED_HPA.key("web", "default")
    try:
        async with _autoscaler(store, clock) as (a, _):
            reg = a.registry
            deployment = by_kind("apps/v1", "Deployment")
            assert deployment is not None
            await reg.create(deployment, {"apiVersion": "apps/v1", "kind": "Deployment",
                                          "metadata": {"name": "web", "namespace": "default"},
                                          "spec": {"replicas": 3, "template": {"spec": {"containers": [
                                              {"name": "web", "image": "nginx"}]}}}}, "default")
            await _hot_web(a, store, key)
            await _status_after(a, FEDERATED_HPA, "web", key, lambda s: s.get("desiredReplicas") == 6)
            with subscribed((a.hpas, a._hpa_changed)):  # as run() subscribes
                await reg.delete(FEDERATED_HPA, "web", "default")

                async def gone() -> bool:
                    return key not in a.hpas.cache

                await eventually(gone, 5.0, "the deletion in the informer")
            await a.reconcile(key)
        page = await Journal(store, AUTOSCALING_PREFIX, clock=clock).query(clock.t - 1, clock.t + 1, 10)
        assert sorted((e["from"], e["to"], e["reason"]) for e in page.items) == [
            (4, 6, "recommendation"), (6, 3, "FederatedHPA deleted: the template's spec.replicas holds again")]
    finally:
        await store.close()


async def _events(store: SqliteStore, reason: str, count: int) -> list[dict[str, Any]] | None:
    """The Events of ``reason`` in the store once there are ``count`` of them (the autoscaler tells them after
    its status write, without waiting)."""
    kvs, _ = await store.range(EVENT.key_prefix())
    found = [ev for kv in kvs if (ev := json.loads(kv.value))["reason"] == reason]
    return found if len(found) == count else None


async def _ready(a: Autoscaler, key: str) -> bool:
    return key in a.hpas.cache and len(a.clusters.cache) == 2 and bool(a.bindings.cache)


async def _util(a: Autoscaler, value: float) -> bool:
    return all(u == {"cpu": value} for u in a.clusters.cache.values()) and any(
        (b.get("status") or {}).get("placement") == [{"cluster": "a", "replicas": 3}, {"cluster": "b", "replicas": 3}]
        for b in a.bindings.cache.values())


async def test_cron_sets_a_workload_total_and_a_second_owner_is_ambiguous(tmp_path: Path) -> None:
    store = SqliteStore(str(tmp_path / "s.db"))
    try:
        clock = Clock(0.0)
        async with _autoscaler(store, clock) as (a, _):
            cron = await a.registry.create(CRON_FEDERATED_HPA, {
                "apiVersion": CRON_FEDERATED_HPA.api_version, "kind": "CronFederatedHPA",
                "metadata": {"name": "web-cron", "namespace": "default"},
                "spec": {"scaleTargetRef": REF, "rules": [
                    {"name": "morning", "schedule": "0 9 * * *", "targetReplicas": 8}]}}, "default")
            created = parse_rfc3339(cron["metadata"]["creationTimestamp"])
            assert created is not None
            fire = next_fire(CronRule(name="m", schedule="0 9 * * *", targetReplicas=8), created)
            assert fire is not None
            ckey = CRON_FEDERATED_HPA.key("web-cron", "default")
            await eventually(lambda: _has(a.crons, ckey), 5.0, "the cron in the informer")
            clock.t = fire - 1.0
            st = await _status_after(a, CRON_FEDERATED_HPA, "web-cron", ckey, lambda s: "conditions" in s)
            assert "desiredReplicas" not in st and st["conditions"][0]["reason"] == "NoRuleFired"
            await _binding(a.registry, 3, {"a": 3})
            await eventually(lambda: _has(a.bindings, BINDING.key("deployment-default-web")), 5.0, "the Binding")
            clock.t = fire + 16.0
            st = await _status_after(a, CRON_FEDERATED_HPA, "web-cron", ckey, lambda s: "desiredReplicas" in s)
            assert st["desiredReplicas"] == 8 and st["activeRule"] == "morning"
            # the rule's first count is recorded from the workload's replicas before it (not from nothing)
            page = await Journal(store, AUTOSCALING_PREFIX, clock=clock).query(clock.t - 60, clock.t + 1, 10)
            assert [(e["from"], e["to"], e["reason"]) for e in page.items] == [(3, 8, "cron rule")], page.items
            # A FederatedHPA for the same workload written past admission (a race): it is not the owner.
            await a.registry.create(FEDERATED_HPA, _hpa("late"), "default")
            hkey = FEDERATED_HPA.key("late", "default")
            await eventually(lambda: _has(a.hpas, hkey), 5.0, "the second autoscaler in the informer")
            st = await _status_after(a, FEDERATED_HPA, "late", hkey, lambda s: "conditions" in s)
            assert st["conditions"][0]["reason"] == "AmbiguousTarget" and "CronFederatedHPA/web-cron" in \
                st["conditions"][0]["message"] and "desiredReplicas" not in st
    finally:
        await store.close()


async def _has(inf: Informer, key: str) -> bool:
    return key in inf.cache


async def test_forecast_pre_scales_before_the_peak(tmp_path: Path) -> None:
    store = SqliteStore(str(tmp_path / "s.db"))
    asked: list[tuple[str, float]] = []

    def forecast(cluster: str, seconds: float) -> float | None:
        asked.append((cluster, seconds))
        return {"a": 0.8, "b": 0.4}.get(cluster)  # a's water level doubles within the horizon, b's stays

    try:
        async with _autoscaler(store, Clock(1_800_000_000.0), forecast) as (a, _):
            await _cluster(store, "a", 5.0, waterLevel=0.4)
            await _cluster(store, "b", 5.0, waterLevel=0.4)
            await _binding(a.registry, 4, {"a": 2, "b": 2}, {"a": 50.0, "b": 50.0})
            await a.registry.create(FEDERATED_HPA, _hpa(), "default")
            key = FEDERATED_HPA.key("web", "default")
            await eventually(lambda: _ready(a, key), 5.0, "inputs in the informers")
            st = await _status_after(a, FEDERATED_HPA, "web", key, lambda s: "desiredReplicas" in s)
            # Now 50 % against 60 %: no change. Ahead: a at 100 %, b at 50 % → weighted 75 %,
            # ceil(4 × 75/60) = 5, before the peak.
            assert st["desiredReplicas"] == 5, st
            assert st["forecast"] == {"horizonSeconds": 600.0, "recommended": 5, "utilisation": [75.0],
                                      "growth": {"a": 2.0, "b": 1.0}}
            assert sorted(asked) == [("a", 600.0), ("b", 600.0)]
    finally:
        await store.close()


async def _cron_on_web(a: Autoscaler, name: str, rule: dict[str, Any]) -> float:
    """A CronFederatedHPA ``name`` with ``rule`` driving the FederatedHPA ``web``, once the informers have it
    beside ``web`` and the clusters' use; returns when the rule first fires after its creation."""
    cron = await a.registry.create(CRON_FEDERATED_HPA, {
        "apiVersion": CRON_FEDERATED_HPA.api_version, "kind": "CronFederatedHPA",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {"scaleTargetRef": {"apiVersion": "multicluster.io/v1alpha1", "kind": "FederatedHPA", "name": "web"},
                 "rules": [rule]}}, "default")
    fire = next_fire(CronRule.model_validate(rule), parse_rfc3339(cron["metadata"]["creationTimestamp"]) or 0.0)
    assert fire is not None
    key = FEDERATED_HPA.key("web", "default")

    async def ready() -> bool:
        return key in a.hpas.cache and len(a.crons.cache) == 1 and bool(a.clusters.cache)

    await eventually(ready, 5.0, "inputs in the informers")
    return fire


async def test_cron_bounds_a_federated_hpa_as_soon_as_its_rule_fires(tmp_path: Path) -> None:
    store = SqliteStore(str(tmp_path / "s.db"))
    try:
        clock = Clock(0.0)
        async with _autoscaler(store, clock) as (a, _):
            await _cluster(store, "a", 6.0)  # 60 % = the target: no change on metrics
            await _binding(a.registry, 4, {"a": 4}, {"a": 60.0})
            await a.registry.create(FEDERATED_HPA, _hpa(), "default")
            fire = await _cron_on_web(a, "office", {"name": "day", "schedule": "0 9 * * *", "targetMinReplicas": 8})
            key = FEDERATED_HPA.key("web", "default")
            clock.t = fire - 5.0
            st = await _status_after(a, FEDERATED_HPA, "web", key, lambda s: "desiredReplicas" in s)
            assert st["desiredReplicas"] == 4 and "cronRule" not in st
            clock.t = fire + 1.0  # within the sync period, but the rule in effect changed
            st = await _status_after(a, FEDERATED_HPA, "web", key, lambda s: "cronRule" in s)
            assert st["desiredReplicas"] == 8 and st["minReplicas"] == 8
            assert st["cronRule"] == "CronFederatedHPA/office:day"
            # the metrics recommend 4: the rule's floor made the 8, and ScalingLimited says so
            limited = next(c for c in st["conditions"] if c["type"] == "ScalingLimited")
            assert limited["status"] == "True" and limited["reason"] == "TooFewReplicas", limited
            assert limited["message"] == "the desired replica count is less than the minimum replica count (8)"
    finally:
        await store.close()


async def test_members_without_metrics_are_named_left_out_and_no_data_decides_nothing(tmp_path: Path) -> None:
    store = SqliteStore(str(tmp_path / "s.db"))
    clock = Clock(1_800_000_000.0)
    key = FEDERATED_HPA.key("web", "default")
    try:
        async with _autoscaler(store, clock) as (a, _):
            reg = a.registry
            # a busy cluster beside it must not stand in for the workload: its pods are what count
            await _cluster(store, "a", 9.5)
            await _binding(reg, 4, {"a": 2, "b": 2}, {"a": 90.0})
            name = "deployment-default-web"
            b = await reg.get(BINDING, name)
            b["status"]["clusters"][1]["usage"] = {"pods": 2, "readyPods": 2,
                                                   "metricsUnavailable": "the cluster serves no metrics.k8s.io API"}
            await reg.update_status(BINDING, name, b["status"])
            await reg.create(FEDERATED_HPA, _hpa(), "default")
            await eventually(lambda: _has(a.hpas, key), 5.0, "the autoscaler in the informer")
            await eventually(lambda: _usage_seen(a, 2), 5.0, "the usage in the informer")
            st = await _status_after(a, FEDERATED_HPA, "web", key, lambda s: "desiredReplicas" in s)
            # only a's pods are measured: 90 % against 60 % says scale up, so b's unmeasured pods count at 0 %
            # (Kubernetes' rule): (180 + 0) / 4 = 45 % reverses the direction — no scale on a guess
            assert st["desiredReplicas"] == 4
            assert st["currentMetrics"][0]["resource"]["current"]["averageUtilization"] == 90  # what was measured
            [missing] = [c for c in st["conditions"] if c["type"] == "MetricsUnavailable"]
            assert missing["status"] == "True" and missing["message"].startswith("b: the cluster serves no metrics")

            # a cut off, its last reading (90 %) is no measurement: a NotReady cluster is named and left out
            b = await reg.get(BINDING, name)
            b["status"]["clusters"] = [{"cluster": "a", "replicas": 2, "usage": usage_doc(90.0, 2)},
                                       {"cluster": "b", "replicas": 2, "usage": usage_doc(30.0, 2)}]
            await reg.update_status(BINDING, name, b["status"])
            await reg.create(CLUSTER, {"apiVersion": CLUSTER.api_version, "kind": "Cluster", "metadata": {"name": "a"},
                                       "spec": {}})
            await reg.update_status(CLUSTER, "a", {"conditions": [
                {"type": "Ready", "status": "False", "reason": "ClusterNotReachable",
                 "lastTransitionTime": "2027-01-15T08:00:00Z"}]})
            await eventually(lambda: _usage_seen(a, 2), 5.0, "both usages in the informer")
            await eventually(lambda: _has(a.members, CLUSTER.key("a")), 5.0, "a NotReady in the informer")
            clock.t += 20.0
            st = await _status_after(a, FEDERATED_HPA, "web", key,
                                     lambda s: parse_rfc3339(s.get("lastEvaluatedTime")) == clock.t)
            assert st["currentMetrics"][0]["resource"]["current"]["averageUtilization"] == 30.0  # b's alone
            [missing] = [c for c in st["conditions"] if c["type"] == "MetricsUnavailable"]
            assert missing["message"].startswith("a: cluster NotReady (ClusterNotReachable)"), missing

            # no member measured: no decision, the count stays
            b = await reg.get(BINDING, name)
            b["spec"]["replicas"] = 6
            await reg.update(BINDING, b)
            b = await reg.get(BINDING, name)
            b["status"]["clusters"] = [{"cluster": c, "replicas": 3} for c in ("a", "b")]
            await reg.update_status(BINDING, name, b["status"])
            await eventually(lambda: _usage_seen(a, 0), 5.0, "the usage gone from the informer")
            clock.t += 20.0
            st = await _status_after(a, FEDERATED_HPA, "web", key,
                                     lambda s: parse_rfc3339(s.get("lastEvaluatedTime")) == clock.t)
            assert st["desiredReplicas"] == 6 and st["currentMetrics"] == []
            assert st["conditions"][0]["reason"] == "NoMetrics"
            assert "a: no usage reported yet" in [c for c in st["conditions"]
                                                  if c["type"] == "MetricsUnavailable"][0]["message"]
    finally:
        await store.close()


async def _usage_seen(a: Autoscaler, n: int) -> bool:
    return any(sum(1 for e in (b.get("status") or {}).get("clusters") or [] if e.get("usage")) == n
               for b in a.bindings.cache.values())


async def test_cron_runs_kept_as_karmada_keeps_them_a_missing_target_fails_and_suspend_stops_later_runs(
        tmp_path: Path) -> None:
    store = SqliteStore(str(tmp_path / "s.db"))
    try:
        clock = Clock(0.0)
        async with _autoscaler(store, clock) as (a, _):
            await a.registry.create(FEDERATED_HPA, _hpa(), "default")
            rule = {"name": "tick", "schedule": "*/10 * * * *", "targetMinReplicas": 5,
                    "successfulHistoryLimit": 2, "failedHistoryLimit": 3}  # Karmada's fields, as Karmada writes them
            made = {}
            for name, target in (("office", "web"), ("ghost", "nosuch")):
                made[name] = await a.registry.create(CRON_FEDERATED_HPA, {
                    "apiVersion": CRON_FEDERATED_HPA.api_version, "kind": "CronFederatedHPA",
                    "metadata": {"name": name, "namespace": "default"},
                    "spec": {"scaleTargetRef": {"apiVersion": "autoscaling.karmada.io/v1alpha1",
                                                "kind": "FederatedHPA", "name": target}, "rules": [rule]}}, "default")
            t = parse_rfc3339(made["office"]["metadata"]["creationTimestamp"]) or 0.0
            fires = []
            for _ in range(4):
                nxt = next_fire(CronRule(name="t", schedule="*/10 * * * *", targetMinReplicas=5), t)
                assert nxt is not None
                fires.append(nxt)
                t = nxt
            office, ghost = (CRON_FEDERATED_HPA.key(n, "default") for n in ("office", "ghost"))
            hkey = FEDERATED_HPA.key("web", "default")

            async def synced() -> bool:
                return office in a.crons.cache and ghost in a.crons.cache and hkey in a.hpas.cache

            await eventually(synced, 5.0, "the autoscalers in the informers")

            def ran_at(at: float) -> Any:
                return lambda s: (s.get("executionHistories") or [{}])[0].get("lastExecutionTime") == rfc3339_ms(at)

            for at in fires[:3]:
                clock.t = at + 1.0
                st = await _status_after(a, CRON_FEDERATED_HPA, "office", office, ran_at(at))
            history = st["executionHistories"][0]
            assert [e["scheduleTime"] for e in history["successfulExecutions"]] == \
                [rfc3339_ms(fires[2]), rfc3339_ms(fires[1])]  # newest first, the limit's two
            assert history["successfulExecutions"][0]["appliedMinReplicas"] == 5
            assert history["nextExecutionTime"] == rfc3339_ms(fires[3])
            assert st["activeRule"] == "tick" and st["conditions"][0]["reason"] == "RuleInEffect"
            # a target that does not exist: a failed run, said, and no rule in effect
            st = await _status_after(a, CRON_FEDERATED_HPA, "ghost", ghost, ran_at(fires[2]))
            failed = st["executionHistories"][0]["failedExecutions"]
            assert [f["message"] for f in failed] == ["FederatedHPA default/nosuch does not exist"]
            assert "successfulExecutions" not in st["executionHistories"][0] and "activeRule" not in st
            assert st["conditions"][0]["status"] == "False" and st["conditions"][0]["reason"] == "TargetNotFound"
            failed_told = await eventually(lambda: _events(store, "ScaleFailed", 1), 5.0, "the failed run's Event")
            assert failed_told[0]["type"] == "Warning" and failed_told[0]["involvedObject"]["name"] == "ghost"
            assert failed_told[0]["message"] == "rule tick: FederatedHPA default/nosuch does not exist"
            # suspended: no later run, and what its last run set stays in effect (the bound had gone with it)
            obj = await a.registry.get(CRON_FEDERATED_HPA, "office", "default")
            obj["spec"]["rules"][0]["suspend"] = True
            await a.registry.update(CRON_FEDERATED_HPA, obj)

            async def suspended() -> bool:
                return bool(((a.crons.cache.get(office) or {}).get("spec") or {})["rules"][0].get("suspend"))

            await eventually(suspended, 5.0, "the suspended rule in the informer")
            clock.t = fires[3] + 1.0
            st = await _status_after(a, CRON_FEDERATED_HPA, "office", office,
                                     lambda s: "nextExecutionTime" not in (s.get("executionHistories") or [{}])[0])
            history = st["executionHistories"][0]
            assert history["lastExecutionTime"] == rfc3339_ms(fires[2]) and len(history["successfulExecutions"]) == 2
            assert st["conditions"][0]["reason"] == "RuleInEffect" and "suspended" in st["conditions"][0]["message"]
            assert a._cron_bounds(a.hpas.cache[hkey], clock.t) == (5, None, "CronFederatedHPA/office:tick")
    finally:
        await store.close()


async def test_a_cron_cap_below_the_specs_min_limits_a_hot_workload_by_its_max(tmp_path: Path) -> None:
    """Spec min 3, a cron rule's max 2, the workload at 7 and hot: the bounds in effect are 2..2 and the
    count 2 is limited by the maximum (it said TooFewReplicas / minReplicas)."""
    store = SqliteStore(str(tmp_path / "s.db"))
    try:
        clock = Clock(0.0)
        async with _autoscaler(store, clock) as (a, _):
            await _cluster(store, "a", 9.0)
            await _binding(a.registry, 7, {"a": 7}, {"a": 200.0})
            hpa = _hpa()
            hpa["spec"]["minReplicas"] = 3
            await a.registry.create(FEDERATED_HPA, hpa, "default")
            fire = await _cron_on_web(a, "cap", {"name": "night", "schedule": "0 22 * * *", "targetMaxReplicas": 2})
            key = FEDERATED_HPA.key("web", "default")
            clock.t = fire + 1.0
            st = await _status_after(a, FEDERATED_HPA, "web", key, lambda s: "cronRule" in s)
            assert st["desiredReplicas"] == 2 and (st["minReplicas"], st["maxReplicas"]) == (2, 2)
            limited = next(c for c in st["conditions"] if c["type"] == "ScalingLimited")
            assert limited["reason"] == "TooManyReplicas", limited
    finally:
        await store.close()


async def test_a_cron_rule_fires_at_its_time_not_at_the_next_sync(tmp_path: Path) -> None:
    """A rule due 2 s after the last evaluation runs then (its executionTime is its scheduleTime, plus the
    wake-up's 10 ms), not when the sync period ends (walkthrough AJ #6: 14:20:00 ran at 14:20:13)."""
    store = SqliteStore(str(tmp_path / "s.db"))
    try:
        clock = Clock(0.0)
        async with _autoscaler(store, clock) as (a, _):
            await _cluster(store, "a", 6.0)
            await _binding(a.registry, 4, {"a": 4}, {"a": 60.0})
            await a.registry.create(FEDERATED_HPA, _hpa(), "default")
            fire = await _cron_on_web(a, "office", {"name": "day", "schedule": "*/5 * * * *", "targetMinReplicas": 8})
            key = CRON_FEDERATED_HPA.key("office", "default")
            clock.t = fire - 2.0
            st = await _status_after(a, CRON_FEDERATED_HPA, "office", key,
                                     lambda s: parse_rfc3339(s.get("lastEvaluatedTime")) == fire - 2.0)
            assert st["executionHistories"][0]["nextExecutionTime"] == rfc3339_ms(fire)
            # our own status write brings it back within the period: it waits for the rule, not the period
            clock.t = fire - 1.0
            assert abs((await a.reconcile(key) or 0.0) - 1.01) < 1e-6
            clock.t = fire + 0.01  # the wake-up: 2.01 s after the last evaluation, inside the 15 s period
            st = await _status_after(a, CRON_FEDERATED_HPA, "office", key,
                                     lambda s: "successfulExecutions" in (s.get("executionHistories") or [{}])[0])
            [run] = st["executionHistories"][0]["successfulExecutions"]
            assert run == {"scheduleTime": rfc3339_ms(fire), "executionTime": rfc3339_ms(fire + 0.01),
                           "appliedMinReplicas": 8}
    finally:
        await store.close()


async def test_a_federated_hpa_whose_target_has_no_binding_says_target_not_found(tmp_path: Path) -> None:
    """As a CronFederatedHPA says it (``ScalingActive`` ``TargetNotFound``), with Karmada's FederatedHPA's
    ``AbleToScale`` ``FailedGetBinding``."""
    store = SqliteStore(str(tmp_path / "s.db"))
    try:
        async with _autoscaler(store, Clock(1_800_000_000.0)) as (a, _):
            await a.registry.create(FEDERATED_HPA, _hpa(), "default")
            key = FEDERATED_HPA.key("web", "default")
            await eventually(lambda: _has(a.hpas, key), 5.0, "the autoscaler in the informer")
            st = await _status_after(a, FEDERATED_HPA, "web", key, lambda s: bool(s.get("conditions")))
            active, able = st["conditions"]
            assert (active["type"], active["status"], active["reason"]) == ("ScalingActive", "False", "TargetNotFound")
            assert active["message"] == "Deployment default/web has no Binding (it does not exist, or no policy " \
                "places it)"
            assert (able["type"], able["status"], able["reason"]) == ("AbleToScale", "False", "FailedGetBinding")
            assert "desiredReplicas" not in st
    finally:
        await store.close()
