"""A policy that is valid but asks for what it will not get is stored, and kubectl prints why (the API
server's ``Warning`` headers): a namespaced PropagationPolicy selecting another namespace matched
nothing, and a ClusterPropagationPolicy selecting a CustomResourceDefinition did nothing, in silence."""

from __future__ import annotations

from tests.kubectl.conftest import Kubectl

ELSEWHERE = """
apiVersion: policy.karmada.io/v1alpha1
kind: PropagationPolicy
metadata: {name: elsewhere, namespace: warn-a}
spec:
  resourceSelectors: [{apiVersion: apps/v1, kind: Deployment, namespace: default, name: web}]
  placement: {clusterAffinity: {clusterNames: [m1]}}
"""
CRDS = """
apiVersion: policy.karmada.io/v1alpha1
kind: ClusterPropagationPolicy
metadata: {name: crds}
spec:
  resourceSelectors: [{apiVersion: apiextensions.k8s.io/v1, kind: CustomResourceDefinition, name: widgets.example.io}]
  placement: {clusterAffinity: {clusterNames: [m1]}}
"""
CLUSTER_SCOPED = """
apiVersion: policy.karmada.io/v1alpha1
kind: PropagationPolicy
metadata: {name: roles, namespace: warn-a}
spec:
  resourceSelectors: [{apiVersion: rbac.authorization.k8s.io/v1, kind: ClusterRole, name: reader}]
  placement:
    clusterAffinity: {clusterNames: [m1, m2]}
    replicaScheduling:
      replicaSchedulingType: Divided
      weightPreference:
        dynamicWeight: AvailableReplicas
        staticWeightList: [{targetCluster: {clusterNames: [m1]}, weight: 1}]
"""
PLAIN = """
apiVersion: policy.karmada.io/v1alpha1
kind: PropagationPolicy
metadata: {name: plain, namespace: warn-a}
spec:
  resourceSelectors: [{apiVersion: apps/v1, kind: Deployment, name: web}]
  placement: {clusterAffinity: {clusterNames: [m1]}}
"""


def test_kubectl_prints_what_a_stored_policy_will_not_do(kubectl: Kubectl) -> None:
    kubectl.run("create", "namespace", "warn-a")
    done = kubectl.run("apply", "-f", "-", input=ELSEWHERE)
    assert "propagationpolicy.policy.karmada.io/elsewhere created" in done.stdout
    assert "Warning: spec.resourceSelectors[0].namespace: default is not the policy's namespace warn-a" \
        in done.stderr, done.stderr
    done = kubectl.run("apply", "-f", "-", input=CRDS)
    assert "Warning: spec.resourceSelectors[0]: a CustomResourceDefinition is not placed by a policy" \
        in done.stderr, done.stderr
    done = kubectl.run("apply", "-f", "-", input=CLUSTER_SCOPED)
    assert "Warning: spec.resourceSelectors[0]: ClusterRole is cluster-scoped" in done.stderr, done.stderr
    assert "Warning: spec.placement.replicaScheduling.weightPreference: dynamicWeight is set, so the " \
        "staticWeightList is ignored" in done.stderr, done.stderr
    done = kubectl.run("apply", "-f", "-", input=PLAIN)  # nothing to say
    assert "Warning" not in done.stderr and "created" in done.stdout, done.stderr
    done = kubectl.run("label", "propagationpolicy.policy.karmada.io", "elsewhere", "-n", "warn-a", "team=a")
    assert "Warning: spec.resourceSelectors[0].namespace" in done.stderr, done.stderr  # a patch says it again
    kubectl.run("delete", "propagationpolicy.policy.karmada.io", "elsewhere", "plain", "roles", "-n", "warn-a")
    kubectl.run("delete", "clusterpropagationpolicy.policy.karmada.io", "crds")


RIC = """
apiVersion: config.karmada.io/v1alpha1
kind: ResourceInterpreterCustomization
metadata: {name: warn-widgets}
spec:
  target: {apiVersion: example.io/v1, kind: Widget}
  customizations:
    healthInterpretation: {luaScript: "function InterpretHealth(o) return true end"}
"""


def test_a_karmada_interpreter_customization_prints_its_target(kubectl: Kubectl) -> None:
    """As Karmada prints it: TARGET-API-VERSION and TARGET-KIND."""
    kubectl.run("apply", "-f", "-", input=RIC)
    rows = kubectl.run("get", "resourceinterpretercustomizations.config.karmada.io", "warn-widgets").stdout.splitlines()
    assert rows[0].split()[:3] == ["NAME", "TARGET-API-VERSION", "TARGET-KIND"], rows
    assert rows[1].split()[:3] == ["warn-widgets", "example.io/v1", "Widget"], rows
    kubectl.run("delete", "resourceinterpretercustomizations.config.karmada.io", "warn-widgets")
