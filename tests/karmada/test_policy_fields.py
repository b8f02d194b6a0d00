"""Karmada's v1alpha1 policy fields as DRO-DS reads them: which policy wins (priority, then selector
specificity), claims and ``preemption``, the default spread field, and the override rules'
``exclude`` / ``fieldSelector`` / ``fieldOverrider`` / no ``resourceSelectors``."""

from __future__ import annotations

import json
from typing import Any

import pytest
import yaml
from pydantic import ValidationError

from drods.controllers.overrides import OverrideError, apply_overrides
from drods.model.detection import best_policy, decode_policy, desired_binding
from drods.model.dispatch import Suspension
from drods.model.karmada import KarmadaOverrideSpec, KarmadaPropagationSpec
from drods.model.kinds import (
    KARMADA_CLUSTER_PROPAGATION_POLICY,
    KARMADA_PROPAGATION_POLICY,
    PROPAGATION_POLICY,
    by_kind,
)
from drods.model.placement import Placement
from drods.store import KeyValue

DEPLOY = by_kind("apps/v1", "Deployment")
WEB = {"apiVersion": "apps/v1", "kind": "Deployment",
       "metadata": {"name": "web", "namespace": "shop", "labels": {"app": "web"}},
       "spec": {"replicas": 2, "template": {"spec": {"containers": [{"name": "c", "image": "nginx"}]}}}}


def policy(name: str, *, cluster: bool = True, priority: int = 0, by: str = "kind", **spec: Any) -> Any:
    sel: dict[str, Any] = {"apiVersion": "apps/v1", "kind": "Deployment"}
    if by == "name":
        sel["name"] = "web"
    elif by == "label":
        sel["labelSelector"] = {"matchLabels": {"app": "web"}}
    kind = KARMADA_CLUSTER_PROPAGATION_POLICY if cluster else KARMADA_PROPAGATION_POLICY
    meta: dict[str, Any] = {"name": name, **({} if cluster else {"namespace": "shop"})}
    body = {"apiVersion": kind.api_version, "kind": kind.kind, "metadata": meta,
            "spec": {"resourceSelectors": [sel], "priority": priority, **spec}}
    p = decode_policy(kind)(KeyValue(f"/p/{name}", json.dumps(body).encode(), 0, 0, 0))
    assert p is not None
    return p


def winner(*policies: Any, claimed: str | None = None, namespaced_claim: bool = False) -> str:
    assert DEPLOY is not None
    ref = None
    if claimed:
        kind = KARMADA_PROPAGATION_POLICY if namespaced_claim else KARMADA_CLUSTER_PROPAGATION_POLICY
        ref = {"apiVersion": kind.api_version, "kind": kind.kind, "name": claimed,
               **({"namespace": "shop"} if namespaced_claim else {})}
    m = best_policy(list(policies), DEPLOY, WEB, ref)
    assert m is not None
    return m.name


def test_explicit_priority_wins_before_selector_specificity() -> None:
    assert winner(policy("broad", priority=10), policy("named", by="name", priority=1)) == "broad"


def test_at_equal_priority_name_beats_label_beats_kind_then_alphabetic() -> None:
    assert winner(policy("a-kind"), policy("b-label", by="label"), policy("c-name", by="name")) == "c-name"
    assert winner(policy("a-kind"), policy("b-label", by="label")) == "b-label"
    assert winner(policy("foo"), policy("bar")) == "bar"


def test_namespaced_policy_wins_over_cluster_policy_whatever_the_priority() -> None:
    assert winner(policy("cpp", priority=100, by="name"), policy("pp", cluster=False)) == "pp"


def test_claim_is_kept_without_preemption() -> None:
    low, high = policy("low", priority=1), policy("high", priority=5)
    assert winner(low, high) == "high"  # nothing claimed yet: the best
    assert winner(low, high, claimed="low") == "low"  # claimed, and high has preemption Never


def test_preemption_always_takes_a_lower_priority_claim() -> None:
    low, high = policy("low", priority=1), policy("high", priority=5, preemption="Always", by="name")
    assert winner(low, high, claimed="low") == "high"
    # a cluster policy never preempts a namespaced one, even with a higher priority
    pp = policy("pp", cluster=False, priority=1)
    assert winner(pp, high, claimed="pp", namespaced_claim=True) == "pp"
    # a namespaced policy preempts any cluster policy's claim, whatever the priorities
    assert winner(high, policy("pp2", cluster=False, preemption="Always", by="name"), claimed="high") == "pp2"
    assert winner(high, policy("pp3", cluster=False), claimed="high") == "high"


