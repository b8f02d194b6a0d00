"""``drods explain`` names a decision's users and the latency from them to each chosen cluster."""

from __future__ import annotations

from drods.cli.explain import _inputs_line


def test_the_inputs_line_names_the_users_and_each_chosen_clusters_latency() -> None:
    users = {"source": "learned", "sites": [{"region": "us-west", "weight": 0.6}, {"site": "lhr", "weight": 0.4}],
             "latencySLOMs": 80, "latencyMs": {"dfw": 31.4, "lhr": None}}
    line = _inputs_line({"analysis": {"users": users}, "users": users})
    assert "users (learned): us-west 60%, lhr 40%, SLO 80 ms; latency dfw 31 ms, lhr unknown" in line
    assert "users: {" not in line  # not dumped raw as well
    users["latencyFrom"] = {"dfw": "us-west"}  # with several places, from which one
    assert "latency dfw 31 ms from us-west, lhr unknown" in _inputs_line({"analysis": {"users": users}, "users": users})


def test_no_users_no_users_text() -> None:
    assert "users" not in _inputs_line({"candidates": {"feasible": 2, "total": 3}})


def test_a_route_decision_s_measured_delays_read_as_text() -> None:
    line = _inputs_line({"latencies": {"DFW → azure-lhr": 9.0, "DFW → gcp-sin": None}})
    assert line == "measured delay DFW → azure-lhr 9 ms, DFW → gcp-sin unknown"


def test_other_inputs_read_as_text_not_as_a_python_dict() -> None:
    line = _inputs_line({"usage": {"pods": 4, "cpu": {"used": "500m"}}, "clusters": ["a", "b"], "reason": "x"})
    assert line == "usage: pods 4, cpu.used 500m; clusters: a, b; reason: x"


def test_a_place_with_no_latency_known_is_said() -> None:
    users = {"source": "declared", "sites": [{"region": "eu", "weight": 0.75}, {"site": "ATLANTIS", "weight": 0.25}],
             "latencyMs": {"eu-0": 5.0}, "unknownPlaces": [{"site": "ATLANTIS", "weight": 0.25}]}
    line = _inputs_line({"analysis": {"users": users}, "users": users})
    assert line.endswith("no latency known from ATLANTIS to any cluster (weighed as neutral)")


def test_the_inputs_line_names_the_division_and_rounds_a_metric() -> None:
    """A cost-first decision said nothing of it; a scaling input printed cpu 133.33333333333334."""
    line = _inputs_line({"division": "CostFirst", "metrics": [{"name": "cpu", "value": 400 / 3, "target": 60.0}]})
    assert "division CostFirst" in line and "cpu 133.3 (target 60.0)" in line, line
