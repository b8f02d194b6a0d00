"""Policies Karmada's validating webhook refuses (pkg/util/validation/validation.go,
``ValidatePropagationSpec``) are refused by DRO-DS too, with the field named: each rule has a refused
body and a near-identical one that is accepted."""

from __future__ import annotations

import copy
from typing import Any

import pytest
from pydantic import ValidationError

from drods.errors import field_errors_of
from drods.model.karmada import KarmadaPropagationSpec
from drods.model.placement import Placement
from tests.api.conftest import Api, api  # noqa: F401  (the in-process API server fixture)

DEPLOY = {"apiVersion": "apps/v1", "kind": "Deployment", "name": "web"}
DIVIDED = {"replicaSchedulingType": "Divided", "replicaDivisionPreference": "Weighted",
           "weightPreference": {"dynamicWeight": "AvailableReplicas"}}


def spec(**fields: Any) -> dict[str, Any]:
    return {"resourceSelectors": [dict(DEPLOY)], **fields}


def app_failover(**application: Any) -> dict[str, Any]:
    return spec(propagateDeps=True, failover={"application": {"decisionConditions": {}, **application}})


def refusal(body: dict[str, Any]) -> dict[str, Any]:
    """The one field error the API would answer ``body`` with (as a PropagationPolicy's ``spec``)."""
    with pytest.raises(ValidationError) as info:
        KarmadaPropagationSpec.model_validate(body)
    fields = field_errors_of(info.value.errors(), "spec.")
    assert len(fields) == 1, fields
    return fields[0]


