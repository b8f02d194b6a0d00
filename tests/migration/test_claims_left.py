"""Claims an earlier move left behind, over a real registry: the workload placed on such a cluster again
is said to meet them (``status.claimsLeftReused``, a Warning ``ClaimsLeftByMove`` Event) unless a later
plan moved it — and a later plan that Failed or RolledBack moved nothing (walkthrough AJ #4: plan A
Succeeded a→b, plan B Failed SourceUnavailable, failover put the workload on a's leftover claims, and
neither was said)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from drods.api.context import ApiContext
from drods.machinery.informer import Informer
from drods.migration import controller
from drods.migration.controller import MigrationController
from drods.model.events import EVENT
from drods.model.kinds import BINDING, CLUSTER, MIGRATION_PLAN
from drods.registry.objects import decode_binding_kept, decode_stored
from drods.store.sqlite import SqliteStore

T0 = 1_800_000_000.0
NS = "shop"
BINDING_NAME = f"statefulset-{NS}-db"


def plan(name: str, created: str, source: str, target: str, **status: Any) -> dict[str, Any]:
    return {"apiVersion": "multicluster.io/v1alpha1", "kind": "MigrationPlan",
            "metadata": {"name": name, "namespace": NS, "uid": f"uid-{name}", "creationTimestamp": created},
            "spec": {"workloadRef": {"name": "db"}, "sourceCluster": source, "targetCluster": target,
                     "data": {"mover": "VolumeCopy", "image": "rsync"}},
            "status": status}


FIRST = plan("first", "2027-01-01T00:00:00Z", "a", "b", phase="Succeeded", binding=BINDING_NAME,
             sourceCluster="a", targetCluster="b", startTime="2027-01-01T00:00:01.000Z",
             completionTime="2027-01-01T00:05:00.000Z", data={"mover": "VolumeCopy", "claims": [{"name": "data-db-0"}]})


def later(phase: str, **extra: Any) -> dict[str, Any]:
    return plan("second", "2027-01-01T01:00:00Z", "b", "a", phase=phase, **extra)


@pytest.mark.parametrize(("phase", "counts"), [("Failed", False), ("RolledBack", False), ("Succeeded", True),
                                                ("CopyData", True), ("Pending", True)])
def test_only_a_later_plan_that_moved_or_is_moving_the_workload_supersedes(phase: str, counts: bool) -> None:
    assert controller.superseded(FIRST, [FIRST, later(phase)]) is counts
    assert not controller.superseded(later(phase), [FIRST, later(phase)])  # an earlier plan never does
    other = {**later("Succeeded"), "spec": {**later("Succeeded")["spec"], "workloadRef": {"name": "web"}}}
    assert not controller.superseded(FIRST, [FIRST, other])  # nor one for another workload


def test_the_claims_earlier_plans_left_on_a_target() -> None:
    third = plan("third", "2027-01-01T02:00:00Z", "b", "a")
    rolled = later("RolledBack", sourceCluster="b", targetCluster="a", startTime="2027-01-01T01:00:01.000Z",
                   data={"claims": [{"name": "data-db-0"}, {"name": "data-db-1"}]})
    assert controller.claims_left_on(third, [FIRST, third], "a") == {"data-db-0": f"MigrationPlan {NS}/first"}
    # the latest earlier plan that had a copy there names it
    assert controller.claims_left_on(third, [FIRST, rolled, third], "a") == {"data-db-0": f"MigrationPlan {NS}/second",
                                                                   "data-db-1": f"MigrationPlan {NS}/second"}
    never_started = later("Failed", targetCluster="a", data={"claims": [{"name": "data-db-9"}]})
    assert controller.claims_left_on(third, [never_started, third], "a") == {}
    assert controller.claims_left_on(third, [FIRST, third], "c") == {}
    assert controller.claims_left_on(FIRST, [FIRST, third], "a") == {}  # a later plan left nothing before this one


async def _reconcile_first(tmp_path: Path, second: dict[str, Any]) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """Plan ``first`` Succeeded (a → b), the given later plan, the workload placed back on ``a`` (failover):
    one pass over ``first``; its status and the Events written."""
    store = SqliteStore(str(tmp_path / "drods.db"))
    reg = ApiContext.build(store, tmp_path).registry
    try:
        c = MigrationController(reg, plans=Informer(store, MIGRATION_PLAN.key_prefix(), decode_stored),
                                bindings=Informer(store, BINDING.key_prefix(), decode_binding_kept),
                                clusters=Informer(store, CLUSTER.key_prefix(), decode_stored), clock=lambda: T0)
        objs = {}
        for p in (FIRST, second):
            body = {k: v for k, v in p.items() if k != "status"}
            body["metadata"] = {"name": p["metadata"]["name"]}
            made = await reg.create(MIGRATION_PLAN, body, NS)
            made = await reg.update_status(MIGRATION_PLAN, p["metadata"]["name"], p["status"], NS,
                                           resource_version=int(made["metadata"]["resourceVersion"]))
            # the ordering the controller reads: creation time, as the fixtures say
            made["metadata"]["creationTimestamp"] = p["metadata"]["creationTimestamp"]
            objs[MIGRATION_PLAN.key(p["metadata"]["name"], NS)] = made
        c.plans.cache.update(objs)
        c.bindings.cache[BINDING.key(BINDING_NAME)] = {
            "apiVersion": "multicluster.io/v1alpha1", "kind": "ResourceBinding",
            "metadata": {"name": BINDING_NAME, "uid": "uid-binding"},
            "spec": {"resource": {"apiVersion": "apps/v1", "kind": "StatefulSet", "namespace": NS, "name": "db"}},
            "status": {"placement": [{"cluster": "a", "replicas": 2}]}}
        await c.reconcile(MIGRATION_PLAN.key("first", NS))
        st = (await reg.get(MIGRATION_PLAN, "first", NS)).get("status") or {}
        kvs, _ = await store.range(EVENT.key_prefix())
        return st, [ev for kv in kvs if (ev := json.loads(kv.value))["reason"] == "ClaimsLeftByMove"]
    finally:
        await store.close()


async def test_a_failed_later_plan_does_not_hide_the_reuse_of_the_claims_the_first_move_left(tmp_path: Path) -> None:
    st, events = await _reconcile_first(tmp_path, later("Failed", sourceCluster="b", targetCluster="a",
                                                        startTime="2027-01-01T01:00:01.000Z"))
    said = st.get("claimsLeftReused")
    assert said is not None and said["cluster"] == "a" and said["claims"] == ["data-db-0"], st
    assert len(events) == 1 and events[0]["type"] == "Warning", events
    assert events[0]["involvedObject"]["name"] == "db" and "data-db-0" in events[0]["message"], events


async def test_a_later_plan_that_moved_the_workload_tells_the_story_instead(tmp_path: Path) -> None:
    st, events = await _reconcile_first(tmp_path, later("Succeeded", sourceCluster="b", targetCluster="a",
                                                        startTime="2027-01-01T01:00:01.000Z"))
    assert "claimsLeftReused" not in st and events == [], (st, events)