def test_dro_ds_own_policies_always_rechoose() -> None:
    body = {"apiVersion": "multicluster.io/v1alpha1", "kind": "PropagationPolicy", "metadata": {"name": "own"},
            "spec": {"resourceType": "Deployment", "priority": 9}}
    own = decode_policy(PROPAGATION_POLICY)(KeyValue("/p/own", json.dumps(body).encode(), 0, 0, 0))
    ref = {"apiVersion": "multicluster.io/v1alpha1", "kind": "PropagationPolicy", "name": "own"}
    assert DEPLOY is not None
    m = best_policy([own, policy("k", priority=20)], DEPLOY, WEB, ref)
    assert m is not None and m.name == "k"


def test_binding_carries_dispatch_terms_and_priority_order() -> None:
    p = policy("pp", cluster=False, conflictResolution="Overwrite",
               suspension={"dispatchingOnClusters": {"clusterNames": ["m1"]}})
    assert DEPLOY is not None
    m = best_policy([p], DEPLOY, WEB)
    assert m is not None
    spec = desired_binding(DEPLOY, WEB, m)["spec"]
    assert spec["conflictResolution"] == "Overwrite"
    assert spec["suspension"] == {"dispatchingOnClusters": {"clusterNames": ["m1"]}}
    assert spec["policyRef"] == {"apiVersion": "policy.karmada.io/v1alpha1", "kind": "PropagationPolicy",
                                 "name": "pp", "namespace": "shop"}


def test_every_propagation_field_is_read() -> None:
    spec = KarmadaPropagationSpec.model_validate(yaml.safe_load("""
resourceSelectors: [{apiVersion: apps/v1, kind: Deployment, name: web}]
priority: 3
preemption: Always
dependentOverrides: [db-endpoint]
conflictResolution: Overwrite
activationPreference: Lazy
suspension: {dispatching: true}
preserveResourcesOnDeletion: true
schedulePriority: {priorityClassSource: KubePriorityClass, priorityClassName: high}
association: true
placement:
  spreadConstraints: [{maxGroups: 2, minGroups: 1}]
"""))  # association: deprecated, still in Karmada's own artifacts/example/policy_with_labelSelector.yaml
    assert spec.suspension is not None and spec.suspension.suspends("anything")
    assert spec.placement is not None and spec.placement.spreadConstraints[0].spreadByField == "cluster"


@pytest.mark.parametrize("bad, why", [
    ({"dispatching": True, "dispatchingOnClusters": {"clusterNames": ["a"]}}, "mutually exclusive"),
    ({"dispatching": False}, "only accepts true"),
])
def test_suspension_forms_refused(bad: dict[str, Any], why: str) -> None:
    with pytest.raises(ValidationError, match=why):
        Suspension.model_validate(bad)


def test_spread_by_field_and_label_together_refused() -> None:
    with pytest.raises(ValidationError, match="mutually exclusive"):
        Placement.model_validate({"spreadConstraints": [{"spreadByField": "region", "spreadByLabel": "x"}]})


def override(namespace: str | None, text: str) -> tuple[str, Any]:
    spec = KarmadaOverrideSpec.model_validate(yaml.safe_load(text))
    return (f"{namespace}/op" if namespace else "cop"), spec.as_override_policy(namespace)


def configmap(ns: str = "shop") -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "cfg", "namespace": ns},
            "data": {"app.yaml": "db:\n  host: a\n  port: 1\n", "app.json": '{"level": "info"}'}}


def test_override_without_resource_selectors_covers_its_namespace_only() -> None:
    pol = override("shop", """
overrideRules:
  - overriders: {labelsOverrider: [{operator: add, value: {seen: "yes"}}]}
""")
    here, there = configmap(), configmap("other")
    assert apply_overrides(here, "m1", {}, [pol]) == ["shop/op"]
    assert apply_overrides(there, "m1", {}, [pol]) == []
    assert here["metadata"]["labels"] == {"seen": "yes"} and "labels" not in there["metadata"]


def test_override_target_exclude_and_field_selector() -> None:
    pol = override(None, """
overrideRules:
  - targetCluster:
      fieldSelector: {matchExpressions: [{key: region, operator: In, values: [eu]}]}
      exclude: [eu-2]
    overriders: {annotationsOverrider: [{operator: add, value: {tier: eu}}]}
""")
    got = {}
    for cluster, region in (("eu-1", "eu"), ("eu-2", "eu"), ("us-1", "us")):
        cm = configmap()
        apply_overrides(cm, cluster, {}, [pol], {"region": region})
        got[cluster] = (cm["metadata"].get("annotations") or {}).get("tier")
    assert got == {"eu-1": "eu", "eu-2": None, "us-1": None}