# (refused body, accepted near-twin, the field named, words of the reason)
CASES: dict[str, tuple[dict[str, Any], dict[str, Any], str, str]] = {
    "preemption-needs-names": (
        spec(preemption="Always", resourceSelectors=[dict(DEPLOY), {"apiVersion": "v1", "kind": "ConfigMap"}]),
        spec(preemption="Always", resourceSelectors=[dict(DEPLOY), {"apiVersion": "v1", "kind": "ConfigMap",
                                                                     "name": "cfg"}]),
        "spec.resourceSelectors[1].name", "must be set when preemption is Always"),
    "preemption-never-without-names": (
        spec(preemption="Always", resourceSelectors=[{"apiVersion": "apps/v1", "kind": "Deployment", "name": ""}]),
        spec(preemption="Never", resourceSelectors=[{"apiVersion": "apps/v1", "kind": "Deployment"}]),
        "spec.resourceSelectors[0].name", "preemption is Always"),
    "region-spread-needs-cluster": (
        spec(placement={"spreadConstraints": [{"spreadByField": "region", "minGroups": 2, "maxGroups": 2}]}),
        spec(placement={"spreadConstraints": [{"spreadByField": "region", "minGroups": 2, "maxGroups": 2},
                                              {"spreadByField": "cluster", "minGroups": 2, "maxGroups": 4}]}),
        "spec.placement.spreadConstraints", "needs a spreadByField: cluster constraint"),
    "city-spread-needs-cluster": (
        spec(placement={"spreadConstraints": [{"spreadByField": "city", "minGroups": 1}]}),
        # a constraint with neither key is a cluster one (Karmada's default, set before it validates)
        spec(placement={"spreadConstraints": [{"spreadByField": "city", "minGroups": 1}, {"minGroups": 1}]}),
        "spec.placement.spreadConstraints", "spreadByField city needs"),
    "one-constraint-per-field": (
        spec(placement={"spreadConstraints": [{"spreadByField": "cluster", "maxGroups": 2},
                                              {"spreadByField": "cluster", "maxGroups": 3}]}),
        spec(placement={"spreadConstraints": [{"spreadByField": "cluster", "maxGroups": 2},
                                              {"spreadByLabel": "topology.example.io/rack", "maxGroups": 3}]}),
        "spec.placement.spreadConstraints", "at most one constraint per spreadByField"),
    "max-groups-below-min": (
        spec(placement={"spreadConstraints": [{"spreadByField": "cluster", "minGroups": 3, "maxGroups": 2}]}),
        spec(placement={"spreadConstraints": [{"spreadByField": "cluster", "minGroups": 2, "maxGroups": 2}]}),
        "spec.placement.spreadConstraints[0]", "minGroups must not exceed maxGroups"),
    "grace-period-with-directly": (
        app_failover(purgeMode="Directly", gracePeriodSeconds=120),
        app_failover(purgeMode="Gracefully", gracePeriodSeconds=120),
        "spec.failover.application.gracePeriodSeconds", "only takes effect when purgeMode is Gracefully"),
    "grace-period-with-never": (
        app_failover(purgeMode="Never", gracePeriodSeconds=120),
        app_failover(purgeMode="Never"),
        "spec.failover.application.gracePeriodSeconds", "not Never"),
    "grace-period-with-immediately": (
        app_failover(purgeMode="Immediately", gracePeriodSeconds=120),
        app_failover(purgeMode="Graciously", gracePeriodSeconds=120),  # the older spelling of Gracefully
        "spec.failover.application.gracePeriodSeconds", "not Immediately"),
    "failover-needs-propagate-deps": (
        {**app_failover(), "propagateDeps": False},
        app_failover(),
        "spec.propagateDeps", "must be true when failover.application is set"),
    "workload-affinity-same-key": (
        spec(placement={"workloadAffinity": {"affinity": {"groupByLabelKey": "app.example.io/group"},
                                             "antiAffinity": {"groupByLabelKey": "app.example.io/group"}}}),
        spec(placement={"workloadAffinity": {"affinity": {"groupByLabelKey": "app.example.io/group"},
                                             "antiAffinity": {"groupByLabelKey": "app.example.io/replica"}}}),
        "spec.placement.workloadAffinity", "use different groupByLabelKey values"),
    "alias-label-name": (
        app_failover(statePreservation={"rules": [{"aliasLabelName": "app.io/-revision", "jsonPath": "{.rev}"}]}),
        app_failover(statePreservation={"rules": [{"aliasLabelName": "app.io/revision", "jsonPath": "{.rev}"}]}),
        "spec.failover.application.statePreservation.rules[0].aliasLabelName", "not a qualified name"),
    "alias-label-prefix": (
        spec(failover={"cluster": {"statePreservation": {"rules": [{"aliasLabelName": "App_IO/rev",
                                                                    "jsonPath": "{.rev}"}]}}}),
        spec(failover={"cluster": {"statePreservation": {"rules": [{"aliasLabelName": "app.io/Rev_1",
                                                                    "jsonPath": "{.rev}"}]}}}),
        "spec.failover.cluster.statePreservation.rules[0].aliasLabelName", "prefix must be a DNS subdomain"),
    "affinity-names-unique": (
        spec(placement={"clusterAffinities": [{"affinityName": "primary", "clusterNames": ["a"]},
                                              {"affinityName": "primary", "clusterNames": ["b"]}]}),
        spec(placement={"clusterAffinities": [{"affinityName": "primary", "clusterNames": ["a"]},
                                              {"affinityName": "backup", "clusterNames": ["b"]}]}),
        "spec.placement.clusterAffinities", "each term needs a unique affinityName"),
    "affinity-name-is-a-label-key": (
        spec(placement={"clusterAffinities": [{"affinityName": "on prem", "clusterNames": ["a"]}]}),
        spec(placement={"clusterAffinities": [{"affinityName": "on-prem", "clusterNames": ["a"]}]}),
        "spec.placement.clusterAffinities[0].affinityName", "not a qualified name"),
    "overflow-names-unique": (
        spec(placement={"replicaScheduling": DIVIDED, "clusterAffinities": [
            {"affinityName": "idc", "clusterNames": ["a"],
             "overflowAffinities": [{"affinityName": "idc", "clusterNames": ["b"]}]}]}),
        spec(placement={"replicaScheduling": DIVIDED, "clusterAffinities": [
            {"affinityName": "idc", "clusterNames": ["a"],
             "overflowAffinities": [{"affinityName": "cloud", "clusterNames": ["b"]}]}]}),
        "spec.placement.clusterAffinities[0]", "overflowAffinities[0].affinityName: 'idc' is already used"),
    "overflow-needs-a-primary-group": (
        spec(placement={"replicaScheduling": DIVIDED, "clusterAffinities": [
            {"affinityName": "idc", "overflowAffinities": [{"affinityName": "cloud", "clusterNames": ["b"]}]}]}),
        spec(placement={"replicaScheduling": DIVIDED, "clusterAffinities": [
            {"affinityName": "idc", "exclude": ["b"],
             "overflowAffinities": [{"affinityName": "cloud", "clusterNames": ["b"]}]}]}),
        "spec.placement.clusterAffinities[0]", "overflow tiers need a primary group"),
}


