"""A GetReplicas script that fails on a workload changes nothing: its Binding keeps the replicas it had
(it used to drop to 1, and the other clusters' copies were deleted) and a new workload gets no Binding
until the script succeeds; a Warning Event on the workload says why, as Karmada's ApplyPolicyFailed."""

from __future__ import annotations

import json
from types import SimpleNamespace
from typing import Any

from drods.controllers.detector import ResourceDetector
from drods.model.detection import decode_policy
from drods.model.interpreter import Interpreter
from drods.model.kinds import BINDING, PROPAGATION_POLICY
from tests.controllers.test_detector_own_writes import DEPLOYMENT, POLICY, WEB, Registry, deployment

RIC = "/registry/config.karmada.io/resourceinterpretercustomizations/deployments"


def customization(script: str) -> dict[str, Any]:
    return {"apiVersion": "config.karmada.io/v1alpha1", "kind": "ResourceInterpreterCustomization",
            "metadata": {"name": "deployments"},
            "spec": {"target": {"apiVersion": "apps/v1", "kind": "Deployment"},
                     "customizations": {"replicaResource": {"luaScript": script}}}}


GOOD = "function GetReplicas(obj) return obj.spec.replicas, {} end"
FAILING = "function GetReplicas(obj) return obj.spec.nothere.count, {} end"


class Told:
    def __init__(self) -> None:
        self.events: list[tuple[dict[str, Any], str, str, str]] = []

    def tell(self, involved: dict[str, Any], type_: str, reason: str, message: str) -> None:
        self.events.append((involved, type_, reason, message))


async def test_a_failing_get_replicas_leaves_the_binding_and_makes_none() -> None:
    registry = Registry()
    interpreter = Interpreter()
    interpreter.learn(RIC, None, customization(GOOD))
    policy = decode_policy(PROPAGATION_POLICY)(SimpleNamespace(value=json.dumps(POLICY).encode()))
    api = DEPLOYMENT.key("api", "default")
    workloads = SimpleNamespace(cache={WEB: deployment(6)})
    bindings = SimpleNamespace(cache={})
    detector = ResourceDetector(registry, workloads=[workloads],  # type: ignore[arg-type, list-item]
                                policies=[SimpleNamespace(cache={"p": policy})],  # type: ignore[list-item]
                                bindings=bindings, interpreter=interpreter)  # type: ignore[arg-type]
    told = Told()
    detector.events = told  # type: ignore[assignment]
    assert await detector.reconcile(WEB) is None and registry.writes == 1
    assert registry.stored is not None and registry.stored["spec"]["replicas"] == 6
    bindings.cache[BINDING.key(registry.stored["metadata"]["name"])] = registry.stored

    interpreter.learn(RIC, customization(GOOD), customization(FAILING))
    workloads.cache[WEB] = deployment(9)  # a change while the script fails: not a count of 1, nor 9
    assert await detector.reconcile(WEB) is None
    assert registry.writes == 1 and registry.stored["spec"]["replicas"] == 6
    involved, type_, reason, message = told.events[-1]
    assert (involved["kind"], involved["name"], type_, reason) == ("Deployment", "web", "Warning", "ApplyPolicyFailed")
    assert "its Binding left as it is" in message and "attempt to index a nil value" in message

    new = deployment(3)
    new["metadata"]["name"] = "api"
    workloads.cache[api] = new
    assert await detector.reconcile(api) is None and registry.writes == 1  # no Binding made
    assert "no Binding made" in told.events[-1][3] and told.events[-1][0]["name"] == "api"

    interpreter.learn(RIC, customization(FAILING), customization(GOOD))  # mended: both follow their counts
    assert await detector.reconcile(WEB) is None and registry.stored["spec"]["replicas"] == 9
    assert await detector.reconcile(api) is None and registry.stored["spec"]["replicas"] == 3
    assert registry.writes == 3
