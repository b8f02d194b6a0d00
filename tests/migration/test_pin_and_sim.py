"""A plan's collaborators outside its controller: the scheduler's pin (a pinned Binding needs a
decision exactly while its placement differs from the pin), the sim's Job failure (a hook Job whose
pod exits non-zero fails once past its backoffLimit, as Kubernetes reports it), the hook objects and
the service directory leaving out a copy whose traffic was withdrawn."""

from __future__ import annotations

import json
from typing import Any

from drods.migration.hooks import hook_binding, hook_job
from drods.model.annotations import PINNED_PLACEMENT, TRAFFIC_WITHDRAWN
from drods.model.data_jobs import job_outcome as hook_outcome
from drods.model.migration import MigrationPlanSpec, pin_annotation, pinned_placement
from drods.model.timefmt import rfc3339_ms
from drods.schedulerd.records import PINNED, RESCHEDULE, decode_binding, schedule_type
from drods.sim import workloads as W
from drods.steering.directory import directory_entries


def rec(status: dict[str, Any], pin: dict[str, int] | None, **spec: Any) -> Any:
    meta: dict[str, Any] = {"name": "b", "generation": 1}
    if pin is not None:
        meta["annotations"] = {PINNED_PLACEMENT: pin_annotation("MigrationPlan default/m", pin)}
    raw = json.dumps({"metadata": meta, "spec": {"replicas": 3, **spec}, "status": status}).encode()
    r = decode_binding("/registry/multicluster.io/bindings/b", raw, 7)
    assert r is not None
    return r


def test_a_pinned_binding_is_decided_while_its_placement_differs_from_the_pin() -> None:
    done = {"scheduledGeneration": 1, "scheduledTime": rfc3339_ms(100.0), "phase": "Scheduled",
            "placement": [{"cluster": "a", "replicas": 3}]}
    assert schedule_type(rec(done, None)) is None
    assert schedule_type(rec(done, {"a": 3, "b": 3})) == PINNED
    both = {**done, "placement": [{"cluster": "b", "replicas": 3}, {"cluster": "a", "replicas": 3}]}
    assert schedule_type(rec(both, {"a": 3, "b": 3})) is None  # order does not matter
    # a reschedule request on a pinned binding is still a decision (written as the pin: scheduledTime moves on)
    assert schedule_type(rec(both, {"a": 3, "b": 3}, rescheduleTriggeredAt=rfc3339_ms(101.0))) == RESCHEDULE
    assert rec(both, {"a": 3, "b": 0}).pin == (("a", 3),)  # zero shares are not placed


def test_pin_annotation_round_trip_and_garbage() -> None:
    obj = {"metadata": {"annotations": {PINNED_PLACEMENT: pin_annotation("x", {"b": 2, "a": 1})}}}
    assert pinned_placement(obj) == {"a": 1, "b": 2}
    assert pinned_placement({"metadata": {"annotations": {PINNED_PLACEMENT: "{nope"}}}) is None
    assert pinned_placement({}) is None


def _pod(phase: str) -> dict[str, Any]:
    return {"metadata": {"name": "p"}, "status": {"phase": phase}}


def test_sim_job_fails_past_its_backoff_limit() -> None:
    job = {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "j", "uid": "u", "generation": 1},
           "spec": {"backoffLimit": 0, "template": {"spec": {"containers": [{"name": "c"}]}}}}
    plan = W.plan_job(job, [_pod("Failed")], "2026-01-01T00:00:00Z")
    assert plan.create == [] and plan.status is not None
    conds = {c["type"]: c for c in plan.status["conditions"]}
    assert conds["Failed"]["status"] == "True" and conds["Failed"]["reason"] == "BackoffLimitExceeded"
    retry = W.plan_job({**job, "spec": {**job["spec"], "backoffLimit": 1}}, [_pod("Failed")], "2026-01-01T00:00:00Z")
    assert len(retry.create) == 1 and "conditions" not in (retry.status or {})  # one more try


