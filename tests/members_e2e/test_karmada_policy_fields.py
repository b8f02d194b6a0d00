"""Karmada propagation-policy fields acted on against real (simulated) members, the policies applied
unchanged with kubectl: ``conflictResolution`` (Abort leaves a member's own Deployment alone,
Overwrite adopts it), ``suspension`` (dispatching stops and resumes, for all clusters or named
ones), ``dependentOverrides``, ``schedulePriority`` (a PriorityClass's value orders the queue),
``activationPreference: Lazy``, and a Pod propagated and listed with ``kubectl get pods``."""

from __future__ import annotations

from typing import Any

import pytest
import yaml
from kubernetes import client as k8s
from kubernetes.client.exceptions import ApiException

from tests.kubectl.conftest import Kubectl
from tests.members_e2e.conftest import Env, deploy_path, deployment, wait_for

PP = "/apis/policy.karmada.io/v1alpha1/namespaces/{ns}/propagationpolicies/{name}"
WORKS = "/apis/multicluster.io/v1alpha1/works"


def works_of(env: Env, binding: str) -> list[dict[str, Any]]:
    items = env.http.get(WORKS).json()["items"]
    return [w for w in items if w["spec"]["binding"] == binding]


def merge(env: Env, path: str, patch: dict[str, Any]) -> None:
    r = env.http.patch(path, json=patch, headers={"Content-Type": "application/merge-patch+json"})
    assert r.status_code == 200, r.text


def read_back_as_written(env: Env, text: str) -> None:
    """Every document is stored as written: its spec reads back unchanged."""
    for doc in yaml.safe_load_all(text):
        ns = doc["metadata"].get("namespace")
        group, _, version = doc["apiVersion"].rpartition("/")
        plural = {"PropagationPolicy": "propagationpolicies", "OverridePolicy": "overridepolicies",
                  "PriorityClass": "priorityclasses", "Pod": "pods"}[doc["kind"]]
        base = f"/apis/{group}/{version}" if group else f"/api/{version}"
        path = f"{base}/namespaces/{ns}/{plural}/{doc['metadata']['name']}" if ns else \
            f"{base}/{plural}/{doc['metadata']['name']}"
        got = env.http.get(path).json()
        for k, v in doc.items():
            if k != "metadata":
                assert got[k] == v, (path, k, got[k], v)


LEGACY = """
apiVersion: policy.karmada.io/v1alpha1
kind: PropagationPolicy
metadata: {name: legacy, namespace: legacy}
spec:
  resourceSelectors: [{apiVersion: apps/v1, kind: Deployment, name: old}]
  placement:
    clusterAffinity: {clusterNames: [aws-dfw]}
    replicaScheduling: {replicaSchedulingType: Duplicated}
"""


def test_conflict_abort_leaves_the_members_object_and_overwrite_adopts_it(env: Env, kubectl: Kubectl) -> None:
    dfw = env.members["aws-dfw"]
    core, apps = k8s.CoreV1Api(dfw.api), k8s.AppsV1Api(dfw.api)
    core.create_namespace({"metadata": {"name": "legacy"}})
    apps.create_namespaced_deployment("legacy", deployment("old", 1, namespace="legacy", image="nginx:1.24"))
    kubectl.run("apply", "-f", "-", input=LEGACY)
    env.create(deploy_path("legacy"), deployment("old", 3, namespace="legacy", cpu="50m", memory="32Mi"))
    work = wait_for(lambda: next((w for w in works_of(env, "deployment-legacy-old")
                                  if "not managed by DRO-DS" in ((w.get("status") or {}).get("message") or "")),
                                 None), 30, "the Work to report the conflict (Abort)")
    assert not work["status"].get("applied")
    mine = dfw.deployment("old", "legacy")
    assert mine.spec.replicas == 1 and mine.spec.template.spec.containers[0].image == "nginx:1.24"
    assert "multicluster.io/managed-by" not in (mine.metadata.labels or {})

    kubectl.run("apply", "-f", "-", input=LEGACY.replace("spec:\n", "spec:\n  conflictResolution: Overwrite\n", 1))
    read_back_as_written(env, LEGACY.replace("spec:\n", "spec:\n  conflictResolution: Overwrite\n", 1))
    adopted = wait_for(lambda: (d := dfw.deployment("old", "legacy")) is not None
                       and (d.metadata.labels or {}).get("multicluster.io/managed-by") == "drods" and d,
                       30, "the member's Deployment adopted (Overwrite)")
    assert adopted.spec.replicas == 3 and adopted.spec.template.spec.containers[0].image == "nginx:1.25"
    assert adopted.metadata.annotations["multicluster.io/conflict-resolution"] == "overwrite"
    env.delete(deploy_path("legacy", "old"))  # now DRO-DS's: it leaves with the template
    wait_for(lambda: dfw.deployment("old", "legacy") is None, 30, "the adopted copy removed with the template")
    env.delete(PP.format(ns="legacy", name="legacy"))


