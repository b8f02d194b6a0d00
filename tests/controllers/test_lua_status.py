"""What the binding controller hands Karmada's status scripts and shows of them: statusItems built
from the Works (reflected status, applied, health), each cluster's health on the Binding, and the
InterpreterScriptFailed condition while a script fails on the workload."""

from __future__ import annotations

from typing import Any

from drods.controllers import aggregate
from drods.controllers import manifests as M
from drods.controllers.work_record import WorkRecord, work_record
from drods.model.annotations import ANN_HASH


def server(size: int) -> dict[str, Any]:
    return {"apiVersion": "serving.example.org/v1", "kind": "ModelServer",
            "metadata": {"name": "llm", "namespace": "serving", "generation": 1}, "spec": {"fleet": {"size": size}}}


def work(p: M.ManifestSet, health: str | None, serving: int) -> WorkRecord:
    main = p.manifests[-1]
    entry: dict[str, Any] = {"apiVersion": "serving.example.org/v1", "kind": "ModelServer", "namespace": "serving",
                             "name": "llm", "generation": 1, "status": {"serving": serving},
                             "manifestHash": main["metadata"]["annotations"][ANN_HASH]}
    if health is not None:
        entry["health"] = health
    rec = work_record({"metadata": {"name": "w"}, "spec": {"hash": p.hash, "manifests": p.manifests},
                       "status": {"observedHash": p.hash, "applied": True, "manifests": [entry]}}, 1)
    assert rec is not None
    return rec


def test_status_items_health_and_the_failure_condition() -> None:
    plans = M.plan("b", "uid", server(3), [M.Target("a", 2, {}), M.Target("b", 1, {}), M.Target("c", 0, {})], [], [])
    works = {"a": work(plans["a"], "Healthy", 2), "b": work(plans["b"], "Unhealthy", 0)}
    assert aggregate.status_items(works, plans) == [
        {"clusterName": "a", "applied": True, "health": "Healthy", "status": {"serving": 2}},
        {"clusterName": "b", "applied": True, "health": "Unhealthy", "status": {"serving": 0}},
        {"clusterName": "c", "applied": False, "health": "Unknown"}]
    rollup = aggregate.current_entries("ModelServer", {"a": 2, "b": 1}, plans, works, {}, {}, 3)
    assert {e["cluster"]: e.get("health") for e in rollup.entries} == {"a": "Healthy", "b": "Unhealthy"}
    assert not rollup.all_ready  # an Unhealthy copy is not ready: the Binding stays Propagated
    assert aggregate.binding_status({"phase": "Scheduled"}, "ModelServer", rollup, [], active=True,
                                    now="t")["phase"] == "Propagated"
    works["b"] = work(plans["b"], "Healthy", 1)
    assert aggregate.current_entries("ModelServer", {"a": 2, "b": 1}, plans, works, {}, {}, 3).all_ready
    failing = ["modelserver: ReviseReplica: 2: attempt to index a nil value"]
    st = aggregate.binding_status({"phase": "Scheduled"}, "ModelServer", rollup, [], active=True, now="t",
                                  script_failures=failing)
    cond = {c["type"]: c for c in st["conditions"]}
    assert cond["InterpreterScriptFailed"]["status"] == "True"
    assert cond["InterpreterScriptFailed"]["message"] == failing[0]
    healed = aggregate.binding_status(st, "ModelServer", rollup, [], active=True, now="t2", script_failures=[])
    assert "InterpreterScriptFailed" not in {c["type"] for c in healed["conditions"]}


def test_a_failing_script_is_told_as_an_event_once_per_new_failure() -> None:
    """``kubectl describe`` showed no Event while a script failed: one Warning when it starts failing or
    fails anew, none while it keeps failing the same way, none once it succeeds."""
    from types import SimpleNamespace

    from drods.controllers.binding import BindingController

    told: list[tuple[str, str, str]] = []
    fake = SimpleNamespace(events=SimpleNamespace(tell=lambda inv, t, r, m: told.append((t, r, m))))
    b = {"metadata": {"name": "modelserver-serving-llm"},
         "spec": {"resource": {"apiVersion": "serving.example.org/v1", "kind": "ModelServer", "name": "llm",
                               "namespace": "serving"}}}

    def status(message: str | None) -> dict[str, Any]:
        conds = [{"type": "InterpreterScriptFailed", "status": "True", "message": message}] if message else []
        return {"phase": "Running", "conditions": conds}

    for old, new in ((None, "s: GetReplicas: boom"), ("s: GetReplicas: boom", "s: GetReplicas: boom"),
                     ("s: GetReplicas: boom", "s: InterpretHealth: timeout"), ("s: InterpretHealth: timeout", None)):
        BindingController._tell(fake, b, status(old), status(new))  # type: ignore[arg-type]
    assert told == [("Warning", "InterpreterScriptFailed", "s: GetReplicas: boom"),
                    ("Warning", "InterpreterScriptFailed", "s: InterpretHealth: timeout")]
