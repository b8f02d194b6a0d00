"""Karmada's FederatedResourceQuota and ClusterTaintPolicy on the Kubernetes paths: stored as
written, bad input refused with field errors and nothing stored, ``dryRun`` stores nothing, and a
namespaced token reads its namespace's quota but may not change it."""

from __future__ import annotations

from drods.api.auth import Role
from tests.api.conftest import Api

FRQ = "/apis/policy.karmada.io/v1alpha1/namespaces/shop/federatedresourcequotas"
CTP = "/apis/policy.karmada.io/v1alpha1/clustertaintpolicies"
QUOTA = {"apiVersion": "policy.karmada.io/v1alpha1", "kind": "FederatedResourceQuota",
         "metadata": {"name": "team", "namespace": "shop"},
         "spec": {"overall": {"cpu": "8", "memory": "16Gi", "pods": 20},
                  "staticAssignments": [{"clusterName": "a", "hard": {"cpu": "4", "memory": "8Gi"}}]}}
TAINT = {"apiVersion": "policy.karmada.io/v1alpha1", "kind": "ClusterTaintPolicy", "metadata": {"name": "down"},
         "spec": {"targetClusters": {"labelSelector": {"matchLabels": {"env": "prod"}}},
                  "addOnConditions": [{"conditionType": "Ready", "operator": "In",
                                       "statusValues": ["False", "Unknown"]}],
                  "removeOnConditions": [{"conditionType": "Ready", "operator": "In", "statusValues": ["True"]}],
                  "taints": [{"key": "cluster.karmada.io/not-ready", "effect": "NoExecute"}]}}


async def test_stored_as_written_and_bad_input_changes_nothing(api: Api) -> None:
    for path, obj in ((FRQ, QUOTA), (CTP, TAINT)):
        r = await api.call("POST", path, json=obj)
        assert r.status_code == 201, r.text
        back = (await api.call("GET", f"{path}/{obj['metadata']['name']}")).json()
        assert back["spec"] == obj["spec"] and back["apiVersion"] == "policy.karmada.io/v1alpha1"
    bad = [(FRQ, {**QUOTA, "metadata": {"name": "x"}, "spec": {"overall": {"cpu": "lots"}}}, "spec.overall"),
           (FRQ, {**QUOTA, "metadata": {"name": "y"}, "spec": {"overall": {}, "staticAssignments": [
               {"clusterName": "a", "hard": {}}, {"clusterName": "a", "hard": {}}]}}, "spec.staticAssignments"),
           (CTP, {**TAINT, "metadata": {"name": "z"}, "spec": {**TAINT["spec"], "taints": []}}, "spec.taints"),
           (CTP, {**TAINT, "metadata": {"name": "w"}, "spec": {**TAINT["spec"], "addOnConditions": [
               {"conditionType": "Ready", "operator": "Exists", "statusValues": ["True"]}]}},
            "spec.addOnConditions[0].operator"),
           # what Karmada's validating webhooks refuse: assignments beyond overall or outside it, names that
           # are no quota resource, a taint (key, effect) twice
           (FRQ, {**QUOTA, "metadata": {"name": "v"}, "spec": {"overall": {"cpu": "1"}, "staticAssignments": [
               {"clusterName": "a", "hard": {"cpu": "2"}}]}}, "spec.overall.cpu"),
           (FRQ, {**QUOTA, "metadata": {"name": "u"}, "spec": {"overall": {"cpu": "1"}, "staticAssignments": [
               {"clusterName": "a", "hard": {"memory": "2Gi"}}]}}, "spec.staticAssignments[0].hard.memory"),
           (FRQ, {**QUOTA, "metadata": {"name": "t"}, "spec": {"overall": {"foo": "1"}}}, "spec.overall"),
           (FRQ, {**QUOTA, "metadata": {"name": "s"}, "spec": {"overall": {"cpu ": "1"}}}, "spec.overall"),
           (CTP, {**TAINT, "metadata": {"name": "r"}, "spec": {**TAINT["spec"], "taints": [
               {"key": "x", "effect": "NoSchedule"}, {"key": "x", "effect": "NoSchedule", "value": "v"}]}},
            "spec.taints[1]")]
    for path, obj, field in bad:
        r = await api.call("POST", path, json=obj)
        assert r.status_code == 422, r.text
        causes = r.json()["details"]["causes"]
        assert r.json()["reason"] == "Invalid" and any(c["field"] == field for c in causes), r.text
        assert (await api.call("GET", f"{path}/{obj['metadata']['name']}")).status_code == 404
    # a taint another policy adds is refused, naming it
    twice = {**TAINT, "metadata": {"name": "again"}}
    r = await api.call("POST", CTP, json=twice)
    assert r.status_code == 409 and "ClusterTaintPolicy 'down'" in r.json()["message"], r.text
    assert (await api.call("GET", f"{CTP}/again")).status_code == 404
    dry = {**TAINT, "metadata": {"name": "dry"}, "spec": {**TAINT["spec"], "taints": [
        {"key": "cluster.karmada.io/unreachable", "effect": "NoExecute"}]}}
    r = await api.call("POST", f"{CTP}?dryRun=All", json=dry)
    assert r.status_code == 201 and r.json()["metadata"]["name"] == "dry"
    assert (await api.call("GET", f"{CTP}/dry")).status_code == 404


async def test_a_namespaced_token_reads_its_quota_but_cannot_lift_it(api: Api) -> None:
    assert (await api.call("POST", FRQ, json=QUOTA)).status_code == 201
    ctx = api.app.state.ctx  # type: ignore[attr-defined]
    api.tokens["shop-operator"] = ctx.tokens.issue(Role.OPERATOR, subject="shop", namespaces=["shop"])
    assert (await api.call("GET", f"{FRQ}/team", role="shop-operator")).status_code == 200
    r = await api.call("PATCH", f"{FRQ}/team", role="shop-operator", json={"spec": {"overall": {"cpu": "800"}}},
                       headers={"Content-Type": "application/merge-patch+json"})
    assert r.status_code == 403 and "cluster-wide tokens only" in r.json()["message"], r.text
    assert (await api.call("GET", f"{FRQ}/team")).json()["spec"]["overall"]["cpu"] == "8"
    r = await api.call("POST", FRQ, role="shop-operator", json={**QUOTA, "metadata": {"name": "mine"}})
    assert r.status_code == 403
