"""``drods explain`` of a Binding written by hand for a workload (its own name, not the derived one):
the placement is that Binding's, asked as ``binding/NAME`` or as the workload."""

from __future__ import annotations

from typing import Any

import pytest

from drods.cli.explain import _explain_workload
from tests.cli.fixed_answer import FixedAnswer

TRAIN = {"metadata": {"name": "train"},
         "spec": {"resource": {"apiVersion": "apps/v1", "kind": "Deployment", "namespace": "ml", "name": "train"}}}
STATUS = {"phase": "Scheduled", "placement": [{"cluster": "azure-lhr", "replicas": 4}], "placed": 4, "requested": 4}
DECISION = {"type": "Placement", "time": "2026-12-05T10:00:00Z", "summary": "placed 4 replicas",
            "subject": {"kind": "Deployment", "namespace": "ml", "name": "train"},
            "source": {"journal": "schedules", "binding": "train"}}


class _Api:
    def request(self, method: str, path: str, params: Any = None, ok: Any = ()) -> FixedAnswer:
        if path == "/apis/multicluster.io/v1alpha1/bindings/train":
            return FixedAnswer(200, TRAIN)
        if path == "/api/v1/bindings/train/status":
            return FixedAnswer(200, STATUS)
        if path.startswith("/api/v1/bindings/"):
            return FixedAnswer(404, {"code": "NOT_FOUND"})
        assert path == "/api/v1/decisions", path
        return FixedAnswer(200, {"items": [DECISION]})


@pytest.mark.parametrize("kind, namespace, name", [("Binding", "default", "train"), ("Deployment", "ml", "train")])
def test_a_binding_with_its_own_name_shows_its_placement(kind: str, namespace: str, name: str,
                                                         capsys: pytest.CaptureFixture[str]) -> None:
    _explain_workload(_Api(), kind, namespace, name, False, "table")  # type: ignore[arg-type]
    text = " ".join(capsys.readouterr().out.split())
    assert "Placement: azure-lhr 4 (phase Scheduled, 4/4)" in text and "no binding" not in text


class _NamespaceApi:
    """A Namespace placed by a ClusterPropagationPolicy: its Binding names no namespace."""

    def request(self, method: str, path: str, params: Any = None, ok: Any = ()) -> FixedAnswer:
        if path == "/api/v1/bindings/namespace--team-a/status":
            return FixedAnswer(200, {**STATUS, "resource": {"apiVersion": "v1", "kind": "Namespace", "name": "team-a"}})
        assert path == "/api/v1/decisions", path
        return FixedAnswer(200, {"items": [{**DECISION, "subject": {"kind": "Namespace", "namespace": "",
                                                                    "name": "team-a"},
                                            "inputs": {"division": "Duplicated"}}]})


def test_a_cluster_scoped_workload_is_shown_without_a_namespace(capsys: pytest.CaptureFixture[str]) -> None:
    """`drods explain namespace/team-a` said "Namespace: default", and every inputs line said the division twice."""
    _explain_workload(_NamespaceApi(), "Namespace", "default", "team-a", False, "table")  # type: ignore[arg-type]
    out = capsys.readouterr().out
    assert "Name:       team-a" in out and "Namespace:" not in out.split("Kind:")[0], out
    assert "Placement: azure-lhr 4" in " ".join(out.split())
    assert out.count("Duplicated") == 1, out
