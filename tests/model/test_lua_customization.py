"""Karmada's Lua ResourceInterpreterCustomization: each operation's script through the interpreter the
controllers read, what wins when a declarative customization targets the same kind, and a failing
script falling back and being reported instead of raising."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import ValidationError

from drods.model.detection import PolicyMatch, desired_binding
from drods.model.interpreter import Interpreter
from drods.model.kinds import PROPAGATION_POLICY, Kind
from drods.model.lua_customization import KarmadaInterpreterCustomizationSpec

KIND = Kind("ml.example.org", "v1", "TrainingRun", "trainingruns", True)

GET_REPLICAS = """
local kube = require("kube")
function GetReplicas(obj)
  return obj.spec.workers.count, kube.accuratePodRequirements(obj.spec.workers.template)
end"""
REVISE = """
function ReviseReplica(obj, desiredReplica)
  obj.spec.workers.count = desiredReplica
  return obj
end"""
RETAIN = """
function Retain(desiredObj, observedObj)
  desiredObj.spec.paused = observedObj.spec.paused
  return desiredObj
end"""
REFLECT = """
function ReflectStatus(observedObj)
  return {ready = observedObj.status.progress.readyWorkers}
end"""
AGGREGATE = """
function AggregateStatus(desiredObj, statusItems)
  local ready, healthy = 0, 0
  for i = 1, #statusItems do
    ready = ready + (statusItems[i].status.ready or 0)
    if statusItems[i].health == "Healthy" then healthy = healthy + 1 end
  end
  desiredObj.status = {readyWorkers = ready, healthyClusters = healthy}
  return desiredObj
end"""
HEALTH = """
function InterpretHealth(observedObj)
  return observedObj.status.progress.readyWorkers == observedObj.spec.workers.count
end"""
DEPENDENCIES = """
local kube = require("kube")
function GetDependencies(desiredObj)
  local deps = kube.getPodDependencies(desiredObj.spec.workers.template, desiredObj.metadata.namespace)
  table.insert(deps, {apiVersion = "v1", kind = "Secret", namespace = "elsewhere", name = "shared-token"})
  table.insert(deps, {apiVersion = "v1", kind = "ConfigMap", namespace = "elsewhere",
                      labelSelector = {matchLabels = {dataset = "imagenet"}}})
  return deps
