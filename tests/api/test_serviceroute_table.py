"""`kubectl get serviceroutes`: the Routes column names per client site the instance most flows go to
(the heaviest), with the weights when there are several. It printed the first instance by name:
``DFW→azure-lhr`` for azure-lhr 0.286 / gcp-sin 0.714."""

from __future__ import annotations

from typing import Any

from drods.api.table import to_table
from drods.model.kinds import SERVICE_ROUTE


def routes_cell(*routes: dict[str, Any]) -> Any:
    obj = {"metadata": {"name": "video.example", "creationTimestamp": "2026-01-01T00:00:00Z"},
           "spec": {"strategy": "experienceFirst", "routes": list(routes), "changes": 3}}
    table = to_table(SERVICE_ROUTE, [obj], 1)
    names = [c["name"] for c in table["columnDefinitions"]]
    return dict(zip(names, table["rows"][0]["cells"], strict=True))["Routes"]


def site(name: str, *instances: tuple[str, float, Any]) -> dict[str, Any]:
    return {"clientSite": name, "instances": [{"cluster": c, "weight": w, "metric": m} for c, w, m in instances]}


def test_a_balanced_site_shows_its_heaviest_instance_first_with_weights() -> None:
    cell = routes_cell(site("DFW", ("azure-lhr", 0.286, 93.3), ("gcp-sin", 0.714, 37.4)))
    assert cell == "DFW→gcp-sin:71%+azure-lhr:29%"


def test_one_instance_per_site_prints_as_before_and_max_is_flagged() -> None:
    cell = routes_cell(site("DFW", ("aws-dfw", 1.0, 14.0)), site("LHR", ("az-lhr", 1.0, "MAX")),
                       site("NOWHERE"))
    assert cell == "DFW→aws-dfw,LHR→az-lhr(MAX)"
    assert routes_cell(site("NOWHERE")) == ""


def test_equal_weights_are_listed_by_name() -> None:
    assert routes_cell(site("DFW", ("b", 0.5, 1.0), ("a", 0.5, 2.0))) == "DFW→a:50%+b:50%"
