"""ClusterTaintPolicy's taint rule, the FederatedResourceQuota status and the scheduler's quota
check, as functions (the end-to-end behaviour is in tests/members_e2e/test_karmada_quota_taints_affinity.py)."""

from __future__ import annotations

from typing import Any

from drods.controllers.federated_quota import placed_use, quota_status
from drods.controllers.taint_policy import tainted
from drods.model.taint_policy import ClusterTaintPolicySpec
from drods.schedulerd.quota import NamespaceQuotas, Quota, held

NOW = "2026-01-01T00:00:00Z"


def cluster(name: str, ready: str, labels: dict[str, str] | None = None,
            taints: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    return {"metadata": {"name": name, "labels": labels or {}}, "spec": {"region": "eu", "taints": taints or []},
            "status": {"conditions": [{"type": "Ready", "status": ready}]}}


POLICY = ClusterTaintPolicySpec.model_validate({
    "targetClusters": {"labelSelector": {"matchLabels": {"env": "prod"}}},
    "addOnConditions": [{"conditionType": "Ready", "operator": "In", "statusValues": ["False", "Unknown"]}],
    "removeOnConditions": [{"conditionType": "Ready", "operator": "In", "statusValues": ["True"]}],
    "taints": [{"key": "example.com/down", "effect": "NoExecute", "value": "v1"}]})


def test_taints_follow_the_conditions_of_the_target_clusters() -> None:
    down = tainted(cluster("a", "False", {"env": "prod"}), [POLICY], NOW)
    assert down == [{"key": "example.com/down", "value": "v1", "effect": "NoExecute", "timeAdded": NOW}]
    assert tainted(cluster("a", "False", {"env": "prod"}, down), [POLICY], NOW) is None  # already there
    assert tainted(cluster("a", "True", {"env": "prod"}, down), [POLICY], NOW) == []  # remove-conditions
    assert tainted(cluster("b", "False", {"env": "dev"}), [POLICY], NOW) is None  # not a target: untouched
    assert tainted(cluster("b", "True", {"env": "dev"}, down), [POLICY], NOW) is None  # keeps what it has
    other = {"key": "mine", "effect": "NoSchedule"}
    assert tainted(cluster("a", "True", {"env": "prod"}, [other, *down]), [POLICY], NOW) == [other]
    # a missing condition matches neither In nor NotIn (Karmada's conditionMatches: its own guide's
    # KubeComponentsHealthy NotIn [True] tainted every cluster that does not report it); an empty list never acts
    gone = ClusterTaintPolicySpec.model_validate({
        "addOnConditions": [{"conditionType": "NetworkOK", "operator": "NotIn", "statusValues": ["True"]}],
        "taints": [{"key": "net", "effect": "NoSchedule"}]})
    assert tainted(cluster("c", "True"), [gone], NOW) is None
    reported = cluster("c", "True")
    reported["status"]["conditions"].append({"type": "NetworkOK", "status": "False"})
    assert tainted(reported, [gone], NOW) == [{"key": "net", "value": "", "effect": "NoSchedule", "timeAdded": NOW}]
    never = ClusterTaintPolicySpec.model_validate({"taints": [{"key": "x", "effect": "NoSchedule"}]})
    assert tainted(cluster("c", "False"), [never], NOW) is None
    # a changed value is taken, the taint kept
    revalued = tainted(cluster("a", "False", {"env": "prod"}, [{**down[0], "value": "old"}]), [POLICY], NOW)
    assert revalued == down


def binding(ns: str, placement: dict[str, int], cpu: float, memory: float) -> dict[str, Any]:
    return {"spec": {"resource": {"namespace": ns}, "resources": {"cpu": cpu, "memory": memory}},
            "status": {"placement": [{"cluster": c, "replicas": n} for c, n in placement.items()]}}


def test_quota_status_counts_what_the_namespace_placed() -> None:
    use = placed_use([binding("shop", {"a": 2, "b": 1}, 0.5, 0.25), binding("shop", {"a": 1}, 1.0, 1.0),
                      binding("other", {"a": 5}, 1.0, 1.0)], {"shop"})
    spec = {"overall": {"cpu": "4", "memory": "8Gi", "count/services": "3"},
            "staticAssignments": [{"clusterName": "c", "hard": {"cpu": "1"}}]}
    assert quota_status(spec, use["shop"]) == {
        "overall": {"cpu": "4", "memory": "8Gi", "count/services": "3"},
        "overallUsed": {"cpu": "2500m", "memory": "1792Mi"},
        "aggregatedStatus": [{"clusterName": "a", "used": {"cpu": "2", "memory": "1536Mi"}},
                             {"clusterName": "b", "used": {"cpu": "500m", "memory": "256Mi"}},
                             {"clusterName": "c", "hard": {"cpu": "1"}, "used": {"cpu": "0", "memory": "0"}}]}
    # a quantity written as a number reads back as Kubernetes serializes it, a string (it came back as 100)
    numbers = quota_status({"overall": {"cpu": 100}, "staticAssignments": [{"clusterName": "c", "hard": {"cpu": 20}}]},
                           {})
    assert numbers["overall"] == {"cpu": "100"} and numbers["aggregatedStatus"][0]["hard"] == {"cpu": "20"}


def test_namespace_quota_refuses_what_would_exceed_overall_and_frees_on_release() -> None:
    req = (0.5, 0.25, 0.0, 1.0, 0.0)
    quotas = NamespaceQuotas(lambda ns: [("old", held([("a", 2)], req))] if ns == "shop" else [])
    key = "/registry/policy.karmada.io/federatedresourcequotas/shop/team"
    assert not quotas.on_quota(key, None, Quota("shop/team", (("cpu", 0, 2.0), ("pods", 3, 10.0))))
    assert quotas.refusal("shop", "new", held([("a", 2)], req)) is None  # 1 + 1 of 2
    why = quotas.refusal("shop", "new", held([("a", 3)], req))
    assert why == ("FederatedResourceQuota shop/team: cpu would be 2500m of 2 overall (1 held by the namespace's "
                   "other workloads, 1500m asked by this one)")
    assert quotas.refusal("elsewhere", "new", held([("a", 30)], req)) is None  # no quota there
    assert quotas.hold("shop", "old", held([], req))  # released: room again
    assert quotas.refusal("shop", "new", held([("a", 3)], req)) is None
    # a changed quota asks parked bindings to retry
    assert quotas.on_quota(key, Quota("shop/team", (("cpu", 0, 2.0),)), Quota("shop/team", (("cpu", 0, 3.0),)))
