"""Walkthrough AL: a scenario's workload items, seed, size and cluster names are checked up front, each a
VALIDATION_FAILED naming its field; ``--out`` is checked before the run; ideal.png draws each policy's ideal."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from typer.testing import CliRunner

from drods.errors import ApiError
from drods.whatif.scenario import MAX_CELLS, MAX_TICKS, load_scenario, parse_scenario
from tests.whatif.test_simulator import tiny

SHIPPED = sorted(Path("examples/scenarios").glob("*.yaml")) + sorted(Path("examples/scenarios/variants").glob("*.yaml"))


def refused(doc: dict[str, Any]) -> dict[str, str]:
    with pytest.raises(ApiError) as e:
        parse_scenario(doc)
    assert e.value.status == 422 and e.value.code == "VALIDATION_FAILED"
    fields = e.value.details["fields"]
    assert len(fields) == 1, fields
    return fields[0]  # type: ignore[no-any-return]


def item(**over: Any) -> dict[str, Any]:
    return {"name": "checkout", "replicas": 2, "cpu": 1, "memoryGiB": 0, **over}


@pytest.mark.parametrize(("items", "field", "words"), [
    ([item(scale=[[120, -16]])], "workloads.items[0].scale[0]", "-16 replicas"),
    ([item(scale=[[4000, 8]])], "workloads.items[0].scale[0]", "minute 4000"),  # the scenario is 60 minutes
    ([item(at=30, scale=[[10, 8]])], "workloads.items[0].scale[0]", "never applied"),  # before it arrives
    ([item(at=10, leaveAt=20, scale=[[30, 8]])], "workloads.items[0].scale[0]", "never applied"),  # after it left
    ([item(at=3000)], "workloads.items[0].at", "minute 3000"),
    ([item(at=30, leaveAt=10)], "workloads.items[0].leaveAt", "at 30"),
    ([item(at=30, leaveAt=30)], "workloads.items[0].leaveAt", "at 30"),
    ([item(), item(at=5)], "workloads.items[1].name", "workloads.items[0]"),
    ([item(), item(name="w2", region="mars")], "workloads.items[1].region", "mars"),
])
def test_workload_items_are_checked_with_their_field(items: list[dict[str, Any]], field: str, words: str) -> None:
    f = refused({**tiny(1), "workloads": {"items": items}})
    assert f["field"] == field and words in f["message"], f


def test_an_item_may_not_take_a_name_the_generator_gives() -> None:
    doc = {**tiny(1), "workloads": {"items": [item(name="w00003")], "generate": {"events": 10}}}
    assert refused(doc)["field"] == "workloads.items[0].name"
    doc["workloads"]["items"] = [item(name="w00011"), item(name="w3")]  # beyond the 10 events; not its form
    parse_scenario(doc)


def test_a_workload_item_within_its_life_passes() -> None:
    parse_scenario({**tiny(1), "workloads": {"items": [item(at=10, leaveAt=60, scale=[[10, 4], [59, 0]])]}})


def test_a_negative_seed_names_the_field() -> None:
    assert refused({**tiny(1), "seed": -7})["field"] == "seed"


def test_the_size_of_the_simulation_is_bounded_up_front() -> None:
    f = refused({**tiny(1), "durationHours": 744, "tickMinutes": 0.0001})
    assert f["field"] == "tickMinutes" and f"{MAX_TICKS:,}" in f["message"]
    f = refused({**tiny(1), "durationHours": 24, "tickMinutes": 5, "clusters": [{"region": "eu", "count": 100_000}]})
    assert f["field"] == "clusters" and f"{MAX_CELLS:,}" in f["message"]
    parse_scenario({**tiny(1), "durationHours": 744, "tickMinutes": 1})  # a month of 1-minute ticks: 44,640


def test_duplicate_cluster_names_name_the_clash() -> None:
    f = refused({**tiny(1), "clusters": [{"region": "eu", "count": 3}, {"region": "eu", "count": 2}]})
    assert f["field"] == "clusters[1]" and "'eu-000'" in f["message"] and "clusters[0]" in f["message"]
    f = refused({**tiny(1), "clusters": [{"region": "eu", "names": ["a", "b", "a"]}]})
    assert f["field"] == "clusters[0].names" and "'a'" in f["message"]


def test_every_shipped_scenario_still_validates() -> None:
    assert len(SHIPPED) >= 18
    for path in SHIPPED:
        scn, _ = load_scenario(path)
        assert scn.ticks <= MAX_TICKS and scn.ticks * sum(g.count for g in scn.clusters) <= MAX_CELLS


# ---------------------------------------------------------------------- simulate --out
def run_simulate(tmp_path: Path, out: str, monkeypatch: Any) -> Any:
    from drods.cli.main import app

    def never(*_a: Any, **_k: Any) -> Any:
        raise AssertionError("the simulation ran before --out was checked")

    monkeypatch.setattr("drods.whatif.engine.simulate", never)
    scen = tmp_path / "s.json"
    scen.write_text(json.dumps(tiny(4)))
    return CliRunner().invoke(app, ["simulate", "--scenario", str(scen), "--out", out, "--policies", "Static"])


def test_an_out_under_a_file_is_refused_before_the_run(tmp_path: Path, monkeypatch: Any) -> None:
    (tmp_path / "mine.yaml").write_text("x: 1\n")
    r = run_simulate(tmp_path, str(tmp_path / "mine.yaml" / "report"), monkeypatch)
    assert r.exit_code == 2 and isinstance(r.exception, SystemExit), r.output
    assert "--out" in r.output and "Traceback" not in r.output


def test_an_out_that_cannot_be_made_is_refused_before_the_run(tmp_path: Path, monkeypatch: Any) -> None:
    if not Path("/proc/self").is_dir():
        pytest.skip("needs /proc, where no folder can be made")
    r = run_simulate(tmp_path, "/proc/nope/x", monkeypatch)
    assert r.exit_code == 2 and "--out" in r.output and "Traceback" not in r.output, r.output


def test_the_out_folder_is_made_before_the_run(tmp_path: Path, monkeypatch: Any) -> None:
    out = tmp_path / "a" / "b"
    seen: list[bool] = []

    def record(*_a: Any, **_k: Any) -> Any:
        seen.append(out.is_dir())
        raise KeyboardInterrupt

    from drods.cli.main import app

    monkeypatch.setattr("drods.whatif.engine.simulate", record)
    scen = tmp_path / "s.json"
    scen.write_text(json.dumps(tiny(4)))
    CliRunner().invoke(app, ["simulate", "--scenario", str(scen), "--out", str(out), "--policies", "Static"])
    assert seen == [True] and list(out.iterdir()) == []  # made, and the probe left nothing


# ---------------------------------------------------------------------- ideal.png
def test_ideal_png_draws_each_policys_own_ideal(tmp_path: Path, monkeypatch: Any) -> None:
    import drods.whatif.report as report
    from drods.whatif.engine import prepare, simulate

    plt = report._plt()
    figs: list[Any] = []
    monkeypatch.setattr(plt, "close", figs.append)
    inputs = prepare(parse_scenario(tiny(6)))
    traces = simulate(inputs, ["WaterLevel", "AvailableReplicas", "Static"])
    traces["AvailableReplicas"].ideal_peak = traces["AvailableReplicas"].ideal_peak - 0.05  # its own, lower
    traces["Static"].ideal_peak = traces["AvailableReplicas"].ideal_peak.copy()  # the same as that one
    report.plot_ideal(tmp_path / "ideal.png", inputs, traces)
    ax = figs[0].axes[0]
    lines = {ln.get_label(): ln for ln in ax.get_lines()}
    assert "ideal of WaterLevel (lower bound)" in lines
    assert "ideal of AvailableReplicas, Static (lower bound)" in lines
    np.testing.assert_allclose(lines["ideal of AvailableReplicas, Static (lower bound)"].get_ydata(),
                               traces["Static"].ideal_peak)
    # each ideal in its policy's colour, dashed
    assert lines["ideal of WaterLevel (lower bound)"].get_color() == lines["WaterLevel"].get_color()
    assert lines["ideal of WaterLevel (lower bound)"].get_linestyle() == "--"
    monkeypatch.undo()
    plt.close(figs[0])
