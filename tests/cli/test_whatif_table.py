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
