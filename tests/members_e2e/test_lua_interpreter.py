"""Karmada's Lua resource interpretation, as a Karmada user does it with kubectl only: a
CustomResourceDefinition, a ``config.karmada.io`` ResourceInterpreterCustomization whose scripts
say where the kind keeps its replicas (GetReplicas), how a member's share is written
(ReviseReplica), which objects follow it (GetDependencies), what a member's operator set survives a
new apply (Retain), when a copy is healthy (InterpretHealth) and how the members' statuses add up
(AggregateStatus), and a Karmada PropagationPolicy dividing a custom resource across two sims. A
script that does not compile is refused and nothing is stored."""

from __future__ import annotations

import subprocess
from typing import Any

import yaml
from kubernetes.dynamic import DynamicClient

from tests.kubectl.conftest import Kubectl
from tests.members_e2e.conftest import Env, wait_for

NS = "serving"
SERVERS = f"/apis/serving.example.org/v1/namespaces/{NS}/modelservers"
RIC = "/apis/config.karmada.io/v1alpha1/resourceinterpretercustomizations"
BINDING = f"modelserver-{NS}-llm"

DEFINITION = """
apiVersion: v1
kind: Namespace
metadata: {name: serving}
---
apiVersion: v1
kind: Namespace
metadata: {name: registry}
---
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {name: modelservers.serving.example.org}
spec:
  group: serving.example.org
  scope: Namespaced
  names: {plural: modelservers, singular: modelserver, kind: ModelServer}
  versions:
    - name: v1
      served: true
      storage: true
      subresources: {status: {}}
      schema:
        openAPIV3Schema:
          type: object
          properties:
            spec:
              type: object
              properties:
                paused: {type: boolean}
                fleet:
                  type: object
                  properties:
                    size: {type: integer, minimum: 0}
                    template: {type: object, x-kubernetes-preserve-unknown-fields: true}
            status: {type: object, x-kubernetes-preserve-unknown-fields: true}
"""

CUSTOMIZATION = """
apiVersion: config.karmada.io/v1alpha1
kind: ResourceInterpreterCustomization
metadata: {name: modelserver}
spec:
  target: {apiVersion: serving.example.org/v1, kind: ModelServer}
  customizations:
    replicaResource:
      luaScript: |
        local kube = require("kube")
        function GetReplicas(obj)
          return obj.spec.fleet.size, kube.accuratePodRequirements(obj.spec.fleet.template)
        end
    replicaRevision:
      luaScript: |
        function ReviseReplica(obj, desiredReplica)
          obj.spec.fleet.size = desiredReplica
          if obj.metadata.annotations == nil then obj.metadata.annotations = {} end
          obj.metadata.annotations["serving.example.org/share"] = tostring(desiredReplica)
          return obj
        end
    retention:
      luaScript: |
        function Retain(desiredObj, observedObj)
          desiredObj.spec.paused = observedObj.spec.paused
          return desiredObj
        end
    dependencyInterpretation:
      luaScript: |
        local kube = require("kube")
        function GetDependencies(desiredObj)
          local deps = kube.getPodDependencies(desiredObj.spec.fleet.template, desiredObj.metadata.namespace)
          table.insert(deps, {apiVersion = "v1", kind = "Secret", namespace = "registry", name = "pull-token"})
          table.insert(deps, {apiVersion = "v1", kind = "ConfigMap", namespace = "registry",
                              labelSelector = {matchLabels = {["serving.example.org/model"] = "llm"}}})
          return deps
        end
    healthInterpretation:
      luaScript: |
        function InterpretHealth(observedObj)
          return observedObj.status ~= nil and observedObj.status.serving == observedObj.spec.fleet.size
        end
    statusAggregation:
      luaScript: |
        function AggregateStatus(desiredObj, statusItems)
          local serving, healthy = 0, 0
          for i = 1, #statusItems do
            local st = statusItems[i].status
            if st ~= nil and st.serving ~= nil then serving = serving + st.serving end
            if statusItems[i].health == "Healthy" then healthy = healthy + 1 end
          end
          desiredObj.status = {serving = serving, healthyClusters = healthy}
          return desiredObj
        end
"""

SERVER = """
apiVersion: v1
kind: ConfigMap
metadata: {name: llm-weights, namespace: serving}
data: {model: llama}
---
apiVersion: v1
kind: Secret
metadata: {name: pull-token, namespace: registry}
stringData: {token: s3cret}
---
apiVersion: v1
kind: ConfigMap
metadata: {name: llm-tokenizer, namespace: registry, labels: {serving.example.org/model: llm}}
data: {vocab: "32000"}
---
apiVersion: v1
kind: ConfigMap
metadata: {name: other-tokenizer, namespace: registry, labels: {serving.example.org/model: other}}
data: {vocab: "50000"}
---
apiVersion: serving.example.org/v1
kind: ModelServer
metadata: {name: llm, namespace: serving}
spec:
  paused: false
  fleet:
    size: 6
    template:
      spec:
        containers:
          - name: server
            image: llm:1.0
            resources: {requests: {cpu: 250m, memory: 512Mi}}
        volumes: [{name: weights, configMap: {name: llm-weights}}]
"""

POLICY = """
apiVersion: policy.karmada.io/v1alpha1
kind: PropagationPolicy
metadata: {name: llm, namespace: serving}
spec:
  resourceSelectors: [{apiVersion: serving.example.org/v1, kind: ModelServer, name: llm}]
  placement:
    clusterAffinity: {clusterNames: [aws-dfw, gcp-sin]}
    replicaScheduling:
      replicaSchedulingType: Divided
      replicaDivisionPreference: Weighted
      weightPreference:
        staticWeightList:
          - {targetCluster: {clusterNames: [aws-dfw]}, weight: 1}
          - {targetCluster: {clusterNames: [gcp-sin]}, weight: 2}
"""


