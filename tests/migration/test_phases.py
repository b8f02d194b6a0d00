"""The phase machine with a hand-moved clock and hand-made facts: every transition, its effects, the
rollbacks and the timeouts, and that a pass repeated (after a crash) changes nothing."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest

from drods.migration import phases
from drods.migration.phases import Copy, Facts, HookState, advance
from drods.model.migration import MigrationPlanSpec

T0 = 1_800_000_000.0
READY = {"a": True, "b": True, "c": True}


def spec(**kw: Any) -> MigrationPlanSpec:
    body: dict[str, Any] = {"workloadRef": {"kind": "StatefulSet", "name": "db"}, "sourceCluster": "a",
                            "targetCluster": "b",
                            "hook": {"command": {"image": "busybox", "command": ["sh", "-c", "copy"]},
                                     "catchUpWaitSeconds": 10},
                            "trafficDrainSeconds": 3,
                            "timeouts": {"prepareTarget": 60, "copyData": 120}}
    body.update(kw)
    return MigrationPlanSpec.model_validate(body)


def facts(now: float, **kw: Any) -> Facts:
    base: dict[str, Any] = {"binding": "statefulset-default-db", "placement": {"a": 3, "c": 1},
                            "copies": {"a": Copy(3, 3, True), "c": Copy(1, 1, True)}, "clusters": READY}
    base.update(kw)
    return Facts(now=now, **base)


def conditions(status: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {c["type"]: c for c in status["conditions"]}


def started(s: MigrationPlanSpec) -> dict[str, Any]:
    step = advance(s, {}, facts(T0))
    assert step.status["phase"] == "PrepareTarget"
    return step.status


def test_start_records_the_move_and_pins_source_plus_target() -> None:
    step = advance(spec(), {}, facts(T0))
    st = step.status
    assert st["sourceReplicas"] == 3 and st["originalPlacement"] == [{"cluster": "a", "replicas": 3},
                                                                     {"cluster": "c", "replicas": 1}]
    assert step.effects.pin == {"a": 3, "b": 3, "c": 1}  # the source keeps all its replicas
    # the target's new copy has no data yet: steering sends it no client until SwitchTraffic
    assert step.effects.withdrawn == frozenset({"b"}) and step.effects.runs == ()
    cond = conditions(st)["TargetPrepared"]
    assert cond["status"] == "Unknown" and cond["startTime"] == st["phaseStartTime"]
    assert step.requeue is not None and step.requeue <= phases.POLL_SECONDS


@pytest.mark.parametrize(("kw", "reason"), [
    ({"binding": None}, "NoBinding"),
    ({"placement": {"c": 4}}, "NothingOnSource"),
    ({"clusters": {"a": True}}, "UnknownTarget"),
    ({"clusters": {"a": False, "b": True}}, "SourceUnavailable"),
    ({"older_plan": "first"}, "AnotherPlanRunning"),
    ({"pinned_by_other": "MigrationPlan default/x"}, "AlreadyPinned"),
    ({"target_refused": "not in clusterAffinity.clusterNames"}, "TargetNotAllowed"),
    ({"duplicated": True, "placement": {"a": 3, "b": 3}}, "TargetAlreadyRuns"),  # it would run 6 on b
])
def test_a_plan_that_cannot_start_fails_without_touching_anything(kw: dict[str, Any], reason: str) -> None:
    step = advance(spec(), {}, facts(T0, **kw))
    assert step.status["phase"] == "Failed"
    assert conditions(step.status)["Failed"]["reason"] == reason
    if reason == "NothingOnSource":  # the placement in words, not a Python dict
        assert step.status["message"].endswith("has no replicas on a (placement: c: 4)"), step.status["message"]
    assert step.effects.pin is None and not step.effects.touch_binding and step.requeue is None


def test_the_whole_way_with_each_pass_repeatable() -> None:
    s = spec()
    st = started(s)
    pin = {"a": 3, "b": 3, "c": 1}
    # the target is not ready yet: stay, and a repeated pass changes nothing
    f = facts(T0 + 1, placement=pin, copies={"a": Copy(3, 3, True), "b": Copy(3, 1, True), "c": Copy(1, 1, True)})
    again = advance(s, st, f)
    assert again.status["phase"] == "PrepareTarget" and "1 ready" in again.status["message"]
    assert advance(s, again.status, f).status == again.status
    # ready on the target → CopyData, the copy hook wanted
    ready = {"a": Copy(3, 3, True), "b": Copy(3, 3, True), "c": Copy(1, 1, True)}
    step = advance(s, again.status, replace(f, now=T0 + 2, copies=ready))
    assert step.status["phase"] == "CopyData" and step.effects.runs == ("copy",) and step.effects.pin == pin
    assert step.effects.withdrawn == frozenset({"b"})
    assert conditions(step.status)["TargetPrepared"]["status"] == "True"
    f = facts(T0 + 3, placement=pin, copies=ready, hooks={"copy": HookState("running")})
    assert advance(s, step.status, f).status["phase"] == "CopyData"
    step = advance(s, step.status, replace(f, hooks={"copy": HookState("complete")}))
    assert step.status["phase"] == "CatchUp" and step.effects.runs == ()  # a declared wait, not a run
    assert step.effects.withdrawn == frozenset({"b"})
    # catch-up waits its 10 s
    assert advance(s, step.status, replace(f, now=T0 + 12)).status["phase"] == "CatchUp"
    w = advance(s, step.status, replace(f, now=T0 + 3 + 10))
    assert w.status["phase"] == "SwitchTraffic" and w.effects.withdrawn == frozenset({"a"})
    assert w.effects.pin == pin  # both copies still run while traffic moves
    # the withdrawal must be seen on the Binding, then the drain time passes
    sw = advance(s, w.status, replace(f, now=T0 + 14))
    assert sw.status["phase"] == "SwitchTraffic" and "switchedTime" not in sw.status
    sw = advance(s, sw.status, replace(f, now=T0 + 15, withdrawn=frozenset({"a"})))
    assert sw.status["phase"] == "SwitchTraffic" and sw.requeue == pytest.approx(3.01)
    rt = advance(s, sw.status, replace(f, now=T0 + 20, withdrawn=frozenset({"a"})))
    assert rt.status["phase"] == "RetireSource" and rt.effects.pin == {"b": 3, "c": 1}
    # the source's Work is still there (the graceful move): wait
    f = facts(T0 + 21, placement={"b": 3, "c": 1}, withdrawn=frozenset({"a"}),
              copies={"a": Copy(3, 3, True, removing=True), "b": Copy(3, 3, True), "c": Copy(1, 1, True)})
    assert advance(s, rt.status, f).status["phase"] == "RetireSource"
    done = advance(s, rt.status, replace(f, copies={"b": Copy(3, 3, True), "c": Copy(1, 1, True)}))
    assert done.status["phase"] == "Succeeded" and done.effects.pin is None and done.effects.cleanup
    assert done.effects.touch_binding and done.effects.withdrawn == frozenset()
    conds = conditions(done.status)
    assert [conds[t]["status"] for t in ("TargetPrepared", "DataCopied", "CaughtUp", "TrafficSwitched",
                                         "SourceRetired")] == ["True"] * 5
    assert all(c["startTime"] <= c["lastTransitionTime"] for c in conds.values())
    assert done.requeue is None
    assert conds["SourceRetired"]["message"] == "the a copy is gone"
    # the source's Work went while the source does not answer: the copy there is not said to be gone
    away = advance(s, rt.status, replace(f, copies={"b": Copy(3, 3, True), "c": Copy(1, 1, True)},
                                         clusters={**READY, "a": False}))
    assert away.status["phase"] == "Succeeded"
    assert "does not answer" in conditions(away.status)["SourceRetired"]["message"]


def test_catch_up_can_run_the_hook_again() -> None:
    s = spec(hook={"command": {"image": "busybox"}, "catchUp": "Run"})
    st = {**started(s), "phase": "CatchUp", "phaseStartTime": "2027-01-15T08:00:00.000Z"}
    step = advance(s, st, facts(T0 + 1, hooks={"copy": HookState("complete"), "catchup": HookState("running")}))
    assert step.status["phase"] == "CatchUp" and step.effects.runs == ("catchup",)
    step = advance(s, st, facts(T0 + 1, hooks={"catchup": HookState("failed", "exit 1")}))
    assert step.status["phase"] == "RollingBack" and step.status["rollbackReason"] == "HookFailed"


def test_no_hook_skips_the_data_phases() -> None:
    s = spec(hook=None)
    st = started(s)
    pin = {"a": 3, "b": 3, "c": 1}
    step = advance(s, st, facts(T0 + 1, placement=pin, copies={"b": Copy(3, 3, True), "a": Copy(3, 3, True)}))
    assert step.status["phase"] == "SwitchTraffic"
    assert conditions(step.status)["DataCopied"]["reason"] == "NoData"


def test_failed_hook_rolls_back_and_the_source_keeps_serving() -> None:
    s = spec()
    st = {**started(s), "phase": "CopyData"}
    step = advance(s, st, facts(T0 + 5, hooks={"copy": HookState("failed", "BackoffLimitExceeded")}))
    assert step.status["phase"] == "RollingBack"
    assert step.effects.pin == {"a": 3, "c": 1} and step.effects.cleanup  # the original placement again
    assert conditions(step.status)["DataCopied"]["status"] == "False"
    assert conditions(step.status)["RolledBack"]["status"] == "Unknown"
    # the target's copy still there → stay RollingBack; gone → RolledBack
    pin_back = {"a": 3, "c": 1}
    f = facts(T0 + 6, placement=pin_back, copies={"a": Copy(3, 3, True), "b": Copy(3, 3, True, removing=True)})
    assert advance(s, step.status, f).status["phase"] == "RollingBack"
    end = advance(s, step.status, replace(f, copies={"a": Copy(3, 3, True), "c": Copy(1, 1, True)}))
    assert end.status["phase"] == "RolledBack" and end.effects.pin is None
    cond = conditions(end.status)["RolledBack"]
    assert cond["status"] == "True" and cond["reason"] == "HookFailed" and "BackoffLimitExceeded" in cond["message"]


def test_a_phase_that_times_out_rolls_back() -> None:
    s = spec()
    st = started(s)  # prepareTarget: 60 s
    f = facts(T0 + 59, placement={"a": 3, "b": 3, "c": 1}, copies={"a": Copy(3, 3, True), "b": Copy(3, 0, True)})
    assert advance(s, st, f).status["phase"] == "PrepareTarget"
    assert advance(s, st, f).requeue == pytest.approx(1.01)
    step = advance(s, st, replace(f, now=T0 + 61))
    assert step.status["phase"] == "RollingBack" and step.status["rollbackReason"] == "Timeout"
    assert step.status["failedPhase"] == "PrepareTarget"


def test_retire_never_rolls_back() -> None:
    s = spec()
    st = {**started(s), "phase": "RetireSource", "phaseStartTime": "2020-01-01T00:00:00.000Z"}
    step = advance(s, st, facts(T0, placement={"b": 3, "c": 1}, deleting=True,
                                copies={"a": Copy(3, 3, True, removing=True)}))
    assert step.status["phase"] == "RetireSource" and "no rollback" in step.status["message"]


def test_lost_source_before_the_copy_ends_fails_and_asks_for_failover() -> None:
    s = spec()
    st = {**started(s), "phase": "CopyData"}
    step = advance(s, st, facts(T0 + 1, clusters={"a": False, "b": True}))
    assert step.status["phase"] == "Failed" and step.reschedule
    assert step.effects.pin is None and step.effects.touch_binding  # released so failover can move it
    assert conditions(step.status)["Failed"]["reason"] == "SourceUnavailable"
    # the phase it failed in says so: no condition left InProgress on a Failed plan
    copied = conditions(step.status)["DataCopied"]
    assert (copied["status"], copied["reason"]) == ("False", "SourceUnavailable"), copied


def test_a_deleted_binding_ends_the_plan() -> None:
    s = spec()
    for phase in ("CopyData", "RollingBack"):
        step = advance(s, {**started(s), "phase": phase}, facts(T0 + 1, binding=None))
        assert step.status["phase"] == "Failed" and conditions(step.status)["Failed"]["reason"] == "BindingGone"
        assert step.effects.cleanup and step.requeue is None


def test_deleting_a_running_plan_rolls_it_back() -> None:
    s = spec()
    step = advance(s, started(s), facts(T0 + 1, deleting=True))
    assert step.status["phase"] == "RollingBack" and step.status["rollbackReason"] == "Deleted"


def test_spec_validation() -> None:
    with pytest.raises(ValueError, match="must differ"):
        spec(targetCluster="a")
    with pytest.raises(ValueError, match="exactly one of jobTemplate or command"):
        spec(hook={"runOn": "Target"})
    with pytest.raises(ValueError, match="needs a spec"):
        spec(hook={"jobTemplate": {"metadata": {}}})


def test_a_plan_without_a_target_takes_the_chosen_one() -> None:
    body = spec().model_dump(exclude_none=True)
    body.pop("targetCluster")
    s = MigrationPlanSpec.model_validate(body)
    step = advance(s, {}, facts(T0, chosen_target="c", target_note="c is where the scheduler would place it"))
    assert step.status["phase"] == "PrepareTarget" and step.status["targetCluster"] == "c"
    assert step.status["targetChoice"].startswith("c is where") and step.effects.pin == {"a": 3, "c": 4}
    none = advance(s, {}, facts(T0, target_note="no cluster but a can take it"))
    assert none.status["phase"] == "Failed" and conditions(none.status)["Failed"]["reason"] == "NoTarget"
    assert "no cluster but a" in none.status["message"]


def test_a_refused_mover_names_the_field_a_client_wrote() -> None:
    """422 field paths carry no validator internals (``function-after[…]``, ``literal['None']``)."""
    from pydantic import ValidationError

    from drods.registry.objects import field_errors

    with pytest.raises(ValidationError) as e:
        MigrationPlanSpec.model_validate({"workloadRef": {"name": "x"}, "sourceCluster": "a", "targetCluster": "b",
                                          "data": {"mover": "Snapshot"}})
    # the mover at fault, not also the other form data may take (``data: None``)
    assert field_errors(e.value, "spec.") == [{"field": "spec.data.mover",
                                              "message": "Input should be 'VolumeCopy' or 'Hook'"}]
    with pytest.raises(ValidationError) as e:
        MigrationPlanSpec.model_validate({"workloadRef": {"name": "x"}, "sourceCluster": "a", "targetCluster": "b",
                                          "data": "Nope"})  # no form fits: both said
    assert [f["field"] for f in field_errors(e.value, "spec.")] == ["spec.data", "spec.data"]


def test_a_cluster_name_no_cluster_can_have_is_refused() -> None:
    from pydantic import ValidationError

    from drods.registry.objects import field_errors

    with pytest.raises(ValidationError) as e:
        MigrationPlanSpec.model_validate({"workloadRef": {"name": "x"}, "sourceCluster": "a",
                                          "targetCluster": "Bad_Name!", "data": "None"})
    assert [f["field"] for f in field_errors(e.value, "spec.")] == ["spec.targetCluster"]


def test_a_target_that_already_served_keeps_its_traffic_while_the_source_is_copied_to_it() -> None:
    """c held a replica of the placement before the plan: its copy has its own data and keeps serving."""
    step = advance(spec(targetCluster="c"), {}, facts(T0))
    assert step.status["phase"] == "PrepareTarget" and step.effects.pin == {"a": 3, "c": 4}
    assert step.effects.withdrawn == frozenset()


def test_a_finished_move_names_the_claims_it_left_on_the_source() -> None:
    """A StatefulSet's claims outlive it on the source: the workload placed there again (a failover) would
    come up on them, with the data as of the switch — the plan's last word says so."""
    s = spec()
    st = advance(s, {}, facts(T0, claims=("data-db-0", "data-db-1"))).status
    retiring = {**st, "phase": "RetireSource", "phaseStartTime": "2020-01-01T00:00:00.000Z"}
    done = advance(s, retiring, facts(T0 + 30, placement={"b": 3, "c": 1}, withdrawn=frozenset({"a"}),
                                      copies={"b": Copy(3, 3, True), "c": Copy(1, 1, True)}))
    assert done.status["phase"] == "Succeeded", done.status
    assert done.status["message"].endswith("its PersistentVolumeClaims data-db-0, data-db-1 stay on a with the data "
                                           "as of the switch (delete them there, or the workload placed on a again "
                                           "comes up on them)"), done.status["message"]