PAUSED = """
apiVersion: policy.karmada.io/v1alpha1
kind: PropagationPolicy
metadata: {name: paused, namespace: paused}
spec:
  resourceSelectors: [{apiVersion: apps/v1, kind: Deployment, name: api}]
  placement:
    clusterAffinity: {clusterNames: [gcp-sin, azure-lhr]}
    replicaScheduling: {replicaSchedulingType: Duplicated}
  suspension: {dispatching: true}
"""


def test_suspension_stops_dispatching_and_resuming_delivers(env: Env, kubectl: Kubectl) -> None:
    kubectl.run("apply", "-f", "-", input=PAUSED)
    read_back_as_written(env, PAUSED)
    env.create(deploy_path("paused"), deployment("api", 2, namespace="paused", cpu="50m", memory="32Mi"))
    works = wait_for(lambda: (ws := works_of(env, "deployment-paused-api")) and len(ws) == 2 and ws,
                     30, "the Works written while dispatching is suspended")
    assert all(w["spec"]["suspendDispatching"] is True and not (w.get("status") or {}).get("applied")
               for w in works)
    assert env.copies("api", "paused") == {}
    # resume everywhere: both members get it
    merge(env, PP.format(ns="paused", name="paused"), {"spec": {"suspension": None}})
    wait_for(lambda: env.copies("api", "paused") == {"gcp-sin": 2, "azure-lhr": 2}, 30, "dispatched once resumed")
    # suspend one cluster, then scale: only the other member follows
    merge(env, PP.format(ns="paused", name="paused"),
          {"spec": {"suspension": {"dispatchingOnClusters": {"clusterNames": ["gcp-sin"]}}}})
    wait_for(lambda: [w["spec"]["cluster"] for w in works_of(env, "deployment-paused-api")
                      if w["spec"].get("suspendDispatching")] == ["gcp-sin"], 30, "gcp-sin's Work suspended")
    merge(env, deploy_path("paused", "api"), {"spec": {"replicas": 5}})
    wait_for(lambda: env.copies("api", "paused") == {"gcp-sin": 2, "azure-lhr": 5}, 30, "only azure-lhr scaled")
    sin = next(w for w in works_of(env, "deployment-paused-api") if w["spec"]["cluster"] == "gcp-sin")
    assert sin["spec"]["manifests"][-1]["spec"]["replicas"] == 5  # the Work holds it; it is not applied
    merge(env, PP.format(ns="paused", name="paused"), {"spec": {"suspension": None}})
    wait_for(lambda: env.copies("api", "paused") == {"gcp-sin": 5, "azure-lhr": 5}, 30, "gcp-sin resumed")
    env.delete(deploy_path("paused", "api"))
    wait_for(lambda: env.copies("api", "paused") == {}, 30, "copies removed")
    env.delete(PP.format(ns="paused", name="paused"))


GATED = """
apiVersion: scheduling.k8s.io/v1
kind: PriorityClass
metadata: {name: batch-high}
value: 100000
globalDefault: false
description: batch jobs that go first
---
apiVersion: policy.karmada.io/v1alpha1
kind: PropagationPolicy
metadata: {name: gated, namespace: gated}
spec:
  resourceSelectors: [{apiVersion: apps/v1, kind: Deployment, name: etl}]
  dependentOverrides: [etl-registry]
  activationPreference: Lazy
  schedulePriority: {priorityClassSource: KubePriorityClass, priorityClassName: batch-high}
  placement:
    clusterAffinity: {clusterNames: [aws-dfw]}
"""
GATE = """
apiVersion: policy.karmada.io/v1alpha1
kind: OverridePolicy
metadata: {name: etl-registry, namespace: gated}
spec:
  overrideRules:
    - targetCluster:
        fieldSelector:
          matchExpressions: [{key: provider, operator: In, values: [aws]}]
      overriders:
        imageOverrider: [{component: Registry, operator: replace, value: mirror.example}]
"""


