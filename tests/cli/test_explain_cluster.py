"""``drods explain cluster NAME`` reads the descheduler's decisions about the cluster: the latest
eviction and rebalance, the water levels it saw, the bindings it weighed and why the runner-up stayed.
The API's answers are records as ``GET /api/v1/decisions`` gives them (`from_operation`)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from drods.cli.explain import _explain_cluster
from drods.model.decision import from_operation
from tests.cli.fixed_answer import FixedAnswer


class _Api:
    """The three reads `drods explain cluster` makes, answered from fixed bodies."""

    def __init__(self, decisions: list[dict[str, Any]]) -> None:
        self.decisions = decisions

    def request(self, method: str, path: str, params: Any = None, ok: Any = ()) -> FixedAnswer:
        if path == "/api/v1/clusters/c":
            # the flat view's shape: a cordon is top-level (it always printed "Cordoned: False")
            return FixedAnswer(200, {"name": "c", "unschedulable": True,
                                     "status": {"conditions": [{"type": "Ready", "status": "True"}]}})
        if path == "/api/v1/bindings":
            web = {"name": "web", "status": {"placement": [{"cluster": "a", "replicas": 6}]}}
            return FixedAnswer(200, {"items": [web]})
        assert path == "/api/v1/decisions", path
        return FixedAnswer(200, {"items": self.decisions})


EVACUATION = from_operation({
    "time": "2026-11-28T06:00:00.000Z", "kind": "Evacuate", "cluster": "c",
    "reason": "water level 0.92 above the limit 0.80 since 2026-11-28T05:59:00Z",
    "details": {"action": "evacuate", "candidates": 2, "outcome": "executed",
                "trigger": {"waterLevels": {"c": {"waterLevel": 0.92, "limit": 0.8},
                                            "a": {"waterLevel": 0.41, "limit": 0.8}}},
                "result": {"accepted": True, "moved": 6, "bindings": ["web"], "message": "rescheduling 1 binding(s)",
                           "considered": [{"binding": "web", "replicas": 6}, {"binding": "db", "replicas": 2}]}}})
RESTORE = from_operation({
    "time": "2026-11-28T06:20:00.000Z", "kind": "Restore", "cluster": "c", "reason": "water level 0.30 below",
    "details": {"action": "restore", "candidates": 2, "outcome": "skipped", "skipReason": "cooldown: 300s left",
                "trigger": {"waterLevels": {"c": {"waterLevel": 0.3, "limit": 0.8}}}}})


def test_explain_cluster_shows_the_descheduler_s_latest_decisions_with_what_they_saw(
        capsys: pytest.CaptureFixture[str]) -> None:
    _explain_cluster(_Api([RESTORE, EVACUATION]), "c", "table")  # type: ignore[arg-type]
    text = " ".join(capsys.readouterr().out.split())
    assert "Decisions about the cluster (2):" in text and "Cordoned: True" in text
    assert "Eviction at 2026-11-28T06:00:00.000Z — trigger Evacuate" in text
    assert "water levels c 92% (limit 80%), a 41% (limit 80%)" in text
    assert "2 other active cluster(s) below their limit" in text
    assert "runner-up: db has 2 replica(s) there against 6 for web" in text
    assert "Rebalance at 2026-11-28T06:20:00.000Z — trigger Restore" in text and "cooldown: 300s left" in text


def test_explain_cluster_as_json_carries_the_decisions(capsys: pytest.CaptureFixture[str]) -> None:
    _explain_cluster(_Api([EVACUATION]), "c", "json")  # type: ignore[arg-type]
    out = json.loads(capsys.readouterr().out)
    assert [d["type"] for d in out["decisions"]] == ["Eviction"]
    assert out["decisions"][0]["options"][1] == {"name": "db", "chosen": False, "feasible": True, "replicas": 2,
                                                 "reason": out["decisions"][0]["runnerUp"]["why"]}


def test_cluster_slash_name_is_the_cluster_not_a_workload(monkeypatch: pytest.MonkeyPatch,
                                                         capsys: pytest.CaptureFixture[str]) -> None:
    """``drods explain cluster/c`` (kubectl's form) answered "Cluster default/c: no binding and no decision"."""
    from typer.testing import CliRunner

    import drods.cli.explain as explain
    from drods.cli.main import app

    monkeypatch.setattr(explain, "connect", lambda *a, **k: _Api([EVACUATION]))
    done = CliRunner().invoke(app, ["explain", "cluster/c", "--server", "https://x", "--token", "t"])
    assert done.exit_code == 0, done.output
    assert "Cluster:    c" in done.output and "Eviction at 2026-11-28T06:00:00.000Z" in done.output, done.output


def test_a_workload_named_with_its_namespace_as_drods_migrate_names_it(drods: Any) -> None:
    """``drods explain statefulset/shop/db`` reads shop's db (it was read as a workload named ``shop/db``)."""
    missing = drods("explain", "statefulset/shop/db")
    assert missing.returncode == 1 and "shop/db" in missing.stderr and "default/shop" not in missing.stderr, \
        missing.stderr
    bad = drods("explain", "statefulset/a/b/c")
    assert bad.returncode == 2 and "KIND/NAMESPACE/NAME" in bad.stderr, bad.stderr


def test_a_token_limited_to_namespaces_explains_its_workload_from_its_decisions(
        capsys: pytest.CaptureFixture[str]) -> None:
    """A tenant's `drods explain deployment/web -n team-a` failed on the Binding (cluster-scoped, 403): the
    decisions are its to read, and the placement line says why it shows none."""
    from drods.cli.explain import _explain_workload
    from drods.model.decision import from_schedule

    placed = from_schedule({"time": "2026-11-28T06:00:00.000Z", "binding": "deployment-team-a-web",
                            "scheduleType": "FirstSchedule",
                            "workload": {"kind": "Deployment", "namespace": "team-a", "name": "web"},
                            "result": {"phase": "Scheduled", "placement": [{"cluster": "a", "replicas": 2}],
                                       "requested": 2, "placed": 2, "message": "scheduled 2 replicas on a"}})

    class Tenant:
        def request(self, method: str, path: str, params: Any = None, ok: Any = ()) -> FixedAnswer:
            if path.startswith("/api/v1/bindings/"):
                assert 403 in ok, "a refused Binding read must not end the command"
                return FixedAnswer(403, {"code": "FORBIDDEN", "message": "this token acts only in namespaces team-a"})
            assert path == "/api/v1/decisions" and params["namespace"] == "team-a", (path, params)
            return FixedAnswer(200, {"items": [placed]})

    _explain_workload(Tenant(), "Deployment", "team-a", "web", False, "table")  # type: ignore[arg-type]
    text = " ".join(capsys.readouterr().out.split())
    assert "Placement: not readable with this token (Bindings are cluster-scoped)" in text, text
    assert "scheduled 2 replicas on a" in text, text


def test_kubectl_s_resource_group_form_names_the_kind() -> None:
    """``drods explain deployments.apps/web`` (kubectl's form) looked for a kind "Deployments.apps"."""
    from drods.cli.explain import _kind_of

    assert [_kind_of(w) for w in ("deployments.apps", "deployments.v1.apps", "deploy", "jobs.batch", "Widget")] == \
        ["Deployment", "Deployment", "Deployment", "Job", "Widget"]
