"""``drods explain serviceregistration/NAME``: the placement is that of the Binding the registration's
``status.binding`` names (the steered workload's). It looked for a Binding named after the registration
and printed "Placement: no binding (not placed by DRO-DS)"."""

from __future__ import annotations

from typing import Any

import pytest

from drods.cli.explain import _explain_workload
from tests.cli.fixed_answer import FixedAnswer

REG = "/apis/multicluster.io/v1alpha1/namespaces/default/serviceregistrations/video"
STATUS = {"phase": "Scheduled", "placement": [{"cluster": "aws-dfw", "replicas": 1},
                                              {"cluster": "azure-lhr", "replicas": 1}], "placed": 2, "requested": 2}
DECISION = {"type": "Route", "time": "2026-12-05T10:00:00Z", "summary": "DFW → aws-dfw",
            "subject": {"kind": "ServiceRegistration", "namespace": "default", "name": "video"}}


class _Api:
    def __init__(self, registration: tuple[int, Any]) -> None:
        self.registration = registration
        self.asked: list[str] = []

    def request(self, method: str, path: str, params: Any = None, ok: Any = ()) -> FixedAnswer:
        self.asked.append(path)
        if path == REG:
            return FixedAnswer(*self.registration)
        if path == "/api/v1/bindings/deployment-default-video/status":
            return FixedAnswer(200, STATUS)
        if path.startswith("/api/v1/bindings/"):
            return FixedAnswer(404, {"code": "NOT_FOUND"})
        assert path == "/api/v1/decisions", path
        return FixedAnswer(200, {"items": [DECISION]})


def _text(api: _Api, capsys: pytest.CaptureFixture[str]) -> str:
    _explain_workload(api, "ServiceRegistration", "default", "video", False, "table")  # type: ignore[arg-type]
    return " ".join(capsys.readouterr().out.split())


def test_the_placement_is_the_steered_workloads_binding(capsys: pytest.CaptureFixture[str]) -> None:
    api = _Api((200, {"metadata": {"name": "video"}, "status": {"phase": "Active",
                                                               "binding": "deployment-default-video"}}))
    text = _text(api, capsys)
    assert "Placement: aws-dfw 1, azure-lhr 1 (phase Scheduled, 2/2)" in text and "no binding" not in text
    assert REG in api.asked


@pytest.mark.parametrize("registration", [(200, {"metadata": {"name": "video"}, "status": {"phase": "Active"}}),
                                          (404, {"code": "NOT_FOUND"}), (403, {"code": "FORBIDDEN"})])
def test_no_binding_in_the_status_says_none(registration: tuple[int, Any],
                                            capsys: pytest.CaptureFixture[str]) -> None:
    assert "Placement: no binding" in _text(_Api(registration), capsys)
