"""Every decision explained (X1) against the dashboard's server and sims: ``GET /api/v1/decisions``
(list, filters, watch, bad input) and ``drods explain`` read as text, JSON and history."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
from typer.testing import CliRunner

from drods.cli.main import app
from tests.members_e2e.conftest import SIMS, Env, deploy_path, deployment, wait_for
from tests.members_e2e.test_fullpath import RPP, cleanup, placement, policy, running
from tests.ui_e2e.conftest import cli_tls

LONE = "lone"
QUERY = {"kind": "Deployment", "namespace": "default", "name": LONE}


@pytest.fixture(scope="module")
def lone(env: Env) -> Iterator[dict[str, Any]]:
    """One replica free to go to any of the three clusters: two feasible clusters receive nothing."""
    env.create(RPP, policy(LONE, LONE))
    env.create(deploy_path(), deployment(LONE, 1))
    b = wait_for(lambda: running(env, LONE), 30, "lone Running")
    assert len(placement(b)) == 1
    yield b
    cleanup(env, LONE)


def _placements(env: Env) -> list[dict[str, Any]]:
    r = env.http.get("/api/v1/decisions", params={**QUERY, "type": "Placement"})
    assert r.status_code == 200, r.text
    return list(r.json()["items"])


def test_a_placement_names_every_feasible_cluster_with_its_scores_and_why_the_runner_up_lost(
        env: Env, lone: dict[str, Any]) -> None:
    items = wait_for(lambda: _placements(env) or None, 15, "the placement decision")
    d = items[0]
    assert d["subject"] == {"kind": "Deployment", "namespace": "default", "name": LONE}
    assert d["trigger"]["reason"] == "FirstSchedule" and d["source"]["journal"] == "schedules"
    chosen = [o for o in d["options"] if o["chosen"]]
    rest = [o for o in d["options"] if not o["chosen"]]
    assert [o["name"] for o in chosen] == list(placement(lone)) and chosen[0]["replicas"] == 1
    assert {o["name"] for o in d["options"]} == set(SIMS) and d["optionsOmitted"] == 0 and d["optionsTopK"] == 10
    plugins = set(chosen[0]["scores"])
    assert {"LeastWaterLevel", "BalancedAllocation"} <= plugins <= set(d["inputs"]["weights"]["used"])
    for o in d["options"]:  # every feasible cluster with every plugin's score
        assert set(o["scores"]) == plugins and o["total"] is not None
    ru = d["runnerUp"]
    best = max(rest, key=lambda o: o["total"])
    assert ru["name"] == best["name"] and ru["against"] == chosen[0]["name"]
    assert ru["lostBy"] == pytest.approx(chosen[0]["total"] - best["total"], abs=0.01)
    assert sum(ru["differences"].values()) == pytest.approx(ru["lostBy"], abs=0.05)
    assert ru["why"].startswith(best["name"]) and all(o["reason"] for o in rest)
    assert d["inputs"]["adjuster"]["fleetWaterLevel"] is not None and d["inputs"]["candidates"]["feasible"] == 3
    # The other filters narrow: another kind, another name, another type → nothing of this workload.
    for params in ({"kind": "StatefulSet"}, {"name": "nope"}, {"type": "Scaling"}):
        r = env.http.get("/api/v1/decisions", params={**QUERY, **params})
        assert r.status_code == 200 and r.json()["items"] == [], params
    # `kind` as kubectl spells it, any case.
    assert env.http.get("/api/v1/decisions", params={**QUERY, "kind": "deployment"}).json()["items"]


def test_bad_queries_are_refused_clearly(env: Env) -> None:
    for params, field in (({"type": "Guess"}, "type"), ({"since": "yesterday"}, "since"),
                          ({"limit": 0}, "limit"), ({"watch": "true", "timeoutSeconds": 0}, "timeoutSeconds")):
        r = env.http.get("/api/v1/decisions", params=params)
        assert r.status_code == 422, (params, r.text)
        body = r.json()
        assert body["code"] and body["message"] and field in json.dumps(body["details"]), body


def test_the_watch_streams_the_decision_of_a_scale(env: Env, lone: dict[str, Any]) -> None:
    with env.http.stream("GET", "/api/v1/decisions", params={**QUERY, "watch": "true", "timeoutSeconds": 30},
                         timeout=35) as stream:
        assert stream.status_code == 200
        r = env.http.patch(deploy_path(name=LONE), json={"spec": {"replicas": 2}},
                           headers={"Content-Type": "application/merge-patch+json"})
        assert r.status_code == 200, r.text
        for line in stream.iter_lines():
            event = json.loads(line)
            assert event["type"] == "ADDED" and event["object"]["subject"]["name"] == LONE
            if event["object"]["trigger"]["reason"] == "ScaleSchedule":
                assert event["object"]["outcome"]["requested"] == 2
                break
    wait_for(lambda: sum(placement(running(env, LONE) or {"status": {}}).values()) == 2 or None, 30, "2 placed")


def _explain(env: Env, *args: str) -> str:
    """In process (the same typer app `drods` runs; a subprocess costs seconds of imports per call)."""
    done = CliRunner().invoke(app, ["explain", *args, *cli_tls(env.server)])
    assert done.exit_code == 0, done.output
    return done.stdout


def test_drods_explain_reads_as_text_json_history_and_per_cluster(env: Env, lone: dict[str, Any]) -> None:
    d = wait_for(lambda: _placements(env) or None, 15, "the placement decision")[0]  # the latest
    here = next(o["name"] for o in d["options"] if o["chosen"])
    done = env.server.run_cli("explain", f"deployment/{LONE}", "-n", "default", *cli_tls(env.server))  # as installed
    assert done.returncode == 0, done.stderr
    text = done.stdout
    assert "Kind:       Deployment" in text and f"Placement:  {here}" in text
    assert "Placement at" in text and "runner-up: " + d["runnerUp"]["why"] in " ".join(text.split())
    for o in d["options"]:
        assert o["name"] in text
    assert "WHY NOT" in text and "LEASTWATERLEVEL" in text.upper()
    out = json.loads(_explain(env, f"deploy/{LONE}", "-o", "json"))
    assert out["latest"]["Placement"]["subject"]["name"] == LONE and out["placement"]["placed"] >= 1
    history = _explain(env, f"deployment/{LONE}", "--history")
    assert "FirstSchedule" in history and "TRIGGER" in history
    # the words kubectl takes name the same workload: a plural, and its Binding (its decisions are the workload's)
    for word in (f"deployments/{LONE}", f"binding/deployment-default-{LONE}", f"bindings/deployment-default-{LONE}"):
        got = json.loads(_explain(env, word, "-o", "json"))
        assert got["subject"] == {"kind": "Deployment", "namespace": "default", "name": LONE}, (word, got["subject"])
        assert got["latest"]["Placement"]["subject"]["name"] == LONE
    # a Binding made through the API places no workload: its own decisions explain it
    r = env.http.post("/api/v1/bindings", json={"name": "bare-explained", "replicas": 1,
                                                "resources": {"cpu": 0.1, "memory": 0.1}})
    assert r.status_code in (201, 202), r.text

    def bare() -> dict[str, Any] | None:
        done = CliRunner().invoke(app, ["explain", "binding/bare-explained", "-o", "json", *cli_tls(env.server)])
        got = json.loads(done.stdout) if done.exit_code == 0 else None
        return got if got and got.get("latest") else None

    got = wait_for(bare, 15, "the bare Binding explained")
    assert got["subject"] == {"kind": "Binding", "namespace": "default", "name": "bare-explained"}, got["subject"]
    away = next(o["name"] for o in d["options"] if not o["chosen"])
    per_cluster = json.loads(_explain(env, "cluster", away, "-o", "json"))
    assert any(w["workload"] == f"Deployment/default/{LONE}" and w["reason"] for w in per_cluster["notPlaced"]) or \
        any(p["binding"] == f"deployment-default-{LONE}" for p in per_cluster["placed"])
    assert "Placed here" in _explain(env, "cluster", here)
    for bad, says in ((["nothing"], "KIND/NAME"), (["cluster"], "NAME"),
                      (["deployment/nope-at-all"], "no decision recorded"), (["cluster", "nope"], "not found")):
        failed = CliRunner().invoke(app, ["explain", *bad, *cli_tls(env.server)])
        assert failed.exit_code != 0 and says in failed.output, (bad, failed.output)