def apply(kubectl: Kubectl, text: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    return kubectl.run("apply", "-f", "-", input=text, check=check)


def copies(env: Env) -> dict[str, dict[str, Any]]:
    return {n: c for n, m in env.members.items() if (c := m.get(f"{SERVERS}/llm")) is not None}


def test_a_lua_customization_divides_a_custom_resource_and_revises_each_share(env: Env, kubectl: Kubectl) -> None:
    apply(kubectl, DEFINITION)
    kubectl.run("wait", "--for", "condition=established", "--timeout=10s", "crd/modelservers.serving.example.org")
    # a script that does not compile: refused with the reason, nothing stored
    broken = CUSTOMIZATION.replace("return obj.spec.fleet.size,", "return obj.spec.fleet.size +,")
    bad = apply(kubectl, broken, check=False)
    assert bad.returncode != 0 and "replicaResource.luaScript: GetReplicas: does not compile" in bad.stderr, bad.stderr
    assert env.http.get(f"{RIC}/modelserver").status_code == 404
    # the customization as written, read back as written (kubectl names the group: two kinds share the name)
    apply(kubectl, CUSTOMIZATION)
    got = yaml.safe_load(kubectl.run("get", "resourceinterpretercustomizations.config.karmada.io", "modelserver",
                                     "-o", "yaml").stdout)
    assert got["apiVersion"] == "config.karmada.io/v1alpha1" and got["spec"] == yaml.safe_load(CUSTOMIZATION)["spec"]
    apply(kubectl, SERVER)
    apply(kubectl, POLICY)

    b = wait_for(lambda: (x := env.binding(BINDING)) and (x.get("status") or {}).get("phase") in (
        "Propagated", "Running") and x, 30, "the model server's binding propagated",
        what_else=lambda: env.binding(BINDING))
    # GetReplicas: the count at spec.fleet.size and one replica's requests from accuratePodRequirements
    assert b["spec"]["replicas"] == 6 and b["spec"]["resources"] == {"cpu": 0.25, "memory": 0.5}
    placed = {t["cluster"]: t["replicas"] for t in b["status"]["placement"] if t["replicas"]}
    assert placed == {"aws-dfw": 2, "gcp-sin": 4}, placed
    # ReviseReplica: each member's copy has its share where (and as) the script writes it
    held = wait_for(lambda: c if set(c := copies(env)) == set(placed) else None, 15, "a copy in each cluster",
                    what_else=lambda: copies(env))
    for cluster, share in placed.items():
        assert held[cluster]["spec"]["fleet"]["size"] == share
        assert held[cluster]["metadata"]["annotations"]["serving.example.org/share"] == str(share)
    # GetDependencies: the ConfigMap the pod template mounts, the Secret the script names in another
    # namespace and the ConfigMaps its label selector matches there follow the server to exactly its clusters
    followers = [f"/api/v1/namespaces/{NS}/configmaps/llm-weights", "/api/v1/namespaces/registry/secrets/pull-token",
                 "/api/v1/namespaces/registry/configmaps/llm-tokenizer"]
    for cluster, member in env.members.items():
        has = [member.get(path) is not None for path in followers]
        assert has == [cluster in placed] * 3, (cluster, has)
        assert member.get("/api/v1/namespaces/registry/configmaps/other-tokenizer") is None
    # one the selector matches that is created later follows as well
    apply(kubectl, "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: llm-adapter, namespace: registry, labels: "
                   "{serving.example.org/model: llm}}\ndata: {rank: '16'}\n")
    wait_for(lambda: all(env.members[c].get("/api/v1/namespaces/registry/configmaps/llm-adapter") for c in placed),
             15, "the later ConfigMap in each cluster of the server")

    # InterpretHealth and AggregateStatus: what the members' operators report adds up on the template
    for cluster, share in placed.items():
        DynamicClient(env.members[cluster].api).request(
            "patch", f"{SERVERS}/llm/status", body={"status": {"serving": share}},
            content_type="application/merge-patch+json")

    def aggregated() -> dict[str, Any] | None:
        st = env.http.get(f"{SERVERS}/llm").json().get("status") or {}
        return st if st == {"serving": 6, "healthyClusters": 2} else None

    wait_for(aggregated, 15, "the scripted aggregate", what_else=lambda: env.http.get(f"{SERVERS}/llm").json())
    health = {e["cluster"]: e.get("health") for e in (env.binding(BINDING) or {})["status"]["clusters"]}
    assert health == {"aws-dfw": "Healthy", "gcp-sin": "Healthy"}

    # Retain: a member's operator pauses its copy; the next apply (the template grows to 9) revises
    # both shares and keeps that member's pause (without Retain the template's `paused: false` wins)
    DynamicClient(env.members["aws-dfw"].api).request(
        "patch", f"{SERVERS}/llm", body={"spec": {"paused": True}}, content_type="application/merge-patch+json")
    apply(kubectl, SERVER.replace("size: 6", "size: 9"))

    def revised() -> dict[str, dict[str, Any]] | None:
        c = copies(env)
        return c if {n: o["spec"]["fleet"]["size"] for n, o in c.items()} == {"aws-dfw": 3, "gcp-sin": 6} else None

    held = wait_for(revised, 15, "the new shares", what_else=lambda: copies(env))
    assert held["aws-dfw"]["spec"]["paused"] is True and held["gcp-sin"]["spec"]["paused"] is False