end"""


def lua_customization(name: str = "trainingrun", **scripts: str) -> dict[str, Any]:
    return {"apiVersion": "config.karmada.io/v1alpha1", "kind": "ResourceInterpreterCustomization",
            "metadata": {"name": name},
            "spec": {"target": {"apiVersion": "ml.example.org/v1", "kind": "TrainingRun"},
                     "customizations": {op: {"luaScript": s} for op, s in scripts.items()}}}


ALL = dict(replicaResource=GET_REPLICAS, replicaRevision=REVISE, retention=RETAIN, statusReflection=REFLECT,
           statusAggregation=AGGREGATE, healthInterpretation=HEALTH, dependencyInterpretation=DEPENDENCIES)


def run_object(count: int = 6) -> dict[str, Any]:
    return {"apiVersion": "ml.example.org/v1", "kind": "TrainingRun",
            "metadata": {"name": "resnet", "namespace": "ml"},
            "spec": {"paused": False, "workers": {"count": count, "template": {"spec": {
                "serviceAccountName": "trainer", "volumes": [{"configMap": {"name": "hyper"}}],
                "containers": [{"name": "w", "resources": {"requests": {"cpu": "500m", "memory": "256Mi"}}}]}}}}}


def interpreter(*objects: dict[str, Any]) -> Interpreter:
    it = Interpreter()
    for o in objects:
        group = o["apiVersion"].split("/")[0]
        it.learn(f"/registry/{group}/resourceinterpretercustomizations/{o['metadata']['name']}", None, o)
    return it


def test_every_script_must_compile_and_define_its_function() -> None:
    KarmadaInterpreterCustomizationSpec.model_validate(lua_customization(**ALL)["spec"])
    with pytest.raises(ValidationError, match="replicaResource.luaScript: GetReplicas: does not compile"):
        KarmadaInterpreterCustomizationSpec.model_validate(
            lua_customization(replicaResource="function GetReplicas(obj) return obj.spec. end")["spec"])
    with pytest.raises(ValidationError, match="does not define function ReviseReplica"):
        KarmadaInterpreterCustomizationSpec.model_validate(
            lua_customization(replicaRevision="function Revise(obj, n) return obj end")["spec"])
    with pytest.raises(ValidationError, match="Extra inputs"):
        KarmadaInterpreterCustomizationSpec.model_validate(lua_customization(replicaCount="x")["spec"])


def test_get_replicas_divides_with_per_replica_requests() -> None:
    how = interpreter(lua_customization(**ALL)).of("ml.example.org/v1", "TrainingRun")
    assert how.divisible and how.replicas_of(run_object(7)) == 7
    match = PolicyMatch(1, 1, 0, 1, "p", PROPAGATION_POLICY, {}, (), ())
    b = desired_binding(KIND, run_object(7), match, interpreter(lua_customization(**ALL)))
    assert b["spec"]["replicas"] == 7 and b["spec"]["resources"] == {"cpu": 0.5, "memory": 0.25}


def test_revise_retain_reflect_health_aggregate_and_dependencies() -> None:
    how = interpreter(lua_customization(**ALL)).of("ml.example.org/v1", "TrainingRun")
    copy = run_object(6)
    how.set_replicas(copy, 2)
    assert copy["spec"]["workers"]["count"] == 2 and copy["metadata"] == run_object()["metadata"]
    member = {**run_object(2), "spec": {**run_object(2)["spec"], "paused": True},
              "status": {"progress": {"readyWorkers": 2}}}
    assert how.retains and how.retained(copy, member)["spec"]["paused"] is True
    assert how.reflected(member) == ({"ready": 2}, "Healthy")
    assert how.reflected({**member, "status": {"progress": {"readyWorkers": 1}}}) == ({"ready": 1}, "Unhealthy")
    items = [{"clusterName": "a", "applied": True, "health": "Healthy", "status": {"ready": 2}},
             {"clusterName": "b", "applied": True, "health": "Unhealthy", "status": {"ready": 1}}]
    assert how.aggregated_status(run_object(), items) == {"readyWorkers": 3, "healthyClusters": 1}
    # a reference to another namespace is followed there, as Karmada's dependency distributor does
    refs = sorted(how.dependency_refs(run_object()), key=lambda r: r.order)
    assert [r.order for r in refs] == [("v1", "ConfigMap", "elsewhere", ""), ("v1", "ConfigMap", "ml", "hyper"),
                                       ("v1", "Secret", "elsewhere", "shared-token"),
                                       ("v1", "ServiceAccount", "ml", "trainer")]
    assert refs[0].selector is not None and refs[0].selector.matches({"dataset": "imagenet"})
    assert [r.selector for r in refs[1:]] == [None, None, None]
    assert how.reports_status and how.scripts_status


def test_lua_wins_per_operation_over_a_declarative_customization() -> None:
    declarative = {"apiVersion": "multicluster.io/v1alpha1", "kind": "ResourceInterpreterCustomization",
                   "metadata": {"name": "trainingrun"},
                   "spec": {"target": {"apiVersion": "ml.example.org/v1", "kind": "TrainingRun"},
                            "replicas": "spec.size", "podTemplate": "spec.workers.template",
                            "statusAggregation": {"sum": ["status.progress.readyWorkers"]}}}
    it = interpreter(declarative, lua_customization(replicaResource=GET_REPLICAS))
    how = it.of("ml.example.org/v1", "TrainingRun")
    obj = {**run_object(5), "spec": {**run_object(5)["spec"], "size": 9}}
    assert how.replicas_of(obj) == 5  # the Lua GetReplicas, not the declarative path
    how.set_replicas(obj, 3)  # no ReviseReplica script: the declarative replica path
    assert obj["spec"]["size"] == 3 and obj["spec"]["workers"]["count"] == 5
    assert how.status is not None and not how.scripts_status  # the declarative status rule stays
    # the Lua customization removed: the declarative one alone
    it.learn("/registry/config.karmada.io/resourceinterpretercustomizations/trainingrun", None, None)
    assert it.of("ml.example.org/v1", "TrainingRun").replicas_of(obj) == 3


def test_several_lua_customizations_of_a_kind_first_name_wins_per_operation() -> None:
    other = "function GetReplicas(obj) return 1 end"
    it = interpreter(lua_customization("b-second", replicaResource=other, replicaRevision=REVISE),
                     lua_customization("a-first", replicaResource=GET_REPLICAS))
    how = it.of("ml.example.org/v1", "TrainingRun")
    assert how.replicas_of(run_object(4)) == 4
    copy = run_object(4)
    how.set_replicas(copy, 1)
    assert copy["spec"]["workers"]["count"] == 1  # b-second's ReviseReplica still serves


def test_a_failing_script_falls_back_and_is_reported() -> None:
    bad = "function GetReplicas(obj) return obj.spec.nothing.count end"
    loop = "function ReviseReplica(obj, n) while true do end end"
    how = interpreter(lua_customization(replicaResource=bad, replicaRevision=loop)).of("ml.example.org/v1",
                                                                                        "TrainingRun")
    obj = run_object(4)
    assert how.replicas_of(obj) == 1  # no declarative path: a kind without a readable count
    unrevised = how.set_replicas(obj, 2)
    assert obj == run_object(4) and unrevised is not None and "instruction limit exceeded" in unrevised

    from drods.controllers.manifests import Target, plan
    from drods.controllers.overrides import OverrideError

    plans = plan("b", "u", run_object(4), [Target("m1", 2, {}), Target("m2", 2, {})], [], [], how)
    # no copy is sent with the template's whole count (each member ran all of it): the Work stays as it was
    assert all(isinstance(p, OverrideError) and "replicas not revised" in str(p) for p in plans.values()), plans
    failures = how.script_failures(obj)
    assert len(failures) == 2 and any("GetReplicas" in f and "nil value" in f for f in failures)
    assert any("instruction limit exceeded" in f for f in failures)
    assert how.script_failures({"metadata": {"name": "other", "namespace": "ml"}}) == []


def test_a_script_that_ran_out_of_time_is_not_run_again_until_its_customization_changes() -> None:
    """Each run of a script that times out holds the event loop for its whole bound, once per copy and
    status round: after the first, the operation falls back at once, reported on every object asked."""
    from dataclasses import replace

    from drods.model.lua_customization import SANDBOX

    runs: list[str] = []

    class Counting:
        def call(self, script: str, function: str, *args: Any, like: Any = ()) -> Any:
            runs.append(function)
            return SANDBOX.call(script, function, *args, like=like)

    slow = "function InterpretHealth(o) local x while true do x = string.rep('ab', 2000000) end end"
    it = interpreter(lua_customization(healthInterpretation=slow))
    how = it.of("ml.example.org/v1", "TrainingRun")
    assert how.lua is not None
    how = replace(how, lua=replace(how.lua, sandbox=Counting()))  # type: ignore[arg-type]
    first, other = run_object(4), {**run_object(4), "metadata": {"name": "other", "namespace": "ml"}}
    assert how.reflected(first)[1] == "Unknown"  # timed out: nothing says it is healthy
    for _ in range(20):
        assert how.reflected(other)[1] == "Unknown"
    assert runs == ["InterpretHealth"]  # once: twenty more runs would have held the loop ~16 s
    assert any("timeout" in f and "not run again" in f for f in how.script_failures(other))
    fast = "function InterpretHealth(o) return true end"
    it.learn("/registry/config.karmada.io/resourceinterpretercustomizations/trainingrun", None,
             lua_customization(healthInterpretation=fast))
    assert it.of("ml.example.org/v1", "TrainingRun").reflected(other)[1] == "Healthy"


def test_a_customization_serves_every_version_of_its_kind() -> None:
    """An object written as v2 of a custom kind whose customization targets v1 was counted by v1's
    GetReplicas and never revised (each member ran the whole count): one object, one interpretation."""
    it = interpreter(lua_customization(**ALL))
    v2 = {**run_object(6), "apiVersion": "ml.example.org/v2"}
    how = it.of("ml.example.org/v2", "TrainingRun")
    assert how.replicas_of(v2) == 6
    how.set_replicas(v2, 2)
    assert v2["spec"]["workers"]["count"] == 2
    assert it.of("other.example.org/v1", "TrainingRun").lua is None  # another group's kind is another kind
