"""The resource interpreter's customizations, status aggregation by a declared rule, dependents a
customization names, and the structural schema's pruning (units)."""

from __future__ import annotations

from typing import Any

from drods.controllers import manifests as M
from drods.controllers.status import declared_status
from drods.model.detection import PolicyMatch, desired_binding
from drods.model.interpreter import Interpreter, StatusRule
from drods.model.kinds import PROPAGATION_POLICY, Kind
from drods.model.structural import StructuralSchema, prune

KEY = "/registry/multicluster.io/resourceinterpretercustomizations/"
TARGET = {"apiVersion": "x.example.com/v1", "kind": "Thing"}


def customization(name: str, **spec: Any) -> dict[str, Any]:
    return {"metadata": {"name": name}, "spec": {"target": TARGET, **spec}}


def thing(count: int = 4) -> dict[str, Any]:
    return {"apiVersion": "x.example.com/v1", "kind": "Thing", "metadata": {"name": "t", "namespace": "ns"},
            "spec": {"pool": {"size": count, "pod": {"metadata": {"labels": {"app": "t"}}, "spec": {
                "serviceAccountName": "runner",
                "containers": [{"name": "c", "resources": {"requests": {"cpu": "250m"}}}]}}},
                "jobName": "nightly"}}


def test_a_customization_overrides_at_run_time_and_its_removal_restores_the_built_in() -> None:
    interp = Interpreter()
    assert not interp.of("x.example.com/v1", "Thing").divisible
    interp.learn(f"{KEY}a", None, customization("a", replicas="spec.pool.size", podTemplate="spec.pool.pod"))
    how = interp.of("x.example.com/v1", "Thing")
    assert how.divisible and how.replicas_of(thing(7)) == 7 and not how.built_in
    epoch = interp.epoch
    # a Deployment customized only in its status keeps the built-in replica path
    interp.learn(f"{KEY}d", None, {"metadata": {"name": "d"}, "spec": {
        "target": {"apiVersion": "apps/v1", "kind": "Deployment"}, "statusAggregation": {"sum": ["status.x"]}}})
    dep = interp.of("apps/v1", "Deployment")
    assert dep.replicas == "spec.replicas" and dep.status == StatusRule(("status.x",))
    assert interp.epoch > epoch
    interp.learn(f"{KEY}d", None, None)
    assert interp.of("apps/v1", "Deployment").built_in
    # an unreadable customization is ignored, not fatal
    interp.learn(f"{KEY}bad", None, customization("bad", replicas="spec..size"))
    assert interp.of("x.example.com/v1", "Thing").replicas == "spec.pool.size"


def test_the_detector_reads_replicas_and_requests_through_the_interpreter() -> None:
    interp = Interpreter()
    interp.learn(f"{KEY}a", None, customization("a", replicas="spec.pool.size", podTemplate="spec.pool.pod"))
    kind = Kind("x.example.com", "v1", "Thing", "things", True)
    match = PolicyMatch(1, 3, 0, 1, "p", PROPAGATION_POLICY, {}, (), ())
    spec = desired_binding(kind, thing(5), match, interp)["spec"]
    assert (spec["replicas"], spec["resources"]) == (5, {"cpu": 0.25})
    assert "placement" not in spec  # divisible: the policy's division applies
    plain = desired_binding(kind, thing(5), match)["spec"]  # without the customization: duplicated whole
    assert plain["replicas"] == 1 and plain["placement"]["replicaScheduling"]["replicaSchedulingType"] == "Duplicated"


def test_named_and_pod_template_dependents_at_custom_paths_and_shares_written_there() -> None:
    interp = Interpreter()
    interp.learn(f"{KEY}a", None, customization(
        "a", replicas="spec.pool.size", podTemplate="spec.pool.pod",
        dependencies=[{"apiVersion": "batch/v1", "kind": "CronJob", "nameFrom": "spec.jobName"}]))
    how = interp.of("x.example.com/v1", "Thing")
    cron = {"apiVersion": "batch/v1", "kind": "CronJob", "metadata": {"name": "nightly", "namespace": "ns"}}
    sa = {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "runner", "namespace": "ns"}}
    svc = {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "t", "namespace": "ns"},
           "spec": {"selector": {"app": "t"}}}
    found, looked = M.dependents(
        thing(), lambda k, ns, n: sa if (k, n) == ("ServiceAccount", "runner") else None, lambda ns: [svc],
        how=how, named=lambda av, k, ns, n: cron if (av, k, n) == ("batch/v1", "CronJob", "nightly") else None)
    assert [o["kind"] for o in found] == ["CronJob", "ServiceAccount", "Service"]
    assert ("CronJob", "ns", "nightly") in looked and ("ServiceAccount", "ns", "runner") in looked
    plans = M.plan("b", "uid", thing(6), [M.Target("c1", 4, {}), M.Target("c2", 2, {})], found, [], how)
    shares = {c: p.manifests[-1]["spec"]["pool"]["size"] for c, p in plans.items() if isinstance(p, M.ManifestSet)}
    assert shares == {"c1": 4, "c2": 2}


def test_declared_status_sums_and_reflects_conditions() -> None:
    rule = StatusRule(("status.done.count", "status.steps"), "status.health.conditions", "status.done.count")
    members = {"a": {"done": {"count": 2}, "steps": 10, "health": {"conditions": [{"type": "Ok", "status": "True"}]}},
               "b": {"done": {"count": 3}, "steps": 5,
                     "health": {"conditions": [{"type": "Ok", "status": "False", "reason": "Lost"}]}},
               "c": {}}
    out = declared_status(rule, {"observedGeneration": 2, "stale": 1}, members)
    assert out["done"] == {"count": 5} and out["steps"] == 15 and "stale" not in out
    assert out["health"]["conditions"] == [{"type": "Ok", "status": "False", "reason": "Lost"}]
    assert out["clusters"] == [{"cluster": "a", "readyReplicas": 2}, {"cluster": "b", "readyReplicas": 3},
                               {"cluster": "c"}]
    assert out["observedGeneration"] == 2


