"""Karmada's application failover and WorkloadRebalancer against real (simulated) members, the YAML
applied unchanged with kubectl: a Deployment whose copy in one member stops being available (its
nodes cordoned, its pods gone) is moved to the other cluster after ``tolerationSeconds`` and carries
the state label its policy preserves; a WorkloadRebalancer re-decides its workload, reports per
workload and is deleted after ``ttlSecondsAfterFinished``."""

from __future__ import annotations

from typing import Any

from kubernetes import client as k8s

from tests.kubectl.conftest import Kubectl
from tests.members_e2e.conftest import Env, deploy_path, deployment, wait_for

RESILIENT = """
apiVersion: policy.karmada.io/v1alpha1
kind: PropagationPolicy
metadata: {name: resilient, namespace: appfo}
spec:
  resourceSelectors: [{apiVersion: apps/v1, kind: Deployment, name: web}]
  propagateDeps: true
  placement:
    clusterAffinity: {clusterNames: [aws-dfw, gcp-sin]}
    spreadConstraints: [{spreadByField: cluster, maxGroups: 1, minGroups: 1}]
    replicaScheduling: {replicaSchedulingType: Divided}
  failover:
    application:
      decisionConditions: {tolerationSeconds: 2}
      purgeMode: Immediately
      statePreservation:
        rules:
        - {aliasLabelName: failover.example.io/replicas, jsonPath: "{.replicas}"}
"""


def cordon(member_api: k8s.ApiClient, unschedulable: bool) -> None:
    core = k8s.CoreV1Api(member_api)
    for node in core.list_node(_request_timeout=3).items:
        core.patch_node(node.metadata.name, {"spec": {"unschedulable": unschedulable}}, _request_timeout=3)


def test_an_unhealthy_copy_moves_after_its_toleration_with_the_preserved_label(env: Env, kubectl: Kubectl) -> None:
    kubectl.run("apply", "-f", "-", input=RESILIENT)
    got = env.http.get("/apis/policy.karmada.io/v1alpha1/namespaces/appfo/propagationpolicies/resilient").json()
    assert got["spec"]["failover"]["application"]["statePreservation"]["rules"][0]["jsonPath"] == "{.replicas}"
    env.create(deploy_path("appfo"), deployment("web", 2, namespace="appfo", cpu="50m", memory="32Mi"))
    first = wait_for(lambda: (c := env.copies("web", "appfo")) and len(c) == 1 and next(iter(c)), 40,
                     "the Deployment placed on one cluster")
    other = next(n for n in ("aws-dfw", "gcp-sin") if n != first)
    failed = env.members[first]
    wait_for(lambda: (d := failed.deployment("web", "appfo")) is not None and d.status.available_replicas == 2,
             30, f"the copy in {first} available")
    try:
        cordon(failed.api, True)  # the pods the Deployment makes again find no node: the copy is unavailable
        core = k8s.CoreV1Api(failed.api)
        for pod in core.list_namespaced_pod("appfo", label_selector="app=web", _request_timeout=3).items:
            core.delete_namespaced_pod(pod.metadata.name, "appfo", _request_timeout=3, _preload_content=False)
        moved = wait_for(lambda: (d := env.members[other].deployment("web", "appfo")) is not None and d, 60,
                         f"the workload moved to {other}",
                         what_else=lambda: (env.binding("deployment-appfo-web") or {}).get("status"))
        assert (moved.metadata.labels or {}).get("failover.example.io/replicas") == "2"
        wait_for(lambda: failed.deployment("web", "appfo") is None, 30, f"the old copy purged from {first} at once")
        # the new copy healthy and the old one gone, the move is over: its task goes (Karmada's graceful
        # eviction controller), and the state it preserved stays on the Binding for the copies
        preserved = {"failover.example.io/replicas": "2"}
        binding: dict[str, Any] = wait_for(
            lambda: (b := env.binding("deployment-appfo-web")) and not b["spec"].get("gracefulEvictionTasks") and b,
            30, "the eviction task taken off once the move is over",
            what_else=lambda: (env.binding("deployment-appfo-web") or {}).get("spec"))
        assert binding["spec"]["preservedLabelState"] == preserved
        assert binding["metadata"]["annotations"]["multicluster.io/reschedule-reason"].startswith(
            f"application failover: the copy in {first} unhealthy since")
        assert [t["cluster"] for t in binding["status"]["placement"]] == [other]
        # a change of the workload rewrites the Binding's spec: the preserved label stays
        r = env.http.patch(deploy_path("appfo", "web"), json={"spec": {"replicas": 3}},
                           headers={"Content-Type": "application/merge-patch+json"})
        assert r.status_code == 200, r.text
        wait_for(lambda: env.copies("web", "appfo") == {other: 3}, 30, f"scaled on {other} only")
        rewritten = env.binding("deployment-appfo-web") or {}
        assert rewritten["spec"]["replicas"] == 3 and rewritten["spec"]["preservedLabelState"] == preserved
        labels = env.members[other].deployment("web", "appfo").metadata.labels or {}
        assert labels.get("failover.example.io/replicas") == "2"
    finally:
        cordon(failed.api, False)
        env.delete(deploy_path("appfo", "web"))
        env.delete("/apis/policy.karmada.io/v1alpha1/namespaces/appfo/propagationpolicies/resilient")


