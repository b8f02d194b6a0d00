"""Karmada's FederatedResourceQuota, ClusterTaintPolicy and ``placement.workloadAffinity`` acted on
against real (simulated) members, every object applied unchanged with kubectl: the quota refuses
the replica that would exceed ``overall`` and says why and puts its static assignment on the member
as a ResourceQuota, a taint policy taints the cluster whose
condition matches (and its NoSchedule taint keeps a new workload off it) and removes the taint on
its remove-conditions, affinity co-locates two workloads of a group and anti-affinity separates them."""

from __future__ import annotations

import json
from typing import Any

from drods.model.quantity import cores
from tests.kubectl.conftest import Kubectl
from tests.members_e2e.conftest import Env, deploy_path, deployment, wait_for


def placement(b: dict[str, Any] | None) -> dict[str, int]:
    return {p["cluster"]: p["replicas"] for p in ((b or {}).get("status") or {}).get("placement") or []}


def labelled(name: str, replicas: int, namespace: str, labels: dict[str, str], cpu: str = "100m") -> dict[str, Any]:
    d = deployment(name, replicas, namespace=namespace, cpu=cpu, memory="32Mi")
    d["metadata"]["labels"] = labels
    return d


QUOTA = """
apiVersion: policy.karmada.io/v1alpha1
kind: FederatedResourceQuota
metadata: {name: team, namespace: quota}
spec:
  overall: {cpu: "%s", memory: 4Gi}
  staticAssignments: %s
---
apiVersion: policy.karmada.io/v1alpha1
kind: PropagationPolicy
metadata: {name: web, namespace: quota}
spec:
  resourceSelectors: [{apiVersion: apps/v1, kind: Deployment, name: web}]
  placement:
    clusterAffinity: {clusterNames: [aws-dfw, gcp-sin]}
"""


def test_quota_refuses_the_replica_that_would_exceed_overall(env: Env, kubectl: Kubectl) -> None:
    kubectl.run("create", "namespace", "quota")
    kubectl.run("apply", "-f", "-", input=QUOTA % ("2", '[{clusterName: aws-dfw, hard: {cpu: "1", memory: 1Gi}}]'))
    env.create(deploy_path("quota"), labelled("web", 4, "quota", {}, cpu="500m"))
    wait_for(lambda: sum(placement(env.binding("deployment-quota-web")).values()) == 4 or None, 30,
             "four replicas of 500m placed under a 2-core quota")
    kubectl.run("scale", "deployment", "web", "-n", "quota", "--replicas=5")
    b = wait_for(lambda: (b := env.binding("deployment-quota-web")) and
                 b["status"].get("phase") == "Unschedulable" and b, 30, "the fifth replica refused")
    assert b["status"]["message"] == ("FederatedResourceQuota quota/team: cpu would be 2500m of 2 overall (0 held "
                                      "by the namespace's other workloads, 2500m asked by this one)"), b["status"]
    assert sum(placement(b).values()) == 4  # what ran keeps running
    wait_for(lambda: sum(env.copies("web", "quota").values()) == 4 or None, 30, "the members to run four")
    # the why is in the decision record too
    hist = json.loads(kubectl.run("get", "--raw", "/api/v1/history/schedules?binding=deployment-quota-web").stdout)
    assert any("FederatedResourceQuota quota/team" in e["result"]["message"] for e in hist["items"]), hist
    # the static assignment is a ResourceQuota on its member
    rq = wait_for(lambda: env.members["aws-dfw"].get("/api/v1/namespaces/quota/resourcequotas/team"), 30,
                  "the assignment's ResourceQuota on aws-dfw",
                  what_else=lambda: [(w["metadata"]["name"], w.get("status")) for w in
                                     env.http.get("/apis/multicluster.io/v1alpha1/works").json()["items"]
                                     if w["spec"]["binding"].startswith("FederatedResourceQuota_")])
    assert rq["spec"]["hard"] == {"cpu": "1", "memory": "1Gi"}
    assert env.members["gcp-sin"].get("/api/v1/namespaces/quota/resourcequotas/team") is None
    kubectl.run("apply", "-f", "-", input=QUOTA % ("3", "[]"))  # room again: the parked binding is retried
    wait_for(lambda: sum(placement(env.binding("deployment-quota-web")).values()) == 5 or None, 30,
             "the fifth replica placed once the quota allows it")

    def status() -> dict[str, Any] | None:
        frq = json.loads(kubectl.run("get", "federatedresourcequotas.policy.karmada.io", "team", "-n", "quota",
                                     "-o", "json").stdout)
        st = frq.get("status") or {}
        return st if st.get("overallUsed", {}).get("cpu") == "2500m" else None

    st = wait_for(status, 30, "the quota's status to count five replicas")
    assert st["overall"] == {"cpu": "3", "memory": "4Gi"} and st["overallUsed"] == {"cpu": "2500m", "memory": "160Mi"}
    assert sum(cores(c["used"]["cpu"]) for c in st["aggregatedStatus"]) == 2.5, st
    wait_for(lambda: env.members["aws-dfw"].get("/api/v1/namespaces/quota/resourcequotas/team") is None or None,
             30, "the ResourceQuota removed with its assignment")


