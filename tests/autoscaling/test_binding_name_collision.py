"""Binding names are ``<kind>-<namespace>-<name>``: Deployment ``de/fault-web`` and Deployment
``de-fault/web`` are both ``deployment-de-fault-web``. A FederatedHPA (or CronFederatedHPA) in namespace ``de``
scaling ``fault-web`` took the other namespace's Binding for its workload's: its replicas and placement fed
the autoscaler's decision (walkthrough AN, item 1). A Binding of another object under the name is none."""

from __future__ import annotations

import copy
from types import SimpleNamespace
from typing import Any

from drods.autoscaling.controller import Autoscaler
from drods.model.autoscaling import CronFederatedHPASpec
from drods.model.kinds import BINDING

NAME = "deployment-de-fault-web"


def hpa(namespace: str, target: str) -> dict[str, Any]:
    return {"apiVersion": "autoscaling.karmada.io/v1alpha1", "kind": "FederatedHPA",
            "metadata": {"name": "scaler", "namespace": namespace, "uid": "h1", "generation": 1},
            "spec": {"scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": target},
                     "minReplicas": 1, "maxReplicas": 10,
                     "metrics": [{"type": "Resource", "resource": {"name": "cpu", "target": {
                         "type": "Utilization", "averageUtilization": 50}}}]}}


def binding(namespace: str, name: str) -> dict[str, Any]:
    """The detector's Binding of Deployment ``namespace``/``name`` (4 replicas on member a)."""
    return {"apiVersion": "multicluster.io/v1alpha1", "kind": "Binding",
            "metadata": {"name": NAME, "resourceVersion": "5",
                         "labels": {"multicluster.io/managed-by": "resource-detector"}},
            "spec": {"resource": {"apiVersion": "apps/v1", "kind": "Deployment", "namespace": namespace,
                                  "name": name, "uid": "w1"}, "replicas": 4},
            "status": {"placement": [{"cluster": "a", "replicas": 4}]}}


def autoscaler(held: dict[str, Any], scaler: dict[str, Any]) -> Autoscaler:
    def inf(cache: dict[str, Any] | None = None) -> Any:
        return SimpleNamespace(cache=cache or {}, revision=1)

    return Autoscaler(None, None, hpas=inf({"k": scaler}), crons=inf(),  # type: ignore[arg-type]
                      bindings=inf({BINDING.key(NAME): held}), clusters=inf(), feedback=inf(), members=inf())


def reasons(status: dict[str, Any]) -> dict[str, str]:
    return {c["type"]: c["reason"] for c in status.get("conditions") or []}


def test_an_hpa_takes_a_binding_of_another_namespaces_workload_for_none() -> None:
    scaler = hpa("de", "fault-web")
    other = binding("de-fault", "web")
    status, record = autoscaler(copy.deepcopy(other), scaler)._evaluate_hpa(scaler, {}, 1000.0)
    assert reasons(status) == {"ScalingActive": "TargetNotFound", "AbleToScale": "FailedGetBinding"}
    assert "Deployment de/fault-web has no Binding" in status["conditions"][0]["message"]
    assert "desiredReplicas" not in status and record is None

    own = hpa("de-fault", "web")  # the same Binding is the other workload's own: its HPA reads it
    status, _ = autoscaler(copy.deepcopy(other), own)._evaluate_hpa(own, {}, 1000.0)
    assert reasons(status).get("AbleToScale") != "FailedGetBinding"


def test_a_cron_target_with_another_objects_binding_under_its_name_is_missing() -> None:
    spec = CronFederatedHPASpec.model_validate({
        "scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "fault-web"},
        "rules": [{"name": "up", "schedule": "* * * * *", "targetReplicas": 9}]})
    a = autoscaler(binding("de-fault", "web"), hpa("de", "fault-web"))
    assert a._cron_target_missing(spec, "de") == "Deployment de/fault-web has no Binding (it does not exist, " \
                                                 "or no policy places it)"
    assert a._cron_target_missing(spec.model_copy(update={"scaleTargetRef": spec.scaleTargetRef.model_copy(
        update={"name": "web"})}), "de-fault") is None
