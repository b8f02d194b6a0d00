"""``drods migrate``'s plan: the built-in mover freezes writes for the final sync, as a drain's plan does
(without the freeze the plan switched with no final sync and lost the writes made during the copy)."""

from __future__ import annotations

from typing import Any

import pytest
import typer
from typer.testing import CliRunner

from drods.cli import migrate as cli
from drods.cli.remote import CliError
from drods.model.migration import MigrationPlanSpec

PLANS: list[dict[str, Any]] = []  # the plans in db, as listed
TENANT = False  # the token is limited to namespaces: no Cluster or Binding may be read
STS = {"apiVersion": "apps/v1", "kind": "StatefulSet", "metadata": {"name": "pg", "namespace": "db"},
       "spec": {"volumeClaimTemplates": [{"metadata": {"name": "data"}}]}}


@pytest.fixture
def created(monkeypatch: pytest.MonkeyPatch) -> list[dict[str, Any]]:
    bodies: list[dict[str, Any]] = []

    class Api:
        def get_json(self, path: str) -> dict[str, Any]:
            if TENANT and (path.startswith("/api/v1/clusters/") or path.startswith(cli.BINDINGS)):
                raise CliError("forbidden: this token acts only in namespaces db", "FORBIDDEN", 403)
            if path.startswith("/api/v1/clusters/"):
                if path.endswith("/nowhere"):
                    raise CliError("not found", "NOT_FOUND", 404)
                return {"name": path.rsplit("/", 1)[1]}
            if path == cli.plans_path("db"):
                return {"items": PLANS}
            if path == f"{cli.BINDINGS}/statefulset-db-pg":  # pg runs on aws
                return {"spec": {"resource": {"kind": "StatefulSet", "namespace": "db", "name": "pg"}},
                        "status": {"placement": [{"cluster": "aws", "replicas": 1}]}}
            assert path == "/apis/apps/v1/namespaces/db/statefulsets/pg", path
            return STS

    def create(api: Any, body: dict[str, Any]) -> dict[str, Any]:
        bodies.append(body)
        return body

    monkeypatch.setattr(cli, "connect", lambda *a: Api())
    monkeypatch.setattr(cli, "create_plan", create)
    return bodies


def run(*args: str, to: str = "lhr", code: int = 0, source: str = "aws") -> str:
    app = typer.Typer()
    cli.register(app)  # the one command: invoked without its name
    r = CliRunner().invoke(app, ["statefulset/db/pg", "--from", source, "--to", to, "--token", "t", *args])
    assert r.exit_code == code, r.output
    return r.output


@pytest.mark.parametrize(("flags", "freeze"), [
    ((), 60.0),  # the configuration's default for a drain's plan
    (("--freeze-seconds", "15"), 15.0),
    (("--freeze-seconds", "0"), None),  # said explicitly: no final sync
])
def test_volume_copy_freezes_the_source_for_the_final_sync(created: list[dict[str, Any]], flags: tuple[str, ...],
                                                           freeze: float | None) -> None:
    run("--volume-copy-image", "img:1", *flags)
    (body,) = created
    spec = MigrationPlanSpec.model_validate(body["spec"])  # what the server validates
    assert spec.data_step() is not None and body["spec"]["data"] == {"mover": "VolumeCopy", "image": "img:1"}
    assert (body["spec"].get("switch") or {}).get("freezeSeconds") == freeze


def test_without_the_built_in_mover_no_freeze_is_added(created: list[dict[str, Any]]) -> None:
    run("--no-data")
    assert "switch" not in created[0]["spec"] and created[0]["spec"]["data"] == "None"


def test_a_target_that_is_not_registered_is_refused_before_any_plan(created: list[dict[str, Any]]) -> None:
    out = run("--no-data", to="nowhere", code=1)
    assert "cluster nowhere is not registered" in out and created == []


def test_a_source_it_does_not_run_on_is_refused_before_any_plan(created: list[dict[str, Any]]) -> None:
    out = run("--no-data", source="gcp", code=1)
    assert "runs nothing on gcp (it runs on aws)" in " ".join(out.split()) and created == []


@pytest.mark.parametrize("answer", [
    CliError("spec.data: say how the data moves", "DATA_STEP_REQUIRED", 400),  # /api/v1's {code, …}
    CliError("spec.data: say how the data moves", "BadRequest", 400,  # the Kubernetes path's Status
             {"causes": [{"reason": "FieldValueInvalid", "field": "spec.data", "message": "…"}]}),
])
def test_a_refused_data_step_names_the_flags_that_set_it(answer: CliError) -> None:
    class Api:
        def request(self, *_a: Any, **_kw: Any) -> Any:
            raise answer

    with pytest.raises(CliError) as e:
        cli.create_plan(Api(), {"metadata": {"namespace": "db"}})  # type: ignore[arg-type]
    assert "--volume-copy-image IMAGE, --hook-file FILE or --no-data" in e.value.message


def test_a_workload_being_moved_is_refused_for_that_reason(created: list[dict[str, Any]],
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    """Mid-move a workload runs on its source and its target: the user hears about the plan, not that the
    source is ambiguous."""
    running = {"metadata": {"name": "pg-move"}, "spec": {"workloadRef": {"kind": "StatefulSet", "name": "pg"}},
               "status": {"phase": "CopyData"}}
    monkeypatch.setattr(f"{__name__}.PLANS", [running, {**running, "metadata": {"name": "old"},
                                                        "status": {"phase": "Succeeded"}}])
    out = " ".join(run("--no-data", code=1).split())
    assert "MIGRATION_IN_PROGRESS" in out and "already being moved by MigrationPlan 'pg-move' (CopyData)" in out, out
    assert created == []


def test_a_token_limited_to_namespaces_moves_its_workload_naming_the_source(created: list[dict[str, Any]],
                                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    """It was refused outright: the command listed every Binding (cluster-scoped) to find the source. The plan
    is the tenant's to write; where the workload runs it cannot read, so it names it (the controller checks)."""
    monkeypatch.setattr(f"{__name__}.TENANT", True)
    run("--no-data")
    assert created[0]["spec"]["sourceCluster"] == "aws" and created[0]["spec"]["targetCluster"] == "lhr"
    app = typer.Typer()
    cli.register(app)
    r = CliRunner().invoke(app, ["statefulset/db/pg", "--to", "lhr", "--no-data", "--token", "t"])
    assert r.exit_code == 1 and "name the source with --from" in " ".join(r.output.split()), r.output
    assert len(created) == 1