TAINT = """
apiVersion: policy.karmada.io/v1alpha1
kind: ClusterTaintPolicy
metadata: {name: maintenance}
spec:
  targetClusters: {clusterNames: [azure-lhr]}
  addOnConditions: [{conditionType: Ready, operator: In, statusValues: ["%s"]}]
  removeOnConditions: [{conditionType: Ready, operator: In, statusValues: ["%s"]}]
  taints: [{key: example.com/maintenance, value: planned, effect: NoSchedule}]
"""
EVERYWHERE = """
apiVersion: policy.karmada.io/v1alpha1
kind: PropagationPolicy
metadata: {name: everywhere, namespace: taints}
spec:
  resourceSelectors: [{apiVersion: apps/v1, kind: Deployment}]
  placement: {replicaScheduling: {replicaSchedulingType: Duplicated}}
"""


def taints(env: Env, cluster: str) -> list[dict[str, Any]]:
    return list(env.cluster(cluster)["spec"].get("taints") or [])


def test_taint_policy_taints_by_condition_and_no_schedule_keeps_new_workloads_off(fresh: Env,
                                                                                   kubectl: Kubectl) -> None:
    env = fresh
    kubectl.run("apply", "-f", "-", input=TAINT % ("True", "False"))  # a Ready cluster is tainted
    got = wait_for(lambda: [t for t in taints(env, "azure-lhr") if t["key"] == "example.com/maintenance"] or None,
                   20, "the policy's taint on azure-lhr")
    assert got[0]["value"] == "planned" and got[0]["effect"] == "NoSchedule"
    assert not [t for t in taints(env, "aws-dfw") if t["key"] == "example.com/maintenance"]  # not a target
    kubectl.run("create", "namespace", "taints")
    kubectl.run("apply", "-f", "-", input=EVERYWHERE)
    env.create(deploy_path("taints"), labelled("api", 1, "taints", {}))
    b = wait_for(lambda: (b := env.binding("deployment-taints-api")) and placement(b) and b, 30, "api placed")
    assert set(placement(b)) == {"aws-dfw", "gcp-sin"}, placement(b)
    hist = json.loads(kubectl.run("get", "--raw", "/api/v1/history/schedules?binding=deployment-taints-api").stdout)
    why = hist["items"][0]["filters"]["reasons"]["azure-lhr"]
    assert "example.com/maintenance" in why, why
    # deleting the policy would keep the taint (Karmada); its remove-conditions take it off
    kubectl.run("apply", "-f", "-", input=TAINT % ("False", "True"))
    wait_for(lambda: not [t for t in taints(env, "azure-lhr") if t["key"] == "example.com/maintenance"] or None,
             20, "the taint removed on the remove-conditions")
    kubectl.run("delete", "clustertaintpolicies.policy.karmada.io", "maintenance")


AFFINITY = """
apiVersion: policy.karmada.io/v1alpha1
kind: PropagationPolicy
metadata: {name: grouped, namespace: affinity}
spec:
  resourceSelectors: [{apiVersion: apps/v1, kind: Deployment, labelSelector: {matchLabels: {tier: grouped}}}]
  placement:
    workloadAffinity:
      affinity: {groupByLabelKey: app.group}
      antiAffinity: {groupByLabelKey: ha.example.com/replica-set}
    spreadConstraints: [{spreadByField: cluster, maxGroups: 1, minGroups: 1}]
"""


def test_affinity_co_locates_and_anti_affinity_separates(env: Env, kubectl: Kubectl) -> None:
    kubectl.run("create", "namespace", "affinity")
    kubectl.run("apply", "-f", "-", input=AFFINITY)
    got = json.loads(kubectl.run("get", "propagationpolicies.policy.karmada.io", "grouped", "-n", "affinity",
                                 "-o", "json").stdout)
    assert got["spec"]["placement"]["workloadAffinity"]["affinity"] == {"groupByLabelKey": "app.group"}
    ha = "ha.example.com/replica-set"
    for name, labels in (("cart", {"app.group": "shop"}), ("checkout", {"app.group": "shop"}),
                         ("db-a", {ha: "db"}), ("db-b", {ha: "db"})):
        env.create(deploy_path("affinity"), labelled(name, 2, "affinity", {"tier": "grouped", **labels}))

    def placed(name: str) -> dict[str, int] | None:
        return placement(env.binding(f"deployment-affinity-{name}")) or None

    cart, checkout = (wait_for(lambda n=n: placed(n), 30, f"{n} placed") for n in ("cart", "checkout"))
    assert set(cart) == set(checkout), (cart, checkout)
    b = env.binding("deployment-affinity-checkout")
    assert b is not None and b["spec"]["affinityGroups"] == {"affinityGroup": "app.group=shop"}
    db_a, db_b = (wait_for(lambda n=n: placed(n), 30, f"{n} placed") for n in ("db-a", "db-b"))
    assert not set(db_a) & set(db_b), (db_a, db_b)
    wait_for(lambda: all(sum(env.copies(n, "affinity").values()) == 2 for n in ("cart", "checkout", "db-a", "db-b"))
             or None, 30, "every copy running in the members")