def test_hook_job_and_binding() -> None:
    spec = MigrationPlanSpec.model_validate({
        "workloadRef": {"name": "db"}, "sourceCluster": "a", "targetCluster": "b",
        "hook": {"jobTemplate": {"spec": {"template": {"spec": {"containers": [
            {"name": "c", "image": "rsync", "env": [{"name": "MIGRATION_RUN", "value": "stale"}],
             "resources": {"requests": {"cpu": "250m"}}}]}}}}}})
    plan = {"metadata": {"name": "move-db", "namespace": "shop", "uid": "1234abcd-0000"}}
    job = hook_job(plan, spec, "copy", "a", "b")
    assert job["metadata"]["name"] == "move-db-copy-1234ab" and job["metadata"]["namespace"] == "shop"
    env = {e["name"]: e["value"] for e in job["spec"]["template"]["spec"]["containers"][0]["env"]}
    assert env["MIGRATION_RUN"] == "copy" and env["MIGRATION_SOURCE_CLUSTER"] == "a"
    assert env["MIGRATION_WORKLOAD"] == "StatefulSet/shop/db"
    assert job["spec"]["template"]["spec"]["restartPolicy"] == "Never"
    b = hook_binding(job, "b", "shop", "move-db")
    assert b["metadata"]["name"] == "job-shop-move-db-copy-1234ab"
    assert pinned_placement(b) == {"b": 1} and b["spec"]["resources"] == {"cpu": 0.25}
    assert hook_outcome(None, "b") == ("absent", "")
    running = {"status": {"clusters": [{"cluster": "b", "complete": False}]}}
    assert hook_outcome(running, "b") == ("running", "")
    failed = {"status": {"clusters": [{"cluster": "b", "conditions": [
        {"type": "Failed", "status": "True", "message": "Job has reached the specified backoff limit"}]}]}}
    assert hook_outcome(failed, "b") == ("failed", "Job has reached the specified backoff limit")
    failed["status"]["clusters"][0]["report"] = {"error": "no space left on device"}  # what the run wrote
    assert hook_outcome(failed, "b") == (
        "failed", "no space left on device (Job has reached the specified backoff limit)")
    assert hook_outcome({"status": {"clusters": [{"cluster": "b", "complete": True}]}}, "b") == ("complete", "")


def test_the_directory_leaves_out_a_copy_whose_traffic_was_withdrawn() -> None:
    export = {"metadata": {"name": "db", "namespace": "shop"}}
    svc = {"metadata": {"name": "db", "namespace": "shop"},
           "spec": {"selector": {"app": "db"}, "ports": [{"port": 5432}]}}
    sts = {"kind": "StatefulSet", "metadata": {"name": "db", "namespace": "shop"},
           "spec": {"template": {"metadata": {"labels": {"app": "db"}}}}}
    ready = {"status": {"conditions": [{"type": "Ready", "status": "True"}]}}
    binding: dict[str, Any] = {
        "metadata": {"name": "statefulset-shop-db"},
        "spec": {"resource": {"kind": "StatefulSet", "namespace": "shop", "name": "db"}},
        "status": {"placement": [{"cluster": "a", "replicas": 2}, {"cluster": "b", "replicas": 2}],
                   "clusters": [{"cluster": "a", "readyReplicas": 2}, {"cluster": "b", "readyReplicas": 2}]}}

    def clusters_of(b: dict[str, Any]) -> list[str]:
        entries = directory_entries([export], {("shop", "db"): svc}, [b], {("StatefulSet", "shop", "db"): sts},
                                    {"a": ready, "b": ready})
        return [r["cluster"] for r in entries[0]["clusters"]]

    assert clusters_of(binding) == ["a", "b"]
    binding["metadata"]["annotations"] = {TRAFFIC_WITHDRAWN: "a"}
    assert clusters_of(binding) == ["b"]
