"""``drods whatif``'s table: a cluster a capacity filter turned away but that keeps the replicas it runs is
said to keep them — the table listed it as filtered out beside a placement giving it 4 (walkthrough AC)."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace
from typing import Any

from typer.testing import CliRunner

import drods.cli.whatif as cli_whatif
from drods.cli.main import app

ANSWER = {"phase": "Scheduled", "placement": [{"cluster": "aws-dfw", "replicas": 4}],
          "explanation": {"result": {"message": "scheduled 4 replicas on 1/3 clusters (1 feasible)"},
                          "profile": "default", "division": "WaterLevel", "adjuster": {}, "scores": {},
                          "filters": {"reasons": {"aws-dfw": "water level above 85% (water level 108%)",
                                                  "gcp-sin": "cluster not ready"}}}}


def test_a_full_cluster_that_keeps_its_replicas_is_not_shown_as_only_filtered_out(tmp_path: Path,
                                                                                  monkeypatch: Any) -> None:
    api = SimpleNamespace(request=lambda method, path, json: SimpleNamespace(json=lambda: ANSWER))
    monkeypatch.setattr(cli_whatif, "connect", lambda *a, **k: api)
    f = tmp_path / "binding.yaml"
    f.write_text("replicas: 4\n")
    r = CliRunner().invoke(app, ["whatif", "-f", str(f), "--server", "https://x", "--token", "t"])
    assert r.exit_code == 0, r.output
    lines = r.output.splitlines()
    assert "aws-dfw  water level above 85% (water level 108%) (keeps the replicas it runs, takes no more)" in lines
    assert "gcp-sin  cluster not ready" in lines


def run_whatif(tmp_path: Path, monkeypatch: Any, answer: dict[str, Any]) -> list[str]:
    api = SimpleNamespace(request=lambda method, path, json: SimpleNamespace(json=lambda: answer))
    monkeypatch.setattr(cli_whatif, "connect", lambda *a, **k: api)
    f = tmp_path / "binding.yaml"
    f.write_text("replicas: 1\n")
    r = CliRunner().invoke(app, ["whatif", "-f", str(f), "--server", "https://x", "--token", "t"])
    assert r.exit_code == 0, r.output
    return [line.rstrip() for line in r.output.splitlines()]


WHY = "aws-dfw scored 7.5 points below gcp-sin (LeastWaterLevel +5.5, BalancedAllocation +2.0)"
ONE_OF_THREE: dict[str, Any] = {
    "phase": "Scheduled", "placement": [{"cluster": "gcp-sin", "replicas": 1}],
    "explanation": {"result": {"message": "scheduled 1 replica on 1/3 clusters (3 feasible)"},
                    "profile": "default", "division": "WaterLevel",
                    "adjuster": {"mode": "spread", "spread": 0.1, "fleetWaterLevel": 0.4},
                    "scores": {"total": {"gcp-sin": 90}}, "filters": {"reasons": {}},
                    "runnerUp": {"name": "aws-dfw", "lostBy": 7.5, "differences": {}, "why": WHY},
                    "whyNot": {"aws-dfw": WHY, "azure-lhr": "azure-lhr scored 9.0 points below gcp-sin"}}}


def test_the_table_says_the_runner_up_and_why_the_others_got_nothing(tmp_path: Path, monkeypatch: Any) -> None:
    lines = run_whatif(tmp_path, monkeypatch, ONE_OF_THREE)
    assert f"runner-up: {WHY}" in lines
    assert "azure-lhr  azure-lhr scored 9.0 points below gcp-sin" in lines
    assert sum(WHY in line for line in lines) == 1  # the runner-up once, not again among the others
    assert "profile default, division WaterLevel, adjuster spread (σ=0.1, fleet water level 0.4)" in lines


def test_an_unschedulable_answer_has_no_adjuster_none_line(tmp_path: Path, monkeypatch: Any) -> None:
    answer = {"phase": "Unschedulable", "placement": [],
              "explanation": {"result": {"message": "0/3 clusters are available"}, "profile": "default",
                              "division": "WaterLevel", "adjuster": None, "scores": {},
                              "runnerUp": None, "whyNot": {},
                              "filters": {"reasons": {"a": "cluster not ready"}}}}
    lines = run_whatif(tmp_path, monkeypatch, answer)
    assert "profile default, division WaterLevel" in lines
    assert not any("None" in line or "runner-up" in line or "not chosen" in line for line in lines), lines


def test_many_clusters_not_chosen_are_cut_short(tmp_path: Path, monkeypatch: Any) -> None:
    why = {f"c{i:02d}": f"c{i:02d} scored {i} points below gcp-sin" for i in range(15)}
    answer = {**ONE_OF_THREE, "explanation": {**ONE_OF_THREE["explanation"], "runnerUp": None, "whyNot": why}}
    lines = run_whatif(tmp_path, monkeypatch, answer)
    shown = [line.split()[0] for line in lines if line.startswith("c")]
    assert shown == [f"c{i:02d}" for i in range(10)]
    assert "… and 5 more (-o json lists them)" in lines