def test_dependent_overrides_schedule_priority_and_lazy_activation(env: Env, kubectl: Kubectl) -> None:
    kubectl.run("apply", "-f", "-", input=GATED)
    read_back_as_written(env, GATED)
    env.create(deploy_path("gated"), deployment("etl", 2, namespace="gated", cpu="50m", memory="32Mi"))
    # no Binding while the OverridePolicy it depends on is missing (checked once a later workload
    # under an ungated policy has its Binding: the detector has been through this one)
    probe_policy = (GATED.split("---")[1].replace("name: etl}", "name: probe}")
                    .replace("{name: gated, namespace", "{name: probe, namespace")
                    .replace("  dependentOverrides: [etl-registry]\n", "")
                    .replace("  activationPreference: Lazy\n", ""))
    kubectl.run("apply", "-f", "-", input=probe_policy)
    env.create(deploy_path("gated"), deployment("probe", 1, namespace="gated", cpu="50m", memory="32Mi"))
    wait_for(lambda: env.binding("deployment-gated-probe"), 30, "the ungated workload's Binding")
    assert env.binding("deployment-gated-etl") is None
    kubectl.run("apply", "-f", "-", input=GATE)
    b = wait_for(lambda: env.binding("deployment-gated-etl"), 30, "the Binding once the override exists")
    assert b["spec"]["priority"] == 100000  # the PriorityClass's value: the scheduling queue's order
    copy = wait_for(lambda: env.members["aws-dfw"].deployment("etl", "gated"), 30, "the copy on aws-dfw")
    assert copy.spec.template.spec.containers[0].image == "mirror.example/nginx:1.25"  # fieldSelector: aws
    # Lazy: a policy change waits for the workload's own next change (checked once a later change of
    # the eager probe policy has reached its Binding)
    merge(env, PP.format(ns="gated", name="gated"),
          {"spec": {"placement": {"clusterAffinity": {"clusterNames": ["gcp-sin"]}}}})
    merge(env, PP.format(ns="gated", name="probe"),
          {"spec": {"placement": {"clusterAffinity": {"clusterNames": ["gcp-sin"]}}}})
    wait_for(lambda: (env.binding("deployment-gated-probe") or {})["spec"]["placement"]["clusterAffinity"]
             ["clusterNames"] == ["gcp-sin"], 30, "the eager policy's change applied")
    held = env.binding("deployment-gated-etl")
    assert held is not None and held["spec"]["placement"]["clusterAffinity"]["clusterNames"] == ["aws-dfw"]
    merge(env, deploy_path("gated", "etl"), {"metadata": {"labels": {"rollout": "now"}}})
    wait_for(lambda: (env.binding("deployment-gated-etl") or {})["spec"]["placement"]["clusterAffinity"]
             ["clusterNames"] == ["gcp-sin"], 30, "the policy change applied with the workload's change")
    wait_for(lambda: env.copies("etl", "gated") == {"gcp-sin": 2}, 30, "moved to gcp-sin")
    for name in ("etl", "probe"):
        env.delete(deploy_path("gated", name))
    for name in ("gated", "probe"):
        env.delete(PP.format(ns="gated", name=name))
    env.delete("/apis/policy.karmada.io/v1alpha1/namespaces/gated/overridepolicies/etl-registry")
    env.delete("/apis/scheduling.k8s.io/v1/priorityclasses/batch-high")


POD = """
apiVersion: v1
kind: Pod
metadata: {name: probe-pod, namespace: pods, labels: {app: probe}}
spec:
  containers: [{name: main, image: busybox:1.36, command: [sleep, "3600"]}]
---
apiVersion: policy.karmada.io/v1alpha1
kind: PropagationPolicy
metadata: {name: pods, namespace: pods}
spec:
  resourceSelectors: [{apiVersion: v1, kind: Pod}]
  placement:
    clusterAffinity: {clusterNames: [azure-lhr]}
"""