def test_a_target_not_ready_yet_is_waited_for_then_given_up_on() -> None:
    """A target that joined a moment ago or is back from a restart: the plan waits (Pending) as long as the
    target's preparation may take, starts once it is Ready, and fails only past that."""
    s = spec()
    down = {"a": True, "b": False}
    wait = advance(s, {}, facts(T0, clusters=down))
    assert wait.status["phase"] == "Pending" and "waiting for target cluster b" in wait.status["message"]
    assert wait.effects.pin is None and wait.requeue is not None
    later = advance(s, wait.status, facts(T0 + 30, clusters=down))
    assert later.status["phase"] == "Pending" and later.status["waitingSince"] == wait.status["waitingSince"]
    started_now = advance(s, later.status, facts(T0 + 40))
    assert started_now.status["phase"] == "PrepareTarget" and "waitingSince" not in started_now.status
    failed = advance(s, wait.status, facts(T0 + 60, clusters=down))  # prepareTarget: 60 s
    assert failed.status["phase"] == "Failed" and conditions(failed.status)["Failed"]["reason"] == "TargetNotReady"
    assert failed.effects.pin is None and not failed.effects.touch_binding


def test_the_workload_placed_back_on_its_old_source_is_said_to_meet_the_claims_left_there() -> None:
    """A failover back to the source after the move: its copy there comes up on the claims the move left
    (a member kept 2,231-write-old data for a walkthrough). Said once; not when a later move tells the story."""
    s = spec()
    st = advance(s, {}, facts(T0, claims=("data-db-0",))).status
    retiring = {**st, "phase": "RetireSource", "phaseStartTime": "2020-01-01T00:00:00.000Z"}
    done = advance(s, retiring, facts(T0 + 30, placement={"b": 3, "c": 1}, withdrawn=frozenset({"a"}),
                                      copies={"b": Copy(3, 3, True), "c": Copy(1, 1, True)})).status
    assert "claimsLeftReused" not in done
    back = facts(T0 + 900, placement={"a": 3, "c": 1})  # b failed: failover put the workload back on a
    assert "claimsLeftReused" not in advance(s, done, replace(back, later_plan=True)).status
    said = advance(s, done, back).status["claimsLeftReused"]
    assert said["cluster"] == "a" and said["claims"] == ["data-db-0"] and "data as of that move" in said["message"]
    again = advance(s, {**done, "claimsLeftReused": said}, replace(back, now=T0 + 1800)).status
    assert again["claimsLeftReused"] == said  # once


