"""``drods explain federatedhpa/NAME`` (and cronfederatedhpa): scaling decisions are kept under the workload
the autoscaler scales, so the autoscaler's own name answered NOT_FOUND "no binding and no decision recorded"
(walkthrough AJ). It explains the workload, through a CronFederatedHPA's FederatedHPA."""

from __future__ import annotations

from typing import Any

import pytest

from drods.cli.explain import _explain_workload
from tests.cli.fixed_answer import FixedAnswer

FHPA = "/apis/multicluster.io/v1alpha1/namespaces/default/federatedhpas/web"
CRON = "/apis/multicluster.io/v1alpha1/namespaces/default/cronfederatedhpas/nightly"
STATUS = {"phase": "Scheduled", "placement": [{"cluster": "aws-dfw", "replicas": 3}], "placed": 3, "requested": 3}
DECISION = {"type": "Scaling", "time": "2026-12-05T10:00:00Z", "summary": "2 -> 3",
            "subject": {"kind": "Deployment", "namespace": "default", "name": "web"}}


WEB = {"apiVersion": "apps/v1", "kind": "Deployment", "namespace": "default", "name": "web"}


class _Api:
    def __init__(self, resource: dict[str, Any] | None = None) -> None:
        self.asked: list[tuple[str, Any]] = []
        self.resource = resource or WEB  # what the Binding under the workload's name places

    def request(self, method: str, path: str, params: Any = None, ok: Any = ()) -> FixedAnswer:
        self.asked.append((path, params))
        if path == FHPA:
            return FixedAnswer(200, {"spec": {"scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment",
                                                                 "name": "web"}}})
        if path == CRON:
            return FixedAnswer(200, {"spec": {"scaleTargetRef": {"apiVersion": "autoscaling.karmada.io/v1alpha1",
                                                                 "kind": "FederatedHPA", "name": "web"}}})
        if path == "/api/v1/bindings/deployment-default-web/status":  # one read: the status names what it places
            return FixedAnswer(200, {**STATUS, "resource": self.resource})
        assert path == "/api/v1/decisions", path
        assert params["kind"] == "Deployment" and params["name"] == "web", params
        return FixedAnswer(200, {"items": [DECISION]})


@pytest.mark.parametrize(("kind", "name"), [("FederatedHPA", "web"), ("CronFederatedHPA", "nightly")])
def test_an_autoscaler_is_explained_by_the_workload_it_scales(kind: str, name: str,
                                                               capsys: pytest.CaptureFixture[str]) -> None:
    _explain_workload(_Api(), kind, "default", name, False, "table")  # type: ignore[arg-type]
    text = " ".join(capsys.readouterr().out.split())
    assert f"{kind} default/{name} scales Deployment/web" in text
    assert "Placement: aws-dfw 3 (phase Scheduled, 3/3)" in text


def test_a_binding_of_another_object_under_the_name_is_not_the_workloads(capsys: pytest.CaptureFixture[str]) -> None:
    """Binding names are ``<kind>-<namespace>-<name>``: Deployment ``default/web`` and Deployment
    ``de/fault-web`` share one. One that places another object is not this workload's."""
    api = _Api({**WEB, "namespace": "de", "name": "fault-web"})
    _explain_workload(api, "FederatedHPA", "default", "web", False, "table")  # type: ignore[arg-type]
    text = " ".join(capsys.readouterr().out.split())
    assert "Placement: no binding (not placed by DRO-DS)" in text
    assert [p for p, _ in api.asked if p.startswith("/api/v1/bindings/")] == [
        "/api/v1/bindings/deployment-default-web/status"]  # one read: its status names what it places