def test_a_pod_is_propagated_and_listed_by_kubectl(env: Env, kubectl: Kubectl) -> None:
    kubectl.run("apply", "-f", "-", input=POD)
    read_back_as_written(env, POD)
    lhr = k8s.CoreV1Api(env.members["azure-lhr"].api)

    def on_member() -> Any:
        try:
            return lhr.read_namespaced_pod("probe-pod", "pods", _request_timeout=3)
        except ApiException as e:
            if e.status == 404:
                return None
            raise

    pod = wait_for(on_member, 30, "the Pod on azure-lhr")
    assert pod.spec.containers[0].image == "busybox:1.36"
    # kubectl's usual columns, from the member copy's status aggregated onto the control plane's Pod
    def running() -> list[str] | None:
        rows = [line.split() for line in kubectl.run("get", "pods", "-n", "pods").stdout.splitlines()]
        return rows[1] if len(rows) == 2 and rows[1][:3] == ["probe-pod", "1/1", "Running"] else None

    header = kubectl.run("get", "pods", "-n", "pods").stdout.splitlines()[0].split()
    assert header == ["NAME", "READY", "STATUS", "RESTARTS", "AGE"]
    assert wait_for(running, 30, "probe-pod listed 1/1 Running")[3] == "0"
    got = env.http.get("/api/v1/namespaces/pods/pods/probe-pod").json()
    assert "clusters" not in got["status"]  # PodStatus' own fields: the copy's cluster and IP are the Binding's
    copy = wait_for(lambda: next((e for e in (env.binding("pod-pods-probe-pod") or {}).get("status", {})
                                  .get("clusters") or [] if e.get("podIP")), None), 10, "the copy's pod IP")
    assert copy["cluster"] == "azure-lhr" and copy["phase"] == "Running"
    kubectl.run("delete", "-f", "-", input=POD)
    wait_for(lambda: on_member() is None, 30, "the Pod removed from azure-lhr")


@pytest.mark.parametrize("doc, why", [
    ("spec:\n  resourceSelectors: [{apiVersion: apps/v1, kind: Deployment}]\n  associatoin: true\n", "associatoin"),
    ("spec:\n  resourceSelectors: [{apiVersion: apps/v1, kind: Deployment}]\n  preemption: Sometimes\n",
     "preemption"),
])
def test_refused_fields_change_nothing(env: Env, doc: str, why: str) -> None:
    body = "apiVersion: policy.karmada.io/v1alpha1\nkind: PropagationPolicy\nmetadata: {name: bad, namespace: x}\n"
    r = env.http.post("/apis/policy.karmada.io/v1alpha1/namespaces/x/propagationpolicies",
                      content=(body + doc).encode(), headers={"Content-Type": "application/yaml"})
    assert r.status_code == 422 and why in r.text
    assert env.http.get(PP.format(ns="x", name="bad")).status_code == 404


PRESERVED = """
apiVersion: policy.karmada.io/v1alpha1
kind: PropagationPolicy
metadata: {name: keep, namespace: keep}
spec:
  resourceSelectors: [{apiVersion: apps/v1, kind: Deployment}]
  preserveResourcesOnDeletion: true
  placement:
    clusterAffinity: {clusterNames: [aws-dfw]}
"""


