"""The policy simulator (W2/W3): determinism, figures checkable by hand, the real auto-ops, the report."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from typer.testing import CliRunner

from drods.errors import ApiError
from drods.model.reschedule import choose_evacuation
from drods.whatif.engine import PolicyRun, build_fleet, prepare, simulate
from drods.whatif.load import BackgroundLoad, apply_trace, read_trace
from drods.whatif.policies import make_policy, parse_policies
from drods.whatif.report import METRICS, comparison, figures, write_report
from drods.whatif.scenario import parse_scenario

FLAT = {"base": 0.1, "amplitude": 0.0, "noise": 0.0, "jitter": 0.0, "memoryRatio": 0.5}


def tiny(replicas: int, **over: Any) -> dict[str, Any]:
    """Two identical 64-core clusters at a flat 10 % cpu, one workload of 8-core replicas, 4 ticks of 15 min."""
    doc: dict[str, Any] = {
        "name": "tiny", "durationHours": 1, "tickMinutes": 15, "seed": 3, "waterLevelLimit": 0.8,
        "regions": [{"name": "eu"}],
        "clusters": [{"region": "eu", "count": 2, "cpu": 64, "memoryGiB": 256, "cpuCoreHour": 0.04,
                      "memoryGiBHour": 0.0}],
        "background": {"diurnal": FLAT},
        "workloads": {"items": [{"name": "app", "replicas": replicas, "cpu": 8, "memoryGiB": 0, "region": "eu"}]},
        "sla": {"waterLevel": 0.85},
        "autoops": {"preallocate": False, "peakshave": False},  # shaving has tests of its own
    }
    doc.update(over)
    return doc


def run(doc: dict[str, Any], policy: str, seed: int | None = None) -> dict[str, float]:
    scn = parse_scenario(doc)
    inputs = prepare(scn, seed)
    return figures(PolicyRun(inputs, make_policy(policy)).run(), scn.tickMinutes)


def test_tiny_scenario_figures_by_hand() -> None:
    # WaterLevel on an idle fleet (σ = 0) packs: 4 × 8 cores on one cluster → 0.1 + 32/64 = 0.6, the other 0.1.
    wl = run(tiny(4), "WaterLevel")
    assert wl["peak_water_level"] == pytest.approx(0.6) and wl["p95_water_level"] == pytest.approx(0.6)
    assert wl["spread_sd"] == pytest.approx(0.25)  # sd of {0.6, 0.1}
    assert wl["pending_replica_minutes"] == 0 and wl["replicas_moved"] == 0 and wl["sla_breaches"] == 0
    assert wl["cost"] == pytest.approx(32 * 0.04 * 1.0)  # 32 cores × $0.04 × 1 h
    assert wl["cross_domain_bytes"] == 0  # users and replicas in the same region
    # Karmada AvailableReplicas: 57.6 free cores each → 7 fit each → 2 + 2 → both at 0.1 + 16/64.
    av = run(tiny(4), "AvailableReplicas")
    assert av["peak_water_level"] == pytest.approx(0.35) and av["spread_sd"] == pytest.approx(0.0)
    assert run(tiny(4), "Aggregated")["peak_water_level"] == pytest.approx(0.6)  # fewest clusters


def test_limit_leaves_replicas_pending_where_requests_overcommit() -> None:
    # 14 × 8 cores. WaterLevel: (0.8 − 0.1) × 64 / 8 = 5.6 → 5 per cluster, 4 pending for 4 ticks of 15 min.
    wl = run(tiny(14), "WaterLevel")
    assert wl["pending_replica_minutes"] == pytest.approx(4 * 60)
    assert wl["peak_water_level"] == pytest.approx(0.1 + 40 / 64) and wl["sla_breaches"] == 0
    # AvailableReplicas sees requests only: 7 per cluster fit, all 14 placed, both at 0.975 for 4 ticks.
    av = run(tiny(14), "AvailableReplicas")
    assert av["pending_replica_minutes"] == 0
    assert av["peak_water_level"] == pytest.approx(0.1 + 56 / 64)
    assert av["sla_breaches"] == 2 * 4  # cluster-ticks above the SLA water level
    # 112 cores requested, (0.8 − 0.1) × 64 × 2 = 89.6 under the limit: the fleet is full every tick, so
    # all of WaterLevel's pending falls in full minutes and the comparison says pending gives way, and why
    assert wl["full_minutes"] == 60 and wl["pending_replica_minutes_not_full"] == 0
    assert av["full_minutes"] == 60  # the demand's, whichever policy runs
    verdict = comparison({"WaterLevel": wl, "AvailableReplicas": av})["AvailableReplicas"]
    assert verdict["dominates"] is False and verdict["worseOn"] == ["pending_replica_minutes"]
    why = verdict["givesWay"]["pending_replica_minutes"]
    assert "for 60 min" in why and "(240 replica-min)" in why and "(8 water-level breaches)" in why
    # 10 × 8 = 80 cores fit under the limit as fluid (89.6) but not as whole replicas (5 a cluster, 73.6
    # surely): still full; 9 × 8 = 72 fits, nothing pending and no full minute
    assert run(tiny(10), "WaterLevel")["full_minutes"] == 60
    roomy = run(tiny(9), "WaterLevel")
    assert roomy["full_minutes"] == 0 and roomy["pending_replica_minutes"] == 0


def test_pending_gives_way_only_where_the_fleet_was_full() -> None:
    from drods.whatif.report import gives_way

    wl = {"pending_replica_minutes": 100.0, "pending_replica_minutes_not_full": 10.0, "full_minutes": 30.0}
    b = {"pending_replica_minutes": 0.0, "sla_water_level_breaches": 7}
    assert gives_way(wl, b, ["pending_replica_minutes"]) == {}  # 10 replica-min pending with room to spare
    assert list(gives_way(wl, {**b, "pending_replica_minutes": 10.0}, ["pending_replica_minutes"])) == [
        "pending_replica_minutes"]
    assert gives_way({**wl, "full_minutes": 0.0}, {**b, "pending_replica_minutes": 10.0},
                     ["pending_replica_minutes"]) == {}
    # a worse peak with no ideal above the baseline's is a loss, not a figure the scenario forced
    assert gives_way(wl, {**b, "pending_replica_minutes": 10.0}, ["peak_water_level"]) == {}


def test_the_peak_gives_way_where_the_users_slo_leaves_no_lower_one() -> None:
    # users in eu (SLO 50 ms), us 100 ms away. eu-000 at 0.25, us-000 at 0.1: WaterLevel keeps the 4 × 8 cores
    # within the SLO on eu (0.25 + 32/64 = 0.75); AvailableReplicas spreads 2 + 2 (0.5 and 0.35) and breaches
    # the users' SLO every tick. No placement within the SLO peaks below 0.75: the peak gives way
    doc = tiny(4, regions=[{"name": "eu", "latencyMs": {"us": 100}}, {"name": "us"}],
               clusters=[{"region": r, "count": 1, "cpu": 64, "memoryGiB": 256} for r in ("eu", "us")],
               events=[{"at": 0, "type": "surge", "cluster": "eu-000", "factor": 2.5}],
               sla={"waterLevel": 0.85, "latencyMs": 50})
    wl, av = run(doc, "WaterLevel"), run(doc, "AvailableReplicas")
    assert wl["peak_water_level"] == pytest.approx(0.75) and wl["ideal_peak_max"] == pytest.approx(0.75)
    assert av["peak_water_level"] == pytest.approx(0.5) and av["sla_latency_breaches"] == 4
    verdict = comparison({"WaterLevel": wl, "AvailableReplicas": av})["AvailableReplicas"]
    assert verdict["worseOn"] == ["peak_water_level"]
    why = verdict["givesWay"]["peak_water_level"]
    assert "rose to 0.750, above the baseline's 0.500" in why and "(0 latency breaches against 4)" in why
    # us within a 150 ms SLO: a placement within it could peak at 0.425, so the same peak is a loss
    doc["sla"]["latencyMs"] = 150
    wide = run(doc, "WaterLevel")
    assert wide["ideal_peak_max"] == pytest.approx(0.425) and wide["peak_water_level"] > av["peak_water_level"]
    verdict = comparison({"WaterLevel": wide, "AvailableReplicas": av})["AvailableReplicas"]
    assert verdict["worseOn"] == ["peak_water_level"] and verdict["givesWay"] == {}


def test_failover_and_latency_and_cross_domain() -> None:
    doc = tiny(4, regions=[{"name": "eu", "latencyMs": {"us": 100}}, {"name": "us"}],
               clusters=[{"region": "eu", "count": 1, "cpu": 128, "memoryGiB": 256},  # most room: packed first
                         {"region": "us", "count": 1, "cpu": 64, "memoryGiB": 256}],
               events=[{"at": 30, "type": "fail", "cluster": "eu-000"}], sla={"waterLevel": 0.85, "latencyMs": 50})
    doc["workloads"]["trafficMBps"] = 1.0
    doc["workloads"]["stateGiB"] = 2.0
    f = run(doc, "WaterLevel")
    # ticks 0, 1 on eu-000 (users' region); eu-000 fails at minute 30: the 4 replicas fail over to us-000
    assert f["replicas_moved"] == 4
    assert f["sla_breaches"] == 2  # ticks 2 and 3: replicas 100 ms from their users (SLA 50 ms)
    traffic = 4 * 1e6 * 15 * 60 * 2  # 4 replicas × 1 MB/s × 15 min × 2 ticks away from home
    assert f["cross_domain_bytes"] == pytest.approx(traffic + 4 * 2.0 * 1024**3)


def test_sustained_breach_evacuates_through_the_real_auto_ops() -> None:
    doc = tiny(4, durationHours=2, tickMinutes=5, sustainedMinutes=10,
               clusters=[{"region": "eu", "count": 1, "cpu": 64, "memoryGiB": 256, "names": ["big"]},
                         {"region": "eu", "count": 1, "cpu": 32, "memoryGiB": 128, "names": ["small"]}],
               events=[{"at": 30, "type": "surge", "cluster": "big", "factor": 7}])
    doc["workloads"]["items"][0]["cpu"] = 4
    inputs = prepare(parse_scenario(doc))
    run_ = PolicyRun(inputs, make_policy("WaterLevel"))
    tr = run_.run()
    # big: 0.1 → 0.7 background at minute 30, + 4 × 4/64 → 0.95 > 0.8 for 10 minutes → evacuate
    assert tr.operations.get("Evacuate:executed") == 1, tr.operations
    # then big is calm at 0.7 (< 0.8 − 0.05) for restoreAfterSeconds: one replica is offered back (0.7625 fits)
    assert tr.operations.get("Restore:executed") == 1, tr.operations
    assert run_.workloads["app"].placement == {0: 1, 1: 3}
    assert tr.moved == 4 + 1
    assert float(np.nanmax(tr.water_level[-6:, 0])) == pytest.approx(0.7 + 4 / 64)  # below its limit again
    # the Karmada baselines never move for load
    assert PolicyRun(inputs, make_policy("AvailableReplicas")).run().moved == 0


def test_peak_shaving_spreads_a_packed_cluster_through_the_descheduler_decision() -> None:
    # packed at 0.6 / 0.1 (σ = 0 on an idle fleet); the achievable level is 0.35: two 8-core replicas move
    doc = tiny(4, autoops={"preallocate": False, "peakshaveAfterSeconds": 900})
    run_ = PolicyRun(prepare(parse_scenario(doc)), make_policy("WaterLevel"))
    tr = run_.run()
    assert tr.operations == {"Rebalance:executed": 1}, tr.operations
    assert run_.workloads["app"].placement == {0: 2, 1: 2} and tr.moved == 2
    # hot at minute 0, shaved once hot for the 15-minute damping window
    assert tr.water_level.max(axis=1).tolist() == pytest.approx([0.6, 0.35, 0.35, 0.35])
    assert float(tr.ideal_peak[0]) == pytest.approx(0.35)
    # a minimum gain above what the move brings leaves the placement alone
    doc["autoops"]["peakshaveMinGain"] = 0.3
    assert run(doc, "WaterLevel")["replicas_moved"] == 0


def generated_day() -> dict[str, Any]:
    """Six hours of generated workloads on two regions 120 ms apart; region a fails for an hour."""
    return {
        "name": "gen", "durationHours": 6, "tickMinutes": 10, "seed": 11,
        "regions": [{"name": "a", "utcOffsetHours": 8, "latencyMs": {"b": 120}}, {"name": "b"}],
        "clusters": [{"region": "a", "count": 4, "cpu": 32}, {"region": "b", "count": 4, "cpu": 32}],
        "workloads": {"generate": {"initial": 10, "events": 120}},
        "events": [{"at": 120, "type": "fail", "region": "a", "durationMinutes": 60}],
    }


def test_deterministic_for_a_seed() -> None:
    doc = generated_day()
    scn = parse_scenario(doc)
    a = simulate(prepare(scn), ["WaterLevel", "Static"])
    b = simulate(prepare(scn), ["WaterLevel", "Static"])
    for name in a:
        assert figures(a[name], 10) == figures(b[name], 10)
        np.testing.assert_array_equal(a[name].water_level, b[name].water_level)
    c = simulate(prepare(scn, seed=12), ["WaterLevel"])
    assert not np.array_equal(a["WaterLevel"].water_level, c["WaterLevel"].water_level)


def test_report_files_and_valid_pngs(tmp_path: Path) -> None:
    import matplotlib.image as mpimg

    scn = parse_scenario(tiny(6))
    inputs = prepare(scn)
    traces = simulate(inputs, ["WaterLevel", "AvailableReplicas"])
    summary = write_report(tmp_path, inputs, traces)
    on_disk = json.loads((tmp_path / "summary.json").read_text())
    assert on_disk == json.loads(json.dumps(summary))
    assert on_disk["scenario"] == "tiny" and on_disk["seed"] == 3
    for figs in on_disk["policies"].values():
        assert set(figs) == set(METRICS) and all(isinstance(v, int | float) for v in figs.values())
    for png in ("water_level.png", "pending.png", "comparison.png", "ideal.png"):
        data = (tmp_path / png).read_bytes()
        assert data[:8] == b"\x89PNG\r\n\x1a\n"
        img = mpimg.imread(tmp_path / png)
        assert img.shape[0] > 100 and img.shape[1] > 100
        assert png in (tmp_path / "index.html").read_text()
    # the page reads as figures, not as Python floats and JSON: bytes whole with separators, the
    # comparison a table naming whether WaterLevel dominates
    page = (tmp_path / "index.html").read_text()
    assert "<pre>" not in page and "<th>dominates</th>" in page
    wl_bytes = on_disk["policies"]["WaterLevel"]["cross_domain_bytes"]
    assert f"<td>{wl_bytes:,.0f}</td>" in page and ".0</td>" not in page


def test_trace_csv_replaces_the_generator(tmp_path: Path) -> None:
    csv = tmp_path / "t.csv"
    csv.write_text("time,cluster,cpu,memory\n"
                   "2026-01-01T00:00:00Z,eu-000,0.2,0.1\n"
                   "2026-01-01T00:30:00Z,eu-000,60,0.3\n")  # 60 → percent
    scn = parse_scenario(tiny(1))
    fleet = build_fleet(scn)
    load = BackgroundLoad(np.full((4, 2), 0.5), np.full((4, 2), 0.5))
    assert apply_trace(load, read_trace(csv), fleet.names, 15) == 1
    np.testing.assert_allclose(load.cpu[:, 0], [0.2, 0.4, 0.6, 0.6])  # interpolated, then held
    np.testing.assert_allclose(load.cpu[:, 1], 0.5)  # not in the trace: unchanged
    bad = tmp_path / "bad.csv"
    bad.write_text("when,cluster,cpu\n1,a,0.1\n")
    with pytest.raises(ApiError) as e:
        read_trace(bad)
    assert e.value.status == 422
    typo = tmp_path / "typo.csv"  # a cluster the scenario does not have: said, not skipped unseen
    typo.write_text("time,cluster,cpu,memory\n0,eu-000,0.2,0.1\n900,eu-999,0.2,0.2\n")
    with pytest.raises(ApiError) as e:
        apply_trace(load, read_trace(typo), fleet.names, 15)
    assert e.value.status == 422 and "eu-999" in e.value.message and "eu-000, eu-001" in e.value.message


def test_bad_scenarios_are_validation_errors() -> None:
    for doc, field in [
        ({**tiny(1), "clusters": [{"region": "eu"}, {"region": "mars"}]}, "clusters[1].region"),
        # latencies to a region that is not there, below zero, or said two ways
        ({**tiny(1), "regions": [{"name": "eu", "latencyMs": {"mars": 5}}]}, "regions[0].latencyMs.mars"),
        ({**tiny(1), "regions": [{"name": "eu", "latencyMs": {"us": -160}}, {"name": "us"}]},
         "regions[0].latencyMs.us"),
        ({**tiny(1), "regions": [{"name": "eu", "latencyMs": {"us": 160}}, {"name": "us", "latencyMs": {"eu": 5}}]},
         "regions[1].latencyMs.eu"),
        ({**tiny(1), "regions": [{"name": "eu", "latencyMs": {"eu": 5}}]}, "regions[0].latencyMs.eu"),
        ({**tiny(1), "tickMinutes": 0}, "tickMinutes"),
        ({**tiny(1), "events": [{"at": 1, "type": "fail"}]}, "events[0]"),
        ({**tiny(1), "events": [{"at": 3000, "type": "surge", "region": "eu"}]}, "events[0].at"),  # after its end
        # generated ranges: below zero (it crashed mid-run), or the wrong way round (numpy's "low >= high")
        ({**tiny(1), "workloads": {"generate": {"cpu": [-1, 0.5]}}}, "workloads.generate.cpu"),
        ({**tiny(1), "workloads": {"generate": {"replicas": [10, 2]}}}, "workloads.generate.replicas"),
        ({**tiny(1), "colour": "blue"}, "colour"),
        ({**tiny(1), "pluginArgs": {"UserLatency": {"nearMs": -1}}}, ""),
        ({**tiny(1), "pluginArgs": {"Nope": {}}}, ""),
    ]:
        with pytest.raises(ApiError) as e:
            parse_scenario(doc)
        assert e.value.status == 422 and e.value.code == "VALIDATION_FAILED"
        assert any(f["field"].startswith(field) for f in e.value.details["fields"]), (field, e.value.details)
    with pytest.raises(ValueError):
        parse_policies("WaterLevel,Nope")
    with pytest.raises(ValueError, match=r"events\[0\]\.cluster: unknown cluster 'eu-009'"):
        prepare(parse_scenario({**tiny(1), "events": [{"at": 1, "type": "fail", "cluster": "eu-009"}]}))


def test_a_group_named_by_its_names_needs_no_count() -> None:
    doc = {**tiny(1), "clusters": [{"region": "eu", "names": ["a1", "a2"]}, {"region": "eu", "names": ["a3"]}]}
    assert prepare(parse_scenario(doc)).fleet.names == ["a1", "a2", "a3"]
    with pytest.raises(ApiError) as e:  # a count that says otherwise is still an error
        parse_scenario({**tiny(1), "clusters": [{"region": "eu", "names": ["a1", "a2"], "count": 3}]})
    assert "names lists 2 clusters but count is 3" in str(e.value.details)


def test_choose_evacuation_most_replicas_first_until_the_fraction() -> None:
    on = [(2, "b"), (5, "a"), (2, "a2"), (1, "z")]
    assert choose_evacuation(on, 0.25) == [(5, "a")]  # 25 % of 10 = 2.5 → the 5 covers it
    assert choose_evacuation(on, 0.6) == [(5, "a"), (2, "a2")]  # 6 → 5 + 2, ties by name
    assert choose_evacuation([(1, "x")], 0.01) == [(1, "x")]  # at least one replica


def test_simulate_command(tmp_path: Path) -> None:
    from drods.cli.main import app

    scen = tmp_path / "s.json"
    scen.write_text(json.dumps(tiny(4)))
    out = tmp_path / "report"
    r = CliRunner().invoke(app, ["simulate", "--scenario", str(scen), "--out", str(out), "--policies",
                                 "WaterLevel,Static", "--seed", "5"])
    assert r.exit_code == 0, r.output
    summary = json.loads((out / "summary.json").read_text())
    assert summary["seed"] == 5 and list(summary["policies"]) == ["WaterLevel", "Static"]
    assert (out / "index.html").exists()
    # the printout carries the ideal, both kinds of SLA breaches and dominance per baseline
    for head in ("IDEAL PEAK", "PEAK GAP", "SLA WL", "SLA LATENCY", "P95 LATENCY MS", "LATENCY GAP MS", "DOMINATES"):
        assert head in r.output, r.output
    row = [line.split(None, 2) for line in r.output.splitlines() if line.startswith("Static ")][-1]
    verdict = summary["comparison"]["Static"]
    assert row[1:] == [str(verdict["dominates"]).lower(), ", ".join(verdict["worseOn"]) or "-"], r.output
    # one policy: the key is there all the same (docs/whatif.md), with nothing to compare
    r = CliRunner().invoke(app, ["simulate", "--scenario", str(scen), "--out", str(tmp_path / "one"), "--policies",
                                 "WaterLevel"])
    assert r.exit_code == 0 and json.loads((tmp_path / "one" / "summary.json").read_text())["comparison"] == {}
    r = CliRunner().invoke(app, ["simulate", "--scenario", str(scen), "--out", str(out), "--policies", "Best"])
    assert r.exit_code == 2
    # an --out that is a file, or a negative --seed, is said before anything runs (it was a traceback at the end)
    (tmp_path / "afile").write_text("kept")
    r = CliRunner().invoke(app, ["simulate", "--scenario", str(scen), "--out", str(tmp_path / "afile")])
    said = " ".join(r.output.replace("│", " ").split())  # the error box wraps a long path
    assert r.exit_code == 2 and "is a file, not a folder" in said and (tmp_path / "afile").read_text() == "kept", said
    r = CliRunner().invoke(app, ["simulate", "--scenario", str(scen), "--out", str(out), "--seed", "-5"])
    assert r.exit_code == 2 and "--seed" in r.output, r.output
    broken = copy.deepcopy(tiny(4))
    broken["regions"] = []
    scen.write_text(json.dumps(broken))
    r = CliRunner().invoke(app, ["simulate", "--scenario", str(scen), "--out", str(tmp_path / "x")])
    assert r.exit_code == 1 and "VALIDATION_FAILED" in r.output and not (tmp_path / "x").exists()


def test_a_clusters_own_limit_drives_its_evacuation() -> None:
    def evacuations(big_limit: float | None) -> int:
        doc = tiny(4, durationHours=2, tickMinutes=5, sustainedMinutes=10,
                   clusters=[{"region": "eu", "count": 1, "cpu": 64, "memoryGiB": 256, "names": ["big"],
                              "waterLevelLimit": big_limit},
                             {"region": "eu", "count": 1, "cpu": 32, "memoryGiB": 128, "names": ["small"]}],
                   events=[{"at": 30, "type": "surge", "cluster": "big", "factor": 5}])
        doc["workloads"]["items"][0]["cpu"] = 4
        tr = PolicyRun(prepare(parse_scenario(doc)), make_policy("WaterLevel")).run()
        return tr.operations.get("Evacuate:executed", 0)

    # big: 0.5 background + 0.25 = 0.75 — under the default 0.8, over its own 0.7
    assert evacuations(None) == 0
    assert evacuations(0.7) == 1


def test_comparison_against_the_issues_targets() -> None:
    base = {"peak_water_level": 1.0, "pending_replica_minutes": 100.0, "replicas_moved": 5}
    wl = {"peak_water_level": 0.7, "pending_replica_minutes": 20.0, "replicas_moved": 9}
    c = comparison({"WaterLevel": wl, "B": base})["B"]
    assert c == {"peakReduction": 0.3, "peakTargetMet": True, "pendingRatio": 0.2, "pendingTargetMet": True,
                 "movedExtra": 4, "dominates": True, "worseOn": [], "givesWay": {}}
    c = comparison({"WaterLevel": {**wl, "peak_water_level": 0.75}, "B": {**base, "pending_replica_minutes": 0.0}})
    assert c["B"]["peakTargetMet"] is False and c["B"]["pendingRatio"] is None
    assert c["B"]["pendingTargetMet"] is False  # pending where the baseline has none


def test_dominance_per_figure_with_cost_slack() -> None:
    from drods.whatif.report import dominance

    b = {"peak_water_level": 0.9, "sla_water_level_breaches": 10, "sla_latency_breaches": 100,
         "pending_replica_minutes": 0.0, "cross_domain_bytes": 5.0, "cost": 100.0}
    assert dominance({**b, "cost": 104.9}, b) == {"dominates": True, "worseOn": []}
    worse = dominance({**b, "sla_latency_breaches": 101, "cost": 105.1}, b)
    assert worse == {"dominates": False, "worseOn": ["sla_latency_breaches", "cost"]}


def test_ideal_bounds_by_hand() -> None:
    from drods.whatif.ideal import fluid_level, ideal_latency_hist, ideal_peak, nearest_fill, weighted_p95

    # 3 clusters of 10 cores at 0.2, 0.3, 0.5: 3 cores fill 0.2→0.3 (1 core), then 2 more over two → 0.4;
    # the 0.5 cluster's own load bounds the peak
    assert fluid_level(np.array([0.2, 0.3, 0.5]), np.full(3, 10.0), 3.0) == pytest.approx(0.5)
    assert fluid_level(np.array([0.2, 0.3, 0.9]), np.array([10.0, 10.0, 1.0]), 3.0) == pytest.approx(0.9)
    assert fluid_level(np.array([0.2, 0.3]), np.array([10.0, 10.0]), 5.0) == pytest.approx(0.5)
    up = np.array([True, True, False])
    assert ideal_peak(np.array([0.2, 0.3, 0.0]), np.zeros(3), np.full(3, 10.0), np.full(3, 10.0), up,
                      5.0, 0.0) == pytest.approx(0.5)  # the down cluster takes nothing
    assert nearest_fill(np.array([5.0, 1.0, 3.0]), np.ones(3), np.full(3, 2.0), 4.0).tolist() == [1.0, 2.0, 1.0]
    # two regions, clusters at 5 ms (room 2 cores) and 90 ms: region 0 needs 3 cores in 3 replicas
    lat = np.array([[5.0, 90.0], [90.0, 5.0]])
    bins = np.unique(lat)
    hist = ideal_latency_hist(lat, np.array([2.0, 2.0]), np.array([4.0, 4.0]), np.array([3.0, 0.0]),
                              np.array([3.0, 0.0]), bins)
    assert hist.tolist() == [2.0, 1.0] and weighted_p95(bins, hist) == 90.0


def test_fleet_full_by_hand() -> None:
    from drods.whatif.ideal import fits_under_limits

    # two 10-core clusters at 0.2 and 0.5 under a 0.8 limit: 6 + 3 = 9 cores of room (memory idle)
    bg, cap, up, lim = np.array([0.2, 0.5]), np.full(2, 10.0), np.array([True, True]), np.full(2, 0.8)
    free = np.zeros(2)
    assert fits_under_limits(bg, free, cap, cap, up, lim, 9.0, 0.0)
    assert not fits_under_limits(bg, free, cap, cap, up, lim, 9.5, 0.0)
    # 2-core replicas: each cluster surely takes its room less one replica: 4 + 1 = 5 cores
    assert fits_under_limits(bg, free, cap, cap, up, lim, 5.0, 0.0, 2.0)
    assert not fits_under_limits(bg, free, cap, cap, up, lim, 6.0, 0.0, 2.0)
    # a down cluster has no room; memory counts as cpu does
    assert not fits_under_limits(bg, free, cap, cap, np.array([False, True]), lim, 4.0, 0.0)
    assert not fits_under_limits(bg, np.full(2, 0.7), cap, cap, up, lim, 1.0, 3.0)


def test_scenario_plugin_args_reach_the_default_policy_only() -> None:
    # users in eu, SLO 100 ms; us (90 ms) within it and idle, eu busy: the default band fills eu first,
    # nearMs = the SLO lets the water level decide within it
    doc = tiny(4, regions=[{"name": "eu", "latencyMs": {"us": 90}}, {"name": "us"}],
               clusters=[{"region": "eu", "count": 1, "cpu": 64, "memoryGiB": 256},
                         {"region": "us", "count": 1, "cpu": 64, "memoryGiB": 256}],
               background={"diurnal": {**FLAT, "base": 0.45}},
               events=[{"at": 0, "type": "surge", "cluster": "eu-000", "factor": 1.6}],
               sla={"waterLevel": 0.85, "latencyMs": 100},
               # the users' band to its caps (no ceiling over the bands' mean): the band alone decides
               pluginArgs={"UserLatency": {"nearCeilingMargin": None}})
    doc["workloads"]["items"][0]["cpu"] = 1
    near = figures(simulate(prepare(parse_scenario(doc)), ["WaterLevel"])["WaterLevel"], 15)
    wide = {**doc, "pluginArgs": {"UserLatency": {"nearMs": 100}}}
    scn = parse_scenario(wide)
    traces = simulate(prepare(scn), ["WaterLevel", "Static"])
    within = figures(traces["WaterLevel"], scn.tickMinutes)
    assert near["cross_domain_bytes"] == 0 and near["p95_user_latency_ms"] == 5.0
    assert within["cross_domain_bytes"] > 0 and within["p95_user_latency_ms"] == 90.0
    assert within["sla_latency_breaches"] == 0 and within["peak_water_level"] < near["peak_water_level"]
    assert figures(traces["Static"], scn.tickMinutes) == run(doc, "Static")  # the baselines are untouched


def test_default_policy_follows_its_users_in_the_simulator() -> None:
    # users in eu, a cheaper but empty us region 100 ms away (SLA 50 ms): only WaterLevel knows the users
    doc = tiny(4, regions=[{"name": "eu", "latencyMs": {"us": 100}}, {"name": "us"}],
               clusters=[{"region": "eu", "count": 1, "cpu": 64, "memoryGiB": 256},
                         {"region": "us", "count": 1, "cpu": 128, "memoryGiB": 256}],
               sla={"waterLevel": 0.85, "latencyMs": 50})
    wl, av = run(doc, "WaterLevel"), run(doc, "AvailableReplicas")
    assert wl["sla_latency_breaches"] == 0 and wl["p95_user_latency_ms"] == 5.0 and wl["latency_gap_ms"] == 0.0
    assert av["sla_latency_breaches"] == 4 and av["p95_user_latency_ms"] == 100.0
    assert av["latency_gap_ms"] == 95.0 and av["cross_domain_bytes"] > wl["cross_domain_bytes"] == 0


def test_ideal_peak_within_the_latency_slo_by_hand() -> None:
    from drods.whatif.ideal import ideal_peak, ideal_peak_within_slo, place_sets, slo_level

    # two regions, two 10-core clusters at 0.2; region 0's 4 cores may use only its own cluster
    bg, cap, up = np.array([0.2, 0.2]), np.full(2, 10.0), np.ones(2, dtype=bool)
    own = np.eye(2, dtype=bool)
    assert ideal_peak(bg, bg, cap, cap, up, 4.0, 0.0) == pytest.approx(0.4)  # free: spread over both
    assert slo_level(bg, cap, np.array([4.0, 0.0]), own) == pytest.approx(0.6)  # bound: one cluster
    assert ideal_peak_within_slo(bg, bg, cap, cap, up, np.array([4.0, 0.0]), np.zeros(2), own, 0.8) == \
        pytest.approx(0.6)
    # Hall: each region alone fits at 0.5 on its own cluster, but both want cluster 0 (region 1 may use both)
    reach = np.array([[True, True], [False, True]])
    assert slo_level(bg, cap, np.array([3.0, 3.0]), reach) == pytest.approx(0.5)
    assert slo_level(bg, cap, np.array([5.0, 1.0]), reach) == pytest.approx(0.7)  # region 0 alone: 0.2 + 0.5
    # past the limit the SLO gives way: the bound is the free one, never below the limit
    assert ideal_peak_within_slo(bg, bg, cap, cap, up, np.array([8.0, 0.0]), np.zeros(2), own, 0.8) == \
        pytest.approx(0.8)
    assert slo_level(bg, cap, np.array([1.0, 0.0]), np.zeros((2, 2), dtype=bool)) == float("inf")
    # demand running beyond the SLO may go anywhere: 2 cores more leave region 0's own cluster the highest
    # (0.6); 8 more fill both clusters past it (12 cores over 20: 0.8)
    assert slo_level(bg, cap, np.array([4.0, 0.0]), own, 2.0) == pytest.approx(0.6)
    assert slo_level(bg, cap, np.array([4.0, 0.0]), own, 8.0) == pytest.approx(0.8)
    assert ideal_peak_within_slo(bg, bg, cap, cap, up, np.zeros(2), np.zeros(2), own, 0.8,
                                 beyond_cpu=4.0) == pytest.approx(0.4)  # nothing within: spread over both
    assert [s.tolist() for s in place_sets(2)] == [[0], [1], [0, 1]] and len(place_sets(13)) == 14


def eu_down_for_an_hour() -> dict[str, Any]:
    """Users in eu (SLO 50 ms) on its one 128-core cluster, down from minute 30 to 90; us, 100 ms away, 64 cores."""
    return tiny(4, durationHours=3, tickMinutes=5,
                regions=[{"name": "eu", "latencyMs": {"us": 100}}, {"name": "us"}],
                clusters=[{"region": "eu", "count": 1, "cpu": 128, "memoryGiB": 256},
                          {"region": "us", "count": 1, "cpu": 64, "memoryGiB": 256}],
                events=[{"at": 30, "type": "fail", "cluster": "eu-000", "durationMinutes": 60}],
                sla={"waterLevel": 0.85, "latencyMs": 50})


def test_failed_over_replicas_fail_back_after_the_damping_window() -> None:
    doc = eu_down_for_an_hour()
    inputs = prepare(parse_scenario(doc))
    back = PolicyRun(inputs, make_policy("WaterLevel"))
    tr = back.run()
    # eu-000 is back at minute 90, calm from then on: after failbackAfterSeconds (300 s) the four
    # replicas go back to their users' region — one Rebalance, naming the recovered cluster
    assert tr.operations == {"Rebalance:executed": 1}, tr.operations
    assert back.workloads["app"].placement == {0: 4} and tr.moved == 4 + 4
    assert tr.latency_breaches == (95 - 30) // 5  # ticks at minutes 30..90 away from the users
    doc["autoops"] = {"preallocate": False, "failback": False, "peakshave": False}  # as Karmada: failed over for good
    stay = PolicyRun(prepare(parse_scenario(doc)), make_policy("WaterLevel"))
    assert stay.run().moved == 4 and stay.workloads["app"].placement == {1: 4}


def test_replicas_placed_away_from_their_users_return_once_their_region_has_had_room() -> None:
    # eu's one cluster surges to 0.8 (its limit) for the first 30 minutes: app (users in eu, SLO 150 ms)
    # goes to us at 90 ms. From minute 30 eu is back at 0.1; after the 15-minute window it takes back
    # what keeps it under the fill level (0.1 + 32/128 = 0.35) − the margin: one 8-core replica (0.125)
    doc = tiny(4, durationHours=1.5,
               regions=[{"name": "eu", "latencyMs": {"us": 90}}, {"name": "us"}],
               clusters=[{"region": r, "count": 1, "cpu": 64, "memoryGiB": 256} for r in ("eu", "us")],
               events=[{"at": 0, "type": "surge", "cluster": "eu-000", "factor": 8, "durationMinutes": 30}],
               sla={"waterLevel": 0.85, "latencyMs": 150},
               # no shave pays (a gain of 0.9): what moves is the return
               autoops={"preallocate": False, "peakshaveAfterSeconds": 900, "peakshaveMinGain": 0.9})
    run_ = PolicyRun(prepare(parse_scenario(doc)), make_policy("WaterLevel"))
    tr = run_.run()
    # (the surge is a sustained breach on eu, with nothing of app's there to evacuate)
    assert tr.operations == {"Evacuate:refused": 1, "Rebalance:executed": 1}, tr.operations
    assert run_.workloads["app"].placement == {0: 1, 1: 3} and tr.moved == 1
    # eu has room from minute 30; a window later (minute 45) it takes one replica back from us
    np.testing.assert_allclose(tr.water_level, [[0.8, 0.6], [0.8, 0.6], [0.1, 0.6]] + [[0.225, 0.475]] * 3,
                               atol=1e-6)
    doc["autoops"]["peakshaveReturn"] = False
    assert run(doc, "WaterLevel")["replicas_moved"] == 0


def test_the_ideal_within_the_slo_stays_a_lower_bound_while_the_users_region_is_down() -> None:
    # eu-000 (the users' only cluster within the 50 ms SLO) is down from minute 30 to 90: app runs on us,
    # 100 ms away. No placement within the SLO exists then, so the bound counts where the replicas run
    # beyond it (the SLO gave way): us at 0.1 + 32/64 = 0.6 — not the limit, which nothing reaches
    doc = eu_down_for_an_hour()
    doc["autoops"] = {"preallocate": False, "failback": False, "peakshave": False}  # stays on us once there
    tr = PolicyRun(prepare(parse_scenario(doc)), make_policy("WaterLevel")).run()
    peak = np.nanmax(tr.water_level, axis=1)
    assert np.all(tr.ideal_peak <= peak + 1e-6), (tr.ideal_peak - peak).max()  # water levels are float32
    np.testing.assert_allclose(tr.ideal_peak[6:18], 0.6)  # eu down: the replicas' own cluster, us
    # eu back (minute 90) and app still on us, beyond its SLO: eu or us, whichever is lower, still bounds it
    np.testing.assert_allclose(tr.ideal_peak[18:], 0.1 + 32 / (128 + 64))
    assert figures(tr, 5)["peak_gap_mean"] >= 0


def test_no_tick_of_a_generated_day_has_its_ideal_above_its_peak() -> None:
    # region a fails for an hour; b is 120 ms from a's users, beyond their 100 ms SLO: they run there meanwhile
    doc = {**generated_day(), "sla": {"waterLevel": 0.85, "latencyMs": 100}}
    for name, tr in simulate(prepare(parse_scenario(doc)), ["WaterLevel", "AvailableReplicas"]).items():
        peak = np.nanmax(tr.water_level, axis=1)
        assert np.all(tr.ideal_peak <= peak + 1e-6), (name, float((tr.ideal_peak - peak).max()))
        assert figures(tr, 10)["ideal_peak_max"] <= figures(tr, 10)["peak_water_level"]
    assert tr.latency_breaches > 0  # (AvailableReplicas) the SLO is one a placement can miss here


def test_a_drain_in_one_policys_run_does_not_reach_the_next() -> None:
    """Every policy replays the same inputs: a cordon (a drain never uncordoned within the scenario) made in
    one run left the next policy's clusters cordoned from minute 0, and nothing placed."""
    doc = tiny(4, durationHours=2, events=[{"at": 30, "type": "drain", "cluster": "eu-000"},
                                           {"at": 30, "type": "drain", "cluster": "eu-001"}])
    scn = parse_scenario(doc)
    inputs = prepare(scn)
    first = figures(PolicyRun(inputs, make_policy("WaterLevel")).run(), scn.tickMinutes)
    after = figures(PolicyRun(inputs, make_policy("AvailableReplicas")).run(), scn.tickMinutes)
    alone = run(doc, "AvailableReplicas")
    assert after == alone and after["pending_replica_minutes"] == 0, (after, alone)
    assert first == run(doc, "WaterLevel")


def test_a_replica_no_cluster_can_hold_is_pending_but_does_not_make_the_fleet_full() -> None:
    """One 100-core replica on 64-core clusters is never placed: that pending is not the fleet being full
    (which would excuse any policy's pending as giving way), and the 8-core app beside it still counts."""
    doc = tiny(2)
    doc["workloads"]["items"].append({"name": "giant", "replicas": 1, "cpu": 100, "memoryGiB": 0, "region": "eu"})
    f = run(doc, "WaterLevel")
    assert f["full_minutes"] == 0, f
    assert f["pending_replica_minutes"] == f["pending_replica_minutes_not_full"] == 60, f  # 1 replica × 60 min