def test_field_overrider_changes_yaml_and_json_inside_strings() -> None:
    pol = override(None, """
resourceSelectors: [{apiVersion: v1, kind: ConfigMap}]
overrideRules:
  - overriders:
      fieldOverrider:
        - fieldPath: /data/app.yaml
          yaml:
            - {subPath: /db/host, operator: replace, value: b.internal}
            - {subPath: /db/tls, operator: add, value: true}
        - fieldPath: /data/app.json
          json: [{subPath: /level, operator: remove}]
""")
    cm = configmap()
    apply_overrides(cm, "m1", {}, [pol])
    assert yaml.safe_load(cm["data"]["app.yaml"]) == {"db": {"host": "b.internal", "port": 1, "tls": True}}
    assert json.loads(cm["data"]["app.json"]) == {}


@pytest.mark.parametrize("path, ops, why", [
    ("/data/missing", "yaml: [{subPath: /a, operator: add, value: 1}]", "no such field"),
    ("/data/app.json", "yaml: [{subPath: /x/y, operator: replace, value: 1}]", "fieldOverrider /data/app.json"),
    ("/metadata", "json: [{subPath: /a, operator: add, value: 1}]", "not a string field"),
])
def test_field_overrider_that_does_not_fit_is_an_override_error(path: str, ops: str, why: str) -> None:
    pol = override(None, f"""
overrideRules:
  - overriders:
      fieldOverrider: [{{fieldPath: "{path}", {ops}}}]
""")
    with pytest.raises(OverrideError, match=why):
        apply_overrides(configmap(), "m1", {}, [pol])


def test_field_overrider_needs_exactly_one_format() -> None:
    with pytest.raises(ValidationError, match="exactly one of json or yaml"):
        KarmadaOverrideSpec.model_validate({"overrideRules": [{"overriders": {"fieldOverrider": [
            {"fieldPath": "/data/x"}]}}]})


def test_an_override_that_would_change_what_the_copy_is_fails_whatever_wrote_it() -> None:
    """Admission refuses such paths; a policy stored before that rule (or a merge into ``metadata``)
    is refused by the engine: the Work for that cluster is not written."""
    from drods.model.policy import (
        ClusterOverridePolicySpec,
        FieldPatch,
        OverrideClusterSelector,
        OverrideRule,
        PlaintextPatch,
    )

    for patch in (PlaintextPatch.model_construct(path="/metadata/namespace", operator="replace", value="kube-system"),
                  PlaintextPatch.model_construct(path="/kind", operator="replace", value="ClusterRoleBinding")):
        rule = OverrideRule.model_construct(clusterSelector=OverrideClusterSelector(), fieldPatches=[],
                                            plaintext=[patch], imageOverrider=[], commandOverrider=[],
                                            argsOverrider=[], labelsOverrider=[], annotationsOverrider=[],
                                            fieldOverrider=[])
        spec = ClusterOverridePolicySpec.model_construct(resourceSelectors=[], overrides=[rule])
        cm = configmap()
        with pytest.raises(OverrideError, match="may not change the object's apiVersion, kind, name or namespace"):
            apply_overrides(cm, "m1", {}, [("shop/op", spec)])
    with pytest.raises(ValidationError, match="may not change"):
        FieldPatch(path="/metadata/name", value="web")
    FieldPatch(path="metadata.labels[name]", value="web")  # a label called name is no identity


def test_an_override_that_does_not_fit_names_the_path_not_the_data_it_looked_in() -> None:
    """The failure goes to the Binding's conditions and an Event, which a viewer reads; a Secret's data
    (and a ConfigMap file's lines) must not be in it — jsonpointer's message held the whole object."""
    secret = {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "db", "namespace": "shop"},
              "data": {"password": "aHVudGVyMg=="}}
    pol = override(None, """
resourceSelectors: [{apiVersion: v1, kind: Secret}]
overrideRules:
  - overriders:
      plaintext: [{path: /data/nosuch/x, operator: replace, value: "1"}]
""")
    with pytest.raises(OverrideError) as refused:
        apply_overrides(secret, "m1", {}, [pol])
    assert "nosuch" in str(refused.value) and "aHVudGVyMg" not in str(refused.value)
    cm = configmap()
    cm["data"]["app.yaml"] = "db:\n  password: hunter2\n  host: [a\n"
    pol = override(None, """
overrideRules:
  - overriders:
      fieldOverrider: [{fieldPath: /data/app.yaml, yaml: [{subPath: /db/host, operator: replace, value: b}]}]
""")
    with pytest.raises(OverrideError, match="not YAML: .* at line 4") as refused:
        apply_overrides(cm, "m1", {}, [pol])
    assert "hunter2" not in str(refused.value)