def test_preserve_resources_on_deletion_keeps_the_members_copies_released(env: Env, kubectl: Kubectl) -> None:
    """Karmada's ``preserveResourcesOnDeletion``: deleting the template keeps the member's copy (and its
    dependent) running, no longer DRO-DS's — its ownership labels and annotations gone, so nothing
    prunes it later; without the field the copy goes with the template."""
    dfw = env.members["aws-dfw"]
    kubectl.run("apply", "-f", "-", input=PRESERVED)
    env.create("/api/v1/namespaces/keep/configmaps", {"metadata": {"name": "web-conf", "namespace": "keep"},
                                                      "data": {"a": "1"}})
    web = deployment("web", 2, namespace="keep", cpu="50m", memory="32Mi")
    web["spec"]["template"]["spec"]["volumes"] = [{"name": "conf", "configMap": {"name": "web-conf"}}]
    env.create(deploy_path("keep"), web)
    wait_for(lambda: env.copies("web", "keep") == {"aws-dfw": 2}, 30, "web on aws-dfw")
    assert (dfw.deployment("web", "keep").metadata.annotations or {})["multicluster.io/preserve-on-deletion"] == "true"
    env.delete(deploy_path("keep", "web"))
    wait_for(lambda: env.binding("deployment-keep-web") is None, 30, "the Binding gone with its template")
    released = wait_for(lambda: (d := dfw.deployment("web", "keep")) is not None
                        and "multicluster.io/managed-by" not in (d.metadata.labels or {}) and d,
                        30, "the member's copy released")
    assert released.spec.replicas == 2 and not any(
        k.startswith("multicluster.io/") for k in (released.metadata.annotations or {}))
    conf = dfw.get("/api/v1/namespaces/keep/configmaps/web-conf")
    assert conf is not None and "multicluster.io/managed-by" not in (conf["metadata"].get("labels") or {})

    # the same without the field: the copy goes with its template
    merge(env, PP.format(ns="keep", name="keep"), {"spec": {"preserveResourcesOnDeletion": None}})
    env.create(deploy_path("keep"), deployment("gone", 1, namespace="keep", cpu="50m", memory="32Mi"))
    wait_for(lambda: env.copies("gone", "keep") == {"aws-dfw": 1}, 30, "gone on aws-dfw")
    env.delete(deploy_path("keep", "gone"))
    wait_for(lambda: dfw.deployment("gone", "keep") is None, 30, "the copy deleted with its template")
    assert dfw.deployment("web", "keep") is not None  # the released one stays the member's
    env.delete(PP.format(ns="keep", name="keep"))


NAMESPACED = """
apiVersion: v1
kind: Namespace
metadata: {name: team-a}
---
apiVersion: policy.karmada.io/v1alpha1
kind: ClusterPropagationPolicy
metadata: {name: team-a-ns}
spec:
  resourceSelectors: [{apiVersion: v1, kind: Namespace, name: team-a}]
  placement:
    clusterAffinity: {clusterNames: [aws-dfw]}
---
apiVersion: policy.karmada.io/v1alpha1
kind: ClusterOverridePolicy
metadata: {name: team-a-network}
spec:
  resourceSelectors: [{apiVersion: v1, kind: Namespace, name: team-a}]
  overrideRules:
    - targetCluster: {clusterNames: [aws-dfw]}
      overriders:
        labelsOverrider: [{operator: add, value: {topology.istio.io/network: network1}}]
"""


def test_a_cluster_propagation_policy_places_a_namespace_with_its_overrides(env: Env, kubectl: Kubectl) -> None:
    """Karmada's namespace management: a ClusterPropagationPolicy selecting a Namespace puts it (and a
    ClusterOverridePolicy's labels) on its clusters only; the members' own namespaces are never placed."""
    kubectl.run("apply", "-f", "-", input=NAMESPACED)
    dfw = env.members["aws-dfw"]
    ns = wait_for(lambda: (n := dfw.get("/api/v1/namespaces/team-a")) is not None and (n["metadata"].get(
        "labels") or {}).get("topology.istio.io/network") == "network1" and n, 30, "team-a on aws-dfw, labelled")
    assert ns["metadata"]["labels"]["multicluster.io/managed-by"] == "drods"
    assert all(m.get("/api/v1/namespaces/team-a") is None for n, m in env.members.items() if n != "aws-dfw")
    b = env.binding("namespace--team-a")
    assert b is not None and [t["cluster"] for t in b["status"]["placement"]] == ["aws-dfw"]
    # a policy selecting every Namespace leaves the members' own alone
    kubectl.run("apply", "-f", "-", input=NAMESPACED.split("---")[1].replace("name: team-a}]", "}]").replace(
        "name: team-a-ns", "name: every-ns"))
    wait_for(lambda: (env.binding("namespace--team-a") or {}).get("spec", {}).get("policyRef") is not None, 10,
             "team-a still bound")
    assert env.binding("namespace--default") is None and env.binding("namespace--kube-system") is None
    kubectl.run("delete", "clusterpropagationpolicies.policy.karmada.io", "every-ns", "team-a-ns")
    kubectl.run("delete", "clusteroverridepolicies.policy.karmada.io", "team-a-network")