@pytest.mark.parametrize("case", CASES)
def test_refused_as_karmada_refuses_and_the_near_twin_accepted(case: str) -> None:
    refused, accepted, field, reason = CASES[case]
    err = refusal(copy.deepcopy(refused))
    assert err["field"] == field and reason in err["message"], err
    KarmadaPropagationSpec.model_validate(copy.deepcopy(accepted))


def test_gracefully_without_a_grace_period_is_accepted_with_600() -> None:
    """Karmada's mutating webhook sets 600 s before its validating webhook asks for a grace period, so
    Gracefully (also by default) without one is accepted there; here it is accepted and waits 600 s."""
    for body in (app_failover(purgeMode="Gracefully"), app_failover(), app_failover(gracePeriodSeconds=30)):
        got = KarmadaPropagationSpec.model_validate(body)
        assert got.failover is not None and got.failover.application is not None
        assert got.failover.application.grace_seconds() == (30 if "gracePeriodSeconds" in
                                                            body["failover"]["application"] else 600)


def test_native_placement_keeps_a_region_spread_alone() -> None:
    """DRO-DS's own placement API (Bindings, its PropagationPolicy, examples/scheduling) reads a region
    spread without a cluster constraint; only the Karmada kinds refuse it, as Karmada does."""
    pl = Placement.model_validate({"spreadConstraints": [{"spreadByField": "region", "minGroups": 2}]})
    assert pl.spreadConstraints[0].spreadByField == "region"
    # the rules that are Karmada's meaning of the fields themselves hold everywhere
    with pytest.raises(ValidationError, match="unique affinityName"):
        Placement.model_validate({"clusterAffinities": [{"affinityName": "x"}, {"affinityName": "x"}]})


async def test_the_api_refuses_with_the_field_and_stores_nothing(api: Api) -> None:  # noqa: F811
    url = "/apis/policy.karmada.io/v1alpha1/namespaces/shop/propagationpolicies"
    body = {"apiVersion": "policy.karmada.io/v1alpha1", "kind": "PropagationPolicy",
            "metadata": {"name": "greedy", "namespace": "shop"},
            "spec": {"resourceSelectors": [{"apiVersion": "apps/v1", "kind": "Deployment", "namespace": "shop"}],
                     "preemption": "Always"}}
    r = await api.call("POST", url, json=body)
    assert r.status_code == 422, r.text
    got = r.json()
    assert {"code", "message", "details"} <= set(got), got
    causes = got["details"].get("causes") or got["details"].get("fields")
    assert any(c["field"] == "spec.resourceSelectors[0].name" and "preemption is Always" in c["message"]
               for c in causes), got
    assert (await api.call("GET", f"{url}/greedy")).status_code == 404
    assert (await api.call("GET", url)).json()["items"] == []
    body["spec"]["resourceSelectors"][0]["name"] = "web"
    assert (await api.call("POST", url, json=body)).status_code == 201
