"""The emulated network (`drods sim latency`): seeded geography by city code, matrix files."""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest
from typer.testing import CliRunner

from drods.cli.main import app
from drods.sim.latency import geography, link, load_matrix, sample


def test_geography_is_deterministic_and_follows_distance() -> None:
    a = geography(["DFW", "LHR"], {"aws-dfw": "DFW", "gcp-ord": "ORD", "az-lhr": "LHR"}, seed=7)
    assert a == geography(["DFW", "LHR"], {"aws-dfw": "DFW", "gcp-ord": "ORD", "az-lhr": "LHR"}, seed=7)
    d = {(m["from"], m["to"]): m["delayMs"] for m in a}
    assert d[("DFW", "aws-dfw")] < d[("DFW", "gcp-ord")] < d[("DFW", "az-lhr")]
    assert 60 < d[("DFW", "az-lhr")] < 110  # ~7,600 km
    assert link("DFW", "LHR", 1) != link("DFW", "LHR", 2)  # the seed moves the route factor
    with pytest.raises(ValueError, match="unknown city code"):
        geography(["XXX"], {"a": "DFW"})


def test_sample_adds_bounded_noise_and_files_load(tmp_path: Path) -> None:
    base = geography(["SIN"], {"ap-sin": "SIN"})
    noisy = sample(base, random.Random(1), noise=0.1)
    assert abs(noisy[0]["delayMs"] / base[0]["delayMs"] - 1) <= 0.1 and noisy[0]["source"] == "drods-sim"
    f = tmp_path / "m.yaml"
    f.write_text("delayMs: {DFW: {aws-dfw: 3.5}}\n")
    assert load_matrix(f) == [{"from": "DFW", "to": "aws-dfw", "delayMs": 3.5}]


def test_cli_prints_the_put_body() -> None:
    out = CliRunner().invoke(app, ["sim", "latency", "--clients", "DFW", "--target", "aws-dfw=DFW", "--seed", "7"])
    assert out.exit_code == 0, out.output
    body = json.loads(out.output)
    assert body["measurements"][0]["from"] == "DFW" and body["measurements"][0]["to"] == "aws-dfw"
    bad = CliRunner().invoke(app, ["sim", "latency", "--clients", "QQQ", "--target", "x=DFW"])
    assert bad.exit_code != 0
