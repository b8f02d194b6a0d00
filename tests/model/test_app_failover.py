"""Application failover's pure parts: a copy's health, state preservation by JSONPath, when an old
copy is purged, the evicted clusters left out of the placement, and the policy field as Karmada
writes it."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from drods.controllers.app_failover import failover_message
from drods.model.app_failover import (
    GracefulEvictionTask,
    JsonPathError,
    StatePreservationRule,
    copy_health,
    label_state,
    parse_json_path,
    preserved_labels,
    purge_due,
    without_evicted,
)
from drods.model.binding import BindingSpec, placeable
from drods.model.decision import EVICTION, from_schedule
from drods.model.karmada import KarmadaPropagationSpec
from drods.model.placement import Placement


def entry(**kw: object) -> dict[str, object]:
    return {"cluster": "a", "replicas": 2, "applied": True, **kw}


def test_copy_health_follows_the_member_status() -> None:
    assert copy_health(entry(availableReplicas=2)) == "Healthy"
    assert copy_health(entry(availableReplicas=1)) == "Unhealthy"
    assert copy_health(entry(availableReplicas=2, conditions=[{"type": "Available", "status": "False"}])) \
        == "Unhealthy"
    assert copy_health(entry(conditions=[{"type": "Failed", "status": "True"}])) == "Unhealthy"  # a Job
    assert copy_health(entry(complete=True)) == "Healthy"
    # not reported yet, not applied, or on its way out: never a reason to move
    assert copy_health(entry()) == "Unknown"
    assert copy_health(entry(applied=False, availableReplicas=0)) == "Unknown"
    assert copy_health(entry(removing=True, availableReplicas=0)) == "Unknown"


def test_state_is_read_from_the_failed_copys_status_by_jsonpath() -> None:
    status = {"replicas": 3, "jobStatus": {"id": "abc-1", "ok": True}, "items": [{"name": "x"}]}
    rules = [StatePreservationRule(aliasLabelName="failover.io/job-id", jsonPath="{ .jobStatus.id }"),
             StatePreservationRule(aliasLabelName="failover.io/replicas", jsonPath="{.replicas}"),
             StatePreservationRule(aliasLabelName="failover.io/first", jsonPath="{.items[0].name}"),
             StatePreservationRule(aliasLabelName="failover.io/ok", jsonPath="{.jobStatus['ok']}"),
             StatePreservationRule(aliasLabelName="failover.io/absent", jsonPath="{.nothing.here}"),
             StatePreservationRule(aliasLabelName="failover.io/object", jsonPath="{.jobStatus}")]
    assert preserved_labels(rules, status) == {"failover.io/job-id": "abc-1", "failover.io/replicas": "3",
                                               "failover.io/first": "x", "failover.io/ok": "true"}
    assert preserved_labels(rules, None) == {}
    with pytest.raises(JsonPathError):
        parse_json_path("{.items[?(@.name=='x')]}")
    with pytest.raises(JsonPathError):
        parse_json_path("{}")
    # a rule selecting several values is refused when the policy is written (it used to fail each pass)
    with pytest.raises(ValidationError, match="only field and index steps"):
        StatePreservationRule(aliasLabelName="a", jsonPath='{.conditions[?(@.type=="Available")].status}')
    stored = StatePreservationRule.model_construct(aliasLabelName="a", jsonPath="{.items[*].name}")
    assert preserved_labels([stored, rules[1]], status) == {"failover.io/replicas": "3"}  # one stored before


def task(mode: str, grace: int | None = None) -> GracefulEvictionTask:
    return GracefulEvictionTask.model_validate({"fromCluster": "a", "purgeMode": mode, "gracePeriodSeconds": grace,
                                                "creationTimestamp": "2026-01-01T00:00:00Z"})


@pytest.mark.parametrize("mode", ["Immediately", "Directly"])
def test_immediate_purge_goes_at_once(mode: str) -> None:
    assert purge_due(task(mode), now=0.0, created=0.0, new_copies_healthy=False)


@pytest.mark.parametrize("mode", ["Graciously", "Gracefully"])
def test_gracious_purge_waits_for_the_new_copy_or_the_grace_period(mode: str) -> None:
    t = task(mode, grace=60)
    assert not purge_due(t, now=59.0, created=0.0, new_copies_healthy=False)
    assert purge_due(t, now=10.0, created=0.0, new_copies_healthy=True)
    assert purge_due(t, now=60.0, created=0.0, new_copies_healthy=False)
    assert not purge_due(task(mode), now=599.0, created=0.0, new_copies_healthy=False)  # default 600 s
    assert purge_due(task(mode), now=600.0, created=0.0, new_copies_healthy=False)


def test_never_purge_keeps_the_old_copy() -> None:
    assert not purge_due(task("Never"), now=1e9, created=0.0, new_copies_healthy=True)


def test_evicted_clusters_are_excluded_from_every_affinity_term() -> None:
    plain = without_evicted(Placement(), ["a"])
    assert plain.clusterAffinity is not None and plain.clusterAffinity.exclude == ["a"]
    tiers = Placement.model_validate({"clusterAffinities": [
        {"affinityName": "primary", "clusterNames": ["a", "b"], "exclude": ["z"],
         "overflowAffinities": [{"affinityName": "spill", "clusterNames": ["c"]}]},
        {"affinityName": "backup", "clusterNames": ["d"]}],
        "replicaScheduling": {"replicaSchedulingType": "Divided", "replicaDivisionPreference": "Weighted",
                              "weightPreference": {"dynamicWeight": "AvailableReplicas"}}})
    out = without_evicted(tiers, ["a", "z"])
    assert out.clusterAffinity is None
    assert [t.exclude for t in out.clusterAffinities] == [["z", "a"], ["a", "z"]]
    assert out.clusterAffinities[0].overflowAffinities[0].exclude == ["a", "z"]
    assert tiers.clusterAffinities[0].exclude == ["z"]  # the input is left as it was


def test_the_scheduler_decides_without_the_evicted_clusters() -> None:
    spec = BindingSpec.model_validate({
        "placement": {"clusterAffinity": {"clusterNames": ["a", "b"]}},
        "gracefulEvictionTasks": [{"fromCluster": "a", "preservedLabelState": {"k": "1"}},
                                  {"fromCluster": "b", "preservedLabelState": {"k": "2", "j": "x"}}]})
    out = placeable(spec, [])
    assert out.placement.clusterAffinity is not None and out.placement.clusterAffinity.exclude == ["a", "b"]
    assert spec.placement.clusterAffinity is not None and spec.placement.clusterAffinity.exclude == []
    assert label_state(spec.model_dump(mode="json")) == {"k": "2", "j": "x"}  # the later task wins
    untouched = BindingSpec()
    assert placeable(untouched, []) is untouched


KARMADA_FAILOVER = {
    "resourceSelectors": [{"apiVersion": "apps/v1", "kind": "Deployment", "name": "web"}],
    "propagateDeps": True,
    "failover": {"application": {"decisionConditions": {"tolerationSeconds": 120},
                                 "purgeMode": "Graciously", "gracePeriodSeconds": 300,
                                 "statePreservation": {"rules": [{"aliasLabelName": "app.io/id",
                                                                  "jsonPath": "{ .jobStatus.id }"}]}},
                 "cluster": {"purgeMode": "Directly"}},
}


def test_the_policy_field_reads_as_karmada_writes_it() -> None:
    spec = KarmadaPropagationSpec.model_validate(KARMADA_FAILOVER)
    assert spec.failover is not None and spec.failover.application is not None
    app = spec.failover.application
    assert (app.decisionConditions.tolerationSeconds, app.purgeMode, app.grace_seconds()) == (120, "Graciously", 300)
    defaults = KarmadaPropagationSpec.model_validate(
        {**KARMADA_FAILOVER, "failover": {"application": {"decisionConditions": {}}}})
    assert defaults.failover is not None and defaults.failover.application is not None
    assert (defaults.failover.application.decisionConditions.tolerationSeconds,
            defaults.failover.application.purgeMode, defaults.failover.application.grace_seconds()) \
        == (300, "Gracefully", 600)
    for bad in ({"purgeMode": "Sometimes"}, {"gracePeriodSeconds": 0},
                {"statePreservation": {"rules": []}}, {"decisionConditions": {"tolerationSeconds": -1}}):
        with pytest.raises(ValidationError):
            KarmadaPropagationSpec.model_validate({**KARMADA_FAILOVER, "failover": {"application": bad}})


def test_an_application_failover_decision_is_an_eviction() -> None:
    entry = {"time": "2026-11-28T06:00:00.000Z", "binding": "deployment-default-web",
             "scheduleType": "RescheduleTriggered",
             "trigger": {"kind": "Reschedule", "reason": failover_message("a", 0.0, 60)},
             "workload": {"kind": "Deployment", "namespace": "default", "name": "web"},
             "result": {"phase": "Scheduled", "placement": [{"cluster": "b", "replicas": 2}]}}
    rec = from_schedule(entry)
    assert rec["type"] == EVICTION
    assert rec["trigger"]["reason"] == "application failover: the copy in a unhealthy since 1970-01-01T00:00:00Z " \
        "(toleration 60s)"
    rebalanced = {**entry, "trigger": {"kind": "Reschedule", "reason": "WorkloadRebalancer demo"}}
    assert from_schedule(rebalanced)["type"] == "Reschedule"
