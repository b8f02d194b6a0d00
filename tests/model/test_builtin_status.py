"""A built-in kind's aggregated status keeps to its schema, as kube-apiserver's typed decoding keeps it:
kubectl's client-side apply of a saved object patches against the typed struct and fails on a field
it does not name (``unable to find api field in struct DeploymentStatus``)."""

from __future__ import annotations

from drods.model.builtin_fields import model_name, schema_status


def test_fields_the_status_schema_does_not_name_are_dropped_at_any_depth() -> None:
    model = model_name("apps", "v1", "Deployment")
    assert model is not None
    cond = {"type": "Available", "status": "True", "reason": "MinimumReplicasAvailable",
            "lastTransitionTime": "2026-01-01T00:00:00Z"}
    status = {"replicas": 3, "readyReplicas": 3, "observedGeneration": 2, "clusters": [{"cluster": "a"}],
              "usage": {"pods": 3}, "conditions": [{**cond, "cluster": "a"}]}
    assert schema_status(status, model) == {"replicas": 3, "readyReplicas": 3, "observedGeneration": 2,
                                            "conditions": [cond]}


def test_a_pod_keeps_its_container_states_and_a_kind_without_status_keeps_none() -> None:
    pod = model_name("", "v1", "Pod")
    assert pod is not None
    status = {"phase": "Running", "podIP": "10.0.0.1", "clusters": [{"cluster": "a"}],
              "containerStatuses": [{"name": "c", "ready": True, "restartCount": 0, "image": "busybox",
                                     "imageID": "", "state": {"running": {"startedAt": "2026-01-01T00:00:00Z"}}}]}
    assert schema_status(status, pod) == {k: v for k, v in status.items() if k != "clusters"}
    config_map = model_name("", "v1", "ConfigMap")
    assert config_map is not None and schema_status({"anything": 1}, config_map) == {}