def test_a_rolled_back_move_tells_the_claims_it_created_from_those_an_earlier_move_left_on_its_target() -> None:
    """The target was an earlier move's source: some claims there are that move's, not this plan's (a
    walkthrough's RolledBack message said "created on aws-dfw for the copy" of claims older than the plan)."""
    s = spec()
    found = {"data-db-0": "MigrationPlan default/first"}
    st = advance(s, {}, facts(T0, claims=("data-db-0", "data-db-1"), claims_on_target=found)).status
    assert st["data"]["claimsFoundOnTarget"] == [{"name": "data-db-0", "leftBy": "MigrationPlan default/first"}]
    rolling = advance(s, {**st, "phase": "CopyData"},
                      facts(T0 + 5, hooks={"copy": HookState("failed", "BackoffLimitExceeded")})).status
    end = advance(s, rolling, facts(T0 + 6, placement={"a": 3, "c": 1})).status
    assert end["phase"] == "RolledBack", end
    msg = end["message"]
    assert "(data-db-1) created on b for the copy" in msg and "data-db-0, data-db-1" not in msg, msg
    assert "data-db-0 were on b before this plan (left by MigrationPlan default/first) and stay there" in msg, msg
    # nothing found there: every claim is the copy's, as before
    fresh = advance(s, {}, facts(T0, claims=("data-db-0",))).status
    assert "claimsFoundOnTarget" not in fresh["data"]
    end = advance(s, advance(s, {**fresh, "phase": "CopyData"}, facts(
        T0 + 5, hooks={"copy": HookState("failed", "x")})).status, facts(T0 + 6, placement={"a": 3, "c": 1})).status
    assert "those of its PersistentVolumeClaims (data-db-0) created on b for the copy stay there" in end["message"]