REBAL_POLICY = """
apiVersion: policy.karmada.io/v1alpha1
kind: PropagationPolicy
metadata: {name: rebal, namespace: rebal}
spec:
  resourceSelectors: [{apiVersion: apps/v1, kind: Deployment, name: api}]
  placement:
    clusterAffinity: {clusterNames: [aws-dfw, azure-lhr]}
    replicaScheduling: {replicaSchedulingType: Divided}
"""
REBALANCER = """
apiVersion: apps.karmada.io/v1alpha1
kind: WorkloadRebalancer
metadata: {name: rebalance-api}
spec:
  workloads:
  - {apiVersion: apps/v1, kind: Deployment, namespace: rebal, name: api}
  - {apiVersion: apps/v1, kind: Deployment, namespace: rebal, name: missing}
  ttlSecondsAfterFinished: 3
"""
REBALANCERS = "/apis/apps.karmada.io/v1alpha1/workloadrebalancers"


def test_a_workload_rebalancer_redecides_reports_and_expires(env: Env, kubectl: Kubectl) -> None:
    kubectl.run("apply", "-f", "-", input=REBAL_POLICY)
    env.create(deploy_path("rebal"), deployment("api", 2, namespace="rebal", cpu="50m", memory="32Mi"))
    before = wait_for(lambda: (env.binding("deployment-rebal-api") or {}).get("status", {}).get("scheduledTime"),
                      30, "the workload scheduled")
    try:
        assert "rebalance-api" in kubectl.run("apply", "-f", "-", input=REBALANCER).stdout
        rb = wait_for(lambda: (r := env.http.get(f"{REBALANCERS}/rebalance-api")).status_code == 200
                      and (r.json().get("status") or {}).get("finishTime") and r.json(), 20, "the rebalancer finished")
        assert rb["status"]["observedGeneration"] == 1
        assert [(w["workload"]["name"], w["result"], w.get("reason")) for w in rb["status"]["observedWorkloads"]] \
            == [("api", "Successful", None), ("missing", "Failed", "ReferencedBindingNotFound")]
        kubectl.run("get", "workloadrebalancers")  # the kind is served to kubectl (the object may have expired)
        after = wait_for(lambda: (s := (env.binding("deployment-rebal-api") or {}).get("status", {})
                                  .get("scheduledTime")) and s > before and s, 20, "a new decision")
        decisions = env.http.get("/api/v1/decisions", params={"kind": "Deployment", "namespace": "rebal",
                                                                "name": "api", "since": "10m"}).json()["items"]
        assert any((d.get("trigger") or {}).get("reason") == "WorkloadRebalancer rebalance-api" for d in decisions), \
            decisions
        assert after > before
        wait_for(lambda: env.http.get(f"{REBALANCERS}/rebalance-api").status_code == 404, 15,
                 "the rebalancer deleted after ttlSecondsAfterFinished")
        gone = kubectl.run("get", "workloadrebalancer", "rebalance-api", check=False)
        assert gone.returncode != 0 and "NotFound" in gone.stderr
    finally:
        env.delete(f"{REBALANCERS}/rebalance-api")
        env.delete(deploy_path("rebal", "api"))
        env.delete("/apis/policy.karmada.io/v1alpha1/namespaces/rebal/propagationpolicies/rebal")


EVICTABLE = """
apiVersion: policy.karmada.io/v1alpha1
kind: PropagationPolicy
metadata: {name: evictable, namespace: clusterfo}
spec:
  resourceSelectors: [{apiVersion: apps/v1, kind: Deployment, name: web}]
  placement:
    clusterAffinity: {clusterNames: [aws-dfw, gcp-sin]}
    spreadConstraints: [{spreadByField: cluster, maxGroups: 1, minGroups: 1}]
    replicaScheduling: {replicaSchedulingType: Divided}
  failover:
    cluster:
      purgeMode: Directly
      statePreservation:
        rules:
        - {aliasLabelName: failover.example.io/replicas, jsonPath: "{.replicas}"}
"""
TOLERANT = """
apiVersion: policy.karmada.io/v1alpha1
kind: PropagationPolicy
metadata: {name: tolerant, namespace: clusterfo}
spec:
  resourceSelectors: [{apiVersion: apps/v1, kind: Deployment, name: batch}]
  placement:
    clusterAffinity: {clusterNames: [%s]}
    clusterTolerations: [{key: example.com/evacuate, operator: Exists, effect: NoExecute}]
"""
EVACUATE = """
apiVersion: policy.karmada.io/v1alpha1
kind: ClusterTaintPolicy
metadata: {name: evacuate}
spec:
  targetClusters: {clusterNames: [%s]}
  addOnConditions: [{conditionType: Ready, operator: In, statusValues: ["%s"]}]
  removeOnConditions: [{conditionType: Ready, operator: In, statusValues: ["%s"]}]
  taints: [{key: example.com/evacuate, effect: NoExecute}]
"""