def test_pruning_keeps_what_the_schema_names_or_preserves() -> None:
    schema = {"type": "object", "properties": {
        "spec": {"type": "object", "properties": {
            "a": {"type": "integer"},
            "free": {"type": "object", "x-kubernetes-preserve-unknown-fields": True},
            "labels": {"type": "object", "additionalProperties": {"type": "string"}},
            "items": {"type": "array", "items": {"type": "object", "properties": {"n": {"type": "string"}}}}}}}}
    obj = {"spec": {"a": 1, "b": 2, "free": {"x": {"y": 1}}, "labels": {"k": "v"},
                    "items": [{"n": "1", "drop": True}]}, "other": 1}
    assert prune(obj, schema) == {"spec": {"a": 1, "free": {"x": {"y": 1}}, "labels": {"k": "v"},
                                           "items": [{"n": "1"}]}}
    s = StructuralSchema(schema)
    kept, errors = s.admit({"apiVersion": "v", "kind": "K", "metadata": {"name": "n"},
                            "spec": {"a": "one", "labels": {"k": 3}}})
    assert kept["metadata"] == {"name": "n"}
    assert sorted(e["field"] for e in errors) == ["spec.a", "spec.labels.k"]


def test_a_binding_says_when_its_workload_keeps_data_in_claims() -> None:
    """F3: the detector labels the Binding of a workload with claims, so that no fleet change, peak shave or
    move towards users moves it without a plan."""
    from drods.model.annotations import KEEPS_DATA_LABEL
    from drods.model.kinds import by_kind

    kind = by_kind("apps/v1", "StatefulSet")
    assert kind is not None
    match = PolicyMatch(1, 3, 0, 1, "p", PROPAGATION_POLICY, {}, (), ())
    sts = {"apiVersion": "apps/v1", "kind": "StatefulSet", "metadata": {"name": "db", "namespace": "ns"},
           "spec": {"replicas": 1, "template": {"spec": {"containers": [{"name": "db", "image": "pg"}]}}}}
    assert KEEPS_DATA_LABEL not in desired_binding(kind, sts, match)["metadata"]["labels"]
    sts["spec"]["volumeClaimTemplates"] = [{"metadata": {"name": "data"}}]
    assert desired_binding(kind, sts, match)["metadata"]["labels"][KEEPS_DATA_LABEL] == "true"


def karmada_dependencies(api_version: str, kind: str, script: str) -> dict[str, Any]:
    return {"apiVersion": "config.karmada.io/v1alpha1", "kind": "ResourceInterpreterCustomization",
            "metadata": {"name": kind.lower()},
            "spec": {"target": {"apiVersion": api_version, "kind": kind},
                     "customizations": {"dependencyInterpretation": {"luaScript": script}}}}


NAMES_THE_ACCOUNT = """
function GetDependencies(desiredObj)
  return {{apiVersion = "v1", kind = "ServiceAccount", namespace = desiredObj.metadata.namespace,
           name = desiredObj.spec.template.spec.serviceAccountName}}
end"""


def with_template(api_version: str, kind: str) -> dict[str, Any]:
    return {"apiVersion": api_version, "kind": kind, "metadata": {"name": "w", "namespace": "ns"},
            "spec": {"template": {"spec": {"serviceAccountName": "runner", "containers": [
                {"name": "c", "envFrom": [{"configMapRef": {"name": "settings"}}]}]}}}}


def test_a_scripts_dependencies_are_the_kinds_whole_answer_each_object_once() -> None:
    """Karmada's sample GetDependencies names the account the custom kind's template also names: sent
    once. A custom kind's ``spec.template`` is no pod template unless its interpretation says so; a
    Deployment's script replaces the references of its pod template."""
    sa = {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "runner", "namespace": "ns"}}
    cm = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "settings", "namespace": "ns"}}
    stored = {("ServiceAccount", "runner"): sa, ("ConfigMap", "settings"): cm}

    def found(obj: dict[str, Any], interp: Interpreter) -> list[str]:
        deps, _ = M.dependents(obj, lambda k, ns, n: stored.get((k, n)), lambda ns: [],
                               how=interp.of(obj["apiVersion"], obj["kind"]),
                               named=lambda av, k, ns, n: stored.get((k, n)))
        return [f"{o['kind']}/{o['metadata']['name']}" for o in deps]

    interp = Interpreter()
    workload = with_template("workload.example.io/v1alpha1", "Workload")
    assert found(workload, interp) == []  # no interpretation: the object goes whole, nothing follows it
    interp.learn("/registry/config.karmada.io/resourceinterpretercustomizations/w", None,
                 karmada_dependencies("workload.example.io/v1alpha1", "Workload", NAMES_THE_ACCOUNT))
    assert found(workload, interp) == ["ServiceAccount/runner"]
    deployment = with_template("apps/v1", "Deployment")
    assert found(deployment, interp) == ["ConfigMap/settings", "ServiceAccount/runner"]  # the built-in references
    interp.learn("/registry/config.karmada.io/resourceinterpretercustomizations/d", None,
                 karmada_dependencies("apps/v1", "Deployment", NAMES_THE_ACCOUNT))
    assert found(deployment, interp) == ["ServiceAccount/runner"]