def test_a_no_execute_taint_moves_what_does_not_tolerate_it_as_failover_cluster_says(env: Env,
                                                                                      kubectl: Kubectl) -> None:
    """A ClusterTaintPolicy's NoExecute taint evicts a workload that does not tolerate it: its policy's
    ``failover.cluster`` makes the move a TaintManager eviction task (purged Directly, the state label
    preserved); a workload tolerating the taint stays; the task goes when the taint does."""
    kubectl.run("create", "namespace", "clusterfo")
    kubectl.run("apply", "-f", "-", input=EVICTABLE)
    env.create(deploy_path("clusterfo"), deployment("web", 2, namespace="clusterfo", cpu="50m", memory="32Mi"))
    first = wait_for(lambda: (c := env.copies("web", "clusterfo")) and len(c) == 1 and next(iter(c)), 40,
                     "web placed on one cluster")
    other = next(n for n in ("aws-dfw", "gcp-sin") if n != first)
    # the state to preserve is read from the copy's last reported status: wait until it is reported
    wait_for(lambda: any(e.get("cluster") == first and e.get("readyReplicas") == 2 for e in (
        env.binding("deployment-clusterfo-web") or {}).get("status", {}).get("clusters") or []), 40,
        f"web's copy on {first} reported ready")
    kubectl.run("apply", "-f", "-", input=TOLERANT % first)
    env.create(deploy_path("clusterfo"), deployment("batch", 1, namespace="clusterfo", cpu="50m", memory="32Mi"))
    wait_for(lambda: env.copies("batch", "clusterfo") == {first: 1}, 40, f"batch on {first}")
    try:
        kubectl.run("apply", "-f", "-", input=EVACUATE % (first, "True", "False"))
        moved = wait_for(lambda: (d := env.members[other].deployment("web", "clusterfo")) is not None and d, 60,
                         f"web moved to {other}", what_else=lambda: env.binding("deployment-clusterfo-web"))
        assert (moved.metadata.labels or {}).get("failover.example.io/replicas") == "2"
        wait_for(lambda: env.members[first].deployment("web", "clusterfo") is None, 30,
                 f"the old copy purged from {first} at once")
        binding: dict[str, Any] = env.binding("deployment-clusterfo-web") or {}
        task, = binding["spec"]["gracefulEvictionTasks"]
        assert (task["fromCluster"], task["reason"], task["producer"], task["purgeMode"]) == (
            first, "TaintUntolerated", "TaintManager", "Directly"), task
        assert task["preservedLabelState"] == {"failover.example.io/replicas": "2"}
        assert binding["metadata"]["annotations"]["multicluster.io/reschedule-reason"] == \
            f"taint example.com/evacuate:NoExecute on cluster {first} (not tolerated)"
        assert env.copies("batch", "clusterfo") == {first: 1}  # it tolerates the taint: it stays
        decisions = env.http.get("/api/v1/decisions", params={"kind": "Deployment", "namespace": "clusterfo",
                                                                "name": "web"}).json()["items"]
        assert any(d["type"] == "Eviction" for d in decisions), decisions
        kubectl.run("apply", "-f", "-", input=EVACUATE % (first, "False", "True"))  # the taint goes
        wait_for(lambda: not (env.binding("deployment-clusterfo-web") or {}).get("spec", {}).get(
            "gracefulEvictionTasks"), 30, "the eviction task released with the taint")
    finally:
        kubectl.run("apply", "-f", "-", input=EVACUATE % (first, "False", "True"))
        wait_for(lambda: not [t for t in env.cluster(first)["spec"].get("taints") or []
                              if t["key"] == "example.com/evacuate"] or None, 20, "the taint removed")
        kubectl.run("delete", "clustertaintpolicies.policy.karmada.io", "evacuate")
        for name in ("web", "batch"):
            env.delete(deploy_path("clusterfo", name))
        for name in ("evictable", "tolerant"):
            env.delete(f"/apis/policy.karmada.io/v1alpha1/namespaces/clusterfo/propagationpolicies/{name}")
