"""The phase machine of a MigrationPlan: (recorded status, observed facts, now) → the next status and
the effects the current phase wants. Pure, so it is tested with a hand-made clock and facts.

The effects are *levels*, not actions: the pin the workload's Binding must carry, the clusters whose
traffic is withdrawn, the hook run that must exist. The controller makes the world match them on
every pass, so a pass repeated after a crash does nothing twice: a phase's effects follow from the
phase recorded in the store, and a phase only ends when what it waited for is observed.

Effects per phase (N = the source's replicas when the plan started, O = the placement then):

=================  =======================================  =================  ============
phase              pin (the Binding's placement)            traffic withdrawn  hook run
=================  =======================================  =================  ============
Pending            — (validated, nothing touched)           —                  —
PrepareTarget      O + N on the target                      the target*        —
CopyData           O + N on the target                      the target*        copy
CatchUp            O + N on the target                      the target*        catchup (Run)
SwitchTraffic      O + N on the target                      the source         —
RetireSource       O − the source + N on the target         the source         —
RollingBack        O                                        —                  — (deleted)
Succeeded, Rolled  released                                 —                  — (deleted)
Back, Failed
=================  =======================================  =================  ============

(*: unless the target held replicas of O: those keep their traffic.) Clients keep going to the
source until SwitchTraffic moves them — a copy without its data yet gets none.

The source keeps all its replicas until RetireSource, and there the binding controller removes
them only once the target's ready replicas cover the count (its graceful move), so a planned move
never has zero ready replicas. Until RetireSource a failed hook, a timeout, a lost target or a
deleted plan rolls back (the pin returns to O, the target's copy goes, the source never stopped);
from RetireSource on the plan only goes forward (the target holds the data).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from drods.migration.dataruns import (
    CATCHUP,
    COPY,
    FINAL,
    PROBE_FINAL,
    HookState,
    claim_name,
    data_of,
    outcome,
    probe_run,
    stage_runs,
)
from drods.model.data_jobs import copy_figures, verified
from drods.model.migration import (
    CATCH_UP,
    CONDITION_OF,
    COPY_DATA,
    FAILED,
    FAILED_CONDITION,
    FORWARD,
    PENDING,
    PREPARE_TARGET,
    RETIRE_SOURCE,
    ROLLED_BACK,
    ROLLED_BACK_CONDITION,
    ROLLING_BACK,
    SUCCEEDED,
    SWITCH_TRAFFIC,
    TERMINAL,
    MigrationPlanSpec,
)
from drods.model.timefmt import parse_rfc3339, rfc3339_ms

Obj = dict[str, Any]
POLL_SECONDS = 5.0  # a running plan is looked at again at least this often (besides watch events)
__all__ = ["COPY", "CATCHUP", "HookState"]


@dataclass(frozen=True, slots=True)
class Copy:
    """One cluster's copy of the workload, as the Binding's ``status.clusters[]`` reports it."""

    replicas: int
    ready: int
    applied: bool
    removing: bool = False


@dataclass(frozen=True, slots=True)
class Facts:
    """What the controller observed for one plan."""

    now: float
    binding: str | None = None  # the workload's Binding
    placement: Mapping[str, int] = field(default_factory=dict)  # its status.placement
    copies: Mapping[str, Copy] = field(default_factory=dict)  # its status.clusters[] (current and removing)
    withdrawn: frozenset[str] = frozenset()  # its traffic-withdrawn annotation
    pin: Mapping[str, int] | None = None  # its pin annotation
    pinned_by_other: str | None = None  # the pin belongs to another plan
    clusters: Mapping[str, bool | None] = field(default_factory=dict)  # cluster → Ready (None: unknown)
    hooks: Mapping[str, HookState] = field(default_factory=dict)  # run → state
    older_plan: str | None = None  # an earlier running plan for the same workload
    deleting: bool = False  # the plan is being deleted
    chosen_target: str | None = None  # a plan without targetCluster: where the scheduler would put it
    target_note: str = ""  # why (or why none)
    target_refused: str | None = None  # a given target the scheduler's filters turn away: why
    # X1: the other clusters as the scheduler weighed them (total, per-plugin scores), and its weights
    target_options: tuple[Obj, ...] = ()
    target_weights: Obj = field(default_factory=dict)
    claims: tuple[str, ...] = ()  # the workload's PersistentVolumeClaims on the source (its data)
    claims_note: str = ""  # where they come from (volumeClaimTemplates …)
    estimate: Obj | None = None  # bytes to move and the copy time (`drods.migration.estimate`)
    duplicated: bool = False  # the Binding runs the whole count on each cluster (Duplicated)
    later_plan: bool = False  # a plan for the same workload made after this one moved it or is moving it
    # at the start: the claims earlier plans for the workload left on the target (name → the plan)
    claims_on_target: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class Effects:
    """What the world must look like for the phase the plan is in."""

    pin: Mapping[str, int] | None  # None: no pin (released)
    withdrawn: frozenset[str]
    runs: tuple[str, ...]  # the data runs (Jobs) that must exist
    cleanup: bool  # hook Jobs deleted
    touch_binding: bool  # False: leave the Binding's annotations alone (a plan that never started)


@dataclass(frozen=True, slots=True)
class Step:
    status: Obj
    effects: Effects
    requeue: float | None
    reschedule: str | None = None  # ask for the Binding to be re-placed (why), after the pin is released


# ---------------------------------------------------------------------- status helpers
def _placement(status: Mapping[str, Any], key: str) -> dict[str, int]:
    return {str(t["cluster"]): int(t.get("replicas") or 0) for t in status.get(key) or []
            if isinstance(t, dict) and t.get("cluster")}


def _as_list(placement: Mapping[str, int]) -> list[Obj]:
    return [{"cluster": c, "replicas": n} for c, n in sorted(placement.items())]


def with_target(status: Mapping[str, Any]) -> dict[str, int]:
    """O + N on the target: the placement while both copies run."""
    pin = _placement(status, "originalPlacement")
    target = str(status.get("targetCluster"))
    pin[target] = pin.get(target, 0) + int(status.get("sourceReplicas") or 0)
    return pin


def without_source(status: Mapping[str, Any]) -> dict[str, int]:
    pin = with_target(status)
    pin.pop(str(status.get("sourceCluster")), None)
    return pin


def set_condition(status: Obj, type_: str, state: str, reason: str, message: str, now: float, *,
                  start: bool = False) -> None:
    """Set one condition; ``startTime`` is when its phase began, ``lastTransitionTime`` when it last changed."""
    conds: list[Obj] = [c for c in status.get("conditions") or [] if isinstance(c, dict)]
    at = rfc3339_ms(now)
    for c in conds:
        if c.get("type") == type_:
            if c.get("status") != state:
                c["lastTransitionTime"] = at
            c.update(status=state, reason=reason, message=message)
            if start:
                c["startTime"] = at
            break
    else:
        conds.append({"type": type_, "status": state, "reason": reason, "message": message,
                      "startTime": at, "lastTransitionTime": at})
    status["conditions"] = conds


def _enter(status: Obj, phase: str, now: float, message: str) -> None:
    status["phase"] = phase
    status["phaseStartTime"] = rfc3339_ms(now)
    status["message"] = message
    if phase in CONDITION_OF:
        set_condition(status, CONDITION_OF[phase], "Unknown", "InProgress", message, now, start=True)


def _done(status: Obj, phase: str, now: float, message: str) -> None:
    set_condition(status, CONDITION_OF[phase], "True", "Done", message, now)


def effects_of(status: Mapping[str, Any], now: float | None = None) -> Effects:
    phase = str(status.get("phase") or PENDING)
    source = str(status.get("sourceCluster") or "")
    if phase in (PREPARE_TARGET, COPY_DATA, CATCH_UP):
        return Effects(with_target(status), _new_copy(status), _runs_of(status, now), False, True)
    if phase == SWITCH_TRAFFIC:
        return Effects(with_target(status), frozenset({source}), _runs_of(status, now), False, True)
    if phase == RETIRE_SOURCE:
        return Effects(without_source(status), frozenset({source}), (), False, True)
    if phase == ROLLING_BACK:
        return Effects(_placement(status, "originalPlacement"), frozenset(), (), True, True)
    started = bool(status.get("binding")) and phase != PENDING
    return Effects(None, frozenset(), (), phase in TERMINAL, started and phase in TERMINAL)


def _new_copy(status: Mapping[str, Any]) -> frozenset[str]:
    """The target while its copy is new there and its data not yet switched to: no client is steered to
    a copy whose data is still being copied (the target's replicas of the placement before, if any,
    keep theirs)."""
    target = str(status.get("targetCluster") or "")
    return frozenset({target}) if target and not _placement(status, "originalPlacement").get(target) else frozenset()


def _runs_of(status: Mapping[str, Any], now: float | None) -> tuple[str, ...]:
    """The data runs the phase wants: the copy, the catch-up (runs or the lag probe), the final sync."""
    phase = str(status.get("phase"))
    if phase == COPY_DATA:
        return stage_runs(status, COPY)
    if phase == CATCH_UP and data_of(status).get("maxLagSeconds") is not None:
        # VolumeCopy keeps following the source (rsync in a loop) while the probe measures the lag
        follow = stage_runs(status, CATCHUP) if data_of(status).get("mover") == "VolumeCopy" else ()
        due = parse_rfc3339((status.get("catchUp") or {}).get("nextProbeTime"))
        return follow if due is not None and now is not None and now < due else (*follow, probe_run(status))
    if phase == CATCH_UP and status.get("catchUpRun"):
        return stage_runs(status, CATCHUP)
    if phase == SWITCH_TRAFFIC:
        stage = str((status.get("freeze") or {}).get("stage") or "")
        return stage_runs(status, FINAL) if stage == "sync" else (PROBE_FINAL,) if stage == "check" else ()
    return ()


# ---------------------------------------------------------------------- the machine
def advance(spec: MigrationPlanSpec, status: Mapping[str, Any], facts: Facts) -> Step:
    """One pass: the new status (possibly the same) and the effects of the phase it is in."""
    st: Obj = dict(status)
    st["conditions"] = [dict(c) for c in status.get("conditions") or [] if isinstance(c, dict)]
    phase = str(st.get("phase") or PENDING)
    now = facts.now
    reschedule: str | None = None
    if phase == PENDING:
        if facts.deleting:
            _finish(st, FAILED, "Deleted", "the plan was deleted before it started", now)
        else:
            _start(spec, st, facts)
    elif phase in FORWARD + (ROLLING_BACK,) and facts.binding is None:
        _finish(st, FAILED, "BindingGone", f"the Binding {st.get('binding')} was deleted (the workload is gone "
                "or no policy propagates it any more): nothing left to move or restore", now)
    elif phase in FORWARD:
        reschedule = _forward(spec, st, facts)
    elif phase == ROLLING_BACK:
        _rolling_back(st, facts)
    phase = str(st.get("phase"))
    if phase == SUCCEEDED:
        _claims_reused(st, facts)
    requeue = None if phase in TERMINAL else _requeue(spec, st, now)
    return Step(st, effects_of(st, now), requeue, reschedule)


def _claims_reused(st: Obj, f: Facts) -> None:
    """The workload placed on its old source again (a failover, a rebalance) after this move, and no move
    of it since: its copy there comes up on the claims this move left, with the data as of the switch.
    Said once (``claimsLeftReused``; the controller tells it as a Warning Event on the workload)."""
    src = str(st.get("sourceCluster") or "")
    names = _claim_names(st)
    if st.get("claimsLeftReused") or not names or f.later_plan or f.binding is None or f.placement.get(src, 0) <= 0:
        return
    st["claimsLeftReused"] = {"cluster": src, "time": rfc3339_ms(f.now), "claims": names,
                              "message": f"placed on {src} again, where this move left its PersistentVolumeClaims "
                                         f"{', '.join(names)} at {st.get('completionTime')}: if they are still there, "
                                         "its copy comes up on them, with the data as of that move"}


def _start(spec: MigrationPlanSpec, st: Obj, f: Facts) -> None:
    src, dst = spec.sourceCluster, spec.targetCluster or f.chosen_target
    ref = f"{spec.workloadRef.kind} {spec.workloadRef.name}"
    if f.older_plan:
        _finish(st, FAILED, "AnotherPlanRunning", f"{ref} is already being moved by MigrationPlan {f.older_plan}",
                f.now)
    elif f.binding is None:
        _finish(st, FAILED, "NoBinding", f"{ref} has no Binding: it is not propagated by any policy", f.now)
    elif spec.data_step() is None and f.claims and not spec.data_declared_none:
        _finish(st, FAILED, "NoDataStep", f"{ref} keeps its data in PersistentVolumeClaims ({f.claims_note}): "
                "say how it moves (spec.data.mover: VolumeCopy or Hook) or set spec.data: None to move it "
                "without its data", f.now)
    elif f.pinned_by_other:
        _finish(st, FAILED, "AlreadyPinned", f"the Binding {f.binding} is pinned by {f.pinned_by_other}", f.now)
    elif dst is None:
        _finish(st, FAILED, "NoTarget", f"no target cluster: {f.target_note or 'none given, none found'}", f.now)
    elif dst == src:
        _finish(st, FAILED, "NoTarget", f"the target would be the source {src}", f.now)
    elif dst not in f.clusters:
        _finish(st, FAILED, "UnknownTarget", f"target cluster {dst} does not exist", f.now)
    elif f.clusters.get(dst) is not True:
        # a target that is not Ready yet (joined a moment ago, back from a restart) is waited for, as long
        # as the target's preparation may take, before the plan gives up on it
        since = parse_rfc3339(st.get("waitingSince")) or f.now
        if f.now - since >= spec.timeouts.prepareTarget:
            st.pop("waitingSince", None)
            _finish(st, FAILED, "TargetNotReady", f"target cluster {dst} is not Ready (waited {f.now - since:.0f}s)",
                    f.now)
        else:
            st.update(phase=PENDING, waitingSince=rfc3339_ms(since), message=f"waiting for target cluster {dst} "
                      f"to be Ready (up to {spec.timeouts.prepareTarget:.0f}s)")
    elif f.target_refused:
        _finish(st, FAILED, "TargetNotAllowed", f"the scheduler would not place {ref} on {dst}: {f.target_refused} "
                "(a plan there would wait for replicas that never start, or the next decision would move it back "
                "without its data)", f.now)
    elif f.duplicated and f.placement.get(dst, 0) > 0:
        _finish(st, FAILED, "TargetAlreadyRuns", f"{ref} is Duplicated and {dst} already runs all its replicas: a move "
                f"there would run them twice; take {src} out of its placement instead", f.now)
    elif f.placement.get(src, 0) <= 0:
        _finish(st, FAILED, "NothingOnSource", f"{ref} has no replicas on {src} (placement: "
                f"{', '.join(f'{c}: {n}' for c, n in sorted(f.placement.items())) or 'none'})", f.now)
    elif f.clusters.get(src) is False:
        _finish(st, FAILED, "SourceUnavailable", f"source cluster {src} is not Ready: there is nothing to copy "
                "from (failover re-places the workload without its data)", f.now)
    else:
        n = int(f.placement[src])
        st.pop("waitingSince", None)
        st.update(binding=f.binding, sourceCluster=src, targetCluster=dst, sourceReplicas=n,
                  originalPlacement=_as_list(f.placement), startTime=rfc3339_ms(f.now), data=_data_record(spec, f))
        step = spec.data_step()
        st["catchUpRun"] = bool(step is not None and step.catchUp is None and (
            step.mover == "VolumeCopy" or (step.hook is not None and step.hook.catchUp == "Run")))
        if not spec.targetCluster:
            st["targetChoice"] = f.target_note
        if f.target_options:
            st["targetOptions"] = {"weights": f.target_weights, "clusters": list(f.target_options)}
        if f.estimate is not None and spec.data_step() is not None:
            st["estimate"] = f.estimate
        _enter(st, PREPARE_TARGET, f.now, f"starting {n} replica(s) on {dst} beside {src}")


def _data_record(spec: MigrationPlanSpec, f: Facts) -> Obj:
    """``status.data``: how the data moves (or that it does not, as the plan says), recorded at the start."""
    step = spec.data_step()
    rec: Obj = {"mover": step.mover if step is not None else "None", "claims": [{"name": c} for c in f.claims]}
    found = [{"name": c, "leftBy": f.claims_on_target[c]} for c in f.claims if c in f.claims_on_target]
    if found:  # there before the plan (an earlier move left them): the target's copy comes up on them
        rec["claimsFoundOnTarget"] = found
    if step is None:
        return {**rec, "declaredNone": spec.data_declared_none}
    if step.mover == "VolumeCopy":
        rec["transport"] = step.transport
    if step.catchUp is not None:
        rec["maxLagSeconds"] = step.catchUp.maxLagSeconds
    return rec


def _forward(spec: MigrationPlanSpec, st: Obj, f: Facts) -> str | None:
    phase = str(st["phase"])
    src, dst = str(st["sourceCluster"]), str(st["targetCluster"])
    started = parse_rfc3339(st.get("phaseStartTime")) or f.now
    elapsed = f.now - started
    before_retire = phase != RETIRE_SOURCE
    if f.deleting and before_retire:
        _roll_back(st, "Deleted", "the plan was deleted", f.now)
        return None
    if phase in (PREPARE_TARGET, COPY_DATA, CATCH_UP) and f.clusters.get(src) is False:
        # The data's only copy is unreachable: nothing to copy from, nothing a rollback could keep serving.
        _finish(st, FAILED, "SourceUnavailable", f"source cluster {src} became NotReady during {phase}: the plan "
                "stops and failover re-places the workload without its data", f.now)
        return f"migration {st.get('binding')}: source {src} lost during {phase}"
    if before_retire and f.clusters.get(dst) is False:
        _roll_back(st, "TargetUnavailable", f"target cluster {dst} became NotReady during {phase}", f.now)
        return None
    if before_retire and elapsed > spec.timeouts.of(phase):
        _roll_back(st, "Timeout", f"{phase} did not finish within {spec.timeouts.of(phase):g}s", f.now)
        return None
    if phase == PREPARE_TARGET:
        want = with_target(st)
        c = f.copies.get(dst)
        if dict(f.placement) == want and c is not None and c.applied and not c.removing and c.ready >= want[dst]:
            _done(st, phase, f.now, f"{c.ready} replica(s) ready on {dst}")
            _after_prepare(spec, st, f.now, src)
        else:
            ready = c.ready if c is not None else 0
            st["message"] = f"waiting for {want.get(dst, 0)} ready replica(s) on {dst} ({ready} ready)"
    elif phase == COPY_DATA:
        _copy_data(st, f)
    elif phase == CATCH_UP:
        _catch_up(spec, st, f, elapsed, src)
    elif phase == SWITCH_TRAFFIC:
        _switch_traffic(spec, st, f, src, dst)
    elif phase == RETIRE_SOURCE:
        want = without_source(st)
        if dict(f.placement) == want and src not in f.copies:
            _done(st, phase, f.now, f"the {src} copy is gone" if f.clusters.get(src) is True else
                  f"the {src} copy's Work is gone, but {src} does not answer: its copy there is deleted once it "
                  "answers again (a deferred cleanup)")
            _finish(st, SUCCEEDED, "Succeeded", f"moved {st.get('sourceReplicas')} replica(s) from {src} to {dst}"
                    f"{_claims_left(st, src)}", f.now)
        elif elapsed > spec.timeouts.retireSource:
            st["message"] = f"the {src} copy is still there after {elapsed:.0f}s (no rollback: {dst} holds the data)"
        else:
            st["message"] = f"waiting for the {src} copy to be removed"
    return None


def _after_prepare(spec: MigrationPlanSpec, st: Obj, now: float, src: str) -> None:
    if spec.data_step() is None:
        if spec.data_declared_none:
            reason, why = "DataNoneDeclared", "spec.data: None — the plan moves the workload without its data"
        else:
            reason, why = "NoData", "the workload keeps no data in PersistentVolumeClaims and declares no data step"
        _skip(st, COPY_DATA, reason, why, now)
        _skip(st, CATCH_UP, reason, why, now)
        _enter(st, SWITCH_TRAFFIC, now, f"withdrawing traffic from {src}")
    else:
        _enter(st, COPY_DATA, now, f"copying the data ({data_of(st).get('mover')})")


def _copy_figures(st: Obj, f: Facts) -> str | None:
    """Each claim's copy figures into ``status.data.claims[]``; why the copy is not verified, if it is not
    (a VolumeCopy run that reported no checksum, or one unequal to its source's)."""
    data = dict(data_of(st))
    if data.get("mover") != "VolumeCopy":
        return None
    claims: list[Obj] = []
    problem = None
    for run, entry in zip(stage_runs(st, COPY), data.get("claims") or [], strict=False):
        figures = copy_figures((f.hooks.get(run) or HookState("absent")).report)
        claims.append({"name": claim_name(entry), **figures})
        if problem is None and not verified(figures):
            problem = (f"claim {claim_name(entry)}: the copy reported no checksum" if not figures.get("checksum")
                       else f"claim {claim_name(entry)}: checksum {figures['checksum']} differs from the "
                            f"source's {figures.get('sourceChecksum')}")
    data["claims"] = claims
    data["bytesCopied"] = sum(int(c.get("bytes") or 0) for c in claims)
    st["data"] = data
    return problem


def _copy_data(st: Obj, f: Facts) -> None:
    h = outcome(stage_runs(st, COPY), f.hooks)
    if h.state == "complete" and (problem := _copy_figures(st, f)) is not None:
        _roll_back(st, "ChecksumMismatch", f"the copy did not verify: {problem}", f.now)
    elif h.state == "complete":
        _done(st, COPY_DATA, f.now, "the copy completed")
        if data_of(st).get("maxLagSeconds") is not None:
            _enter(st, CATCH_UP, f.now, f"waiting for the target's lag to be at most "
                   f"{float(data_of(st)['maxLagSeconds']):g}s")
        elif st.get("catchUpRun"):
            _enter(st, CATCH_UP, f.now, "copying again the changes made during the copy")
        else:
            _enter(st, CATCH_UP, f.now, "waiting for the target to catch up")
    elif h.state == "failed":
        _roll_back(st, "HookFailed", f"the copy failed: {h.message}".rstrip(": "), f.now)
    else:
        st["message"] = f"waiting for the copy to complete ({h.message})"


def _catch_up(spec: MigrationPlanSpec, st: Obj, f: Facts, elapsed: float, src: str) -> None:
    if data_of(st).get("maxLagSeconds") is not None:
        done = _probe_lag(spec, st, f)
    elif st.get("catchUpRun"):
        h = outcome(stage_runs(st, CATCHUP), f.hooks)
        if h.state == "failed":
            _roll_back(st, "HookFailed", f"the catch-up failed: {h.message}".rstrip(": "), f.now)
            return
        done = h.state == "complete"
    else:
        done = elapsed >= _catch_up_wait(spec)
    if done:
        _done(st, CATCH_UP, f.now, "caught up")
        freeze = spec.switch.freezeSeconds
        _enter(st, SWITCH_TRAFFIC, f.now, f"fencing {src} (traffic withdrawn) for the final sync, at most "
               f"{freeze:g}s" if freeze > 0 else f"withdrawing traffic from {src}")


def _probe_lag(spec: MigrationPlanSpec, st: Obj, f: Facts) -> bool:
    """One look at the lag probe: True once a run says the target is within maxLagSeconds."""
    step = spec.data_step()
    assert step is not None and step.catchUp is not None
    cu: Obj = dict(st.get("catchUp") or {})
    follow = outcome(stage_runs(st, CATCHUP), f.hooks) if step.mover == "VolumeCopy" else HookState("running")
    if follow.state == "failed":
        _roll_back(st, "HookFailed", f"the catch-up copy failed: {follow.message}", f.now)
        return False
    due = parse_rfc3339(cu.get("nextProbeTime"))
    if due is not None and f.now < due:
        return False
    run = probe_run(st)
    h = f.hooks.get(run) or HookState("absent")
    if h.state == "complete":
        cu.update(lastResult=f"lag at most {step.catchUp.maxLagSeconds:g}s", caughtUpTime=rfc3339_ms(f.now))
        st["catchUp"] = cu
        return True
    if h.state == "failed":  # the probe's "not yet": look again after periodSeconds, in a new run
        cu.update(probes=int(cu.get("probes") or 0) + 1, lastResult=f"lag above {step.catchUp.maxLagSeconds:g}s",
                  nextProbeTime=rfc3339_ms(f.now + step.catchUp.probe.periodSeconds))
        st["catchUp"] = cu
        st["message"] = f"the target lags more than {step.catchUp.maxLagSeconds:g}s; probing again"
    else:
        st["message"] = f"probing the target's lag ({run})"
    return False


def _switch_traffic(spec: MigrationPlanSpec, st: Obj, f: Facts, src: str, dst: str) -> None:
    """SwitchTraffic: once the source is withdrawn on the Binding, drain it for ``trafficDrainSeconds``."""
    if src not in f.withdrawn:  # not on the Binding yet: the drain time starts once it is
        st["message"] = f"withdrawing traffic from {src}"
        st.pop("switchedTime", None)
        return
    if spec.switch.freezeSeconds > 0 and not _frozen_and_synced(spec, st, f, src):
        return
    switched = parse_rfc3339(st.get("switchedTime"))
    if switched is None:
        st["switchedTime"] = rfc3339_ms(f.now)
        switched = f.now
    if f.now - switched >= spec.trafficDrainSeconds:
        if data_of(st).get("mover") not in (None, "None") and "lostWritesMeasuredBy" not in data_of(st):
            st["data"] = {**data_of(st), "lostWritesMeasuredBy": "none"}  # no freeze: writes after the copy
        _done(st, SWITCH_TRAFFIC, f.now, f"traffic goes to {dst} only")
        _enter(st, RETIRE_SOURCE, f.now, f"removing the {src} copy once {dst} covers every replica")
    else:
        st["message"] = f"draining connections from {src} ({spec.trafficDrainSeconds:g}s)"


def _frozen_and_synced(spec: MigrationPlanSpec, st: Obj, f: Facts, src: str) -> bool:
    """The write freeze: with the source fenced, the final sync runs, then the final lag check (lag 0);
    True once both passed. Rolls back (unfencing the source) when either fails or the window ends."""
    fz: Obj = dict(st.get("freeze") or {})
    if fz.get("stage") == "done":
        return True
    fenced = parse_rfc3339(fz.get("fencedTime"))
    if fenced is None:
        fenced = f.now
        fz.update(fencedTime=rfc3339_ms(f.now), stage="sync", fence="Traffic")
    data: Obj = dict(data_of(st))
    st["freeze"] = fz
    if f.now - fenced > spec.switch.freezeSeconds:
        _roll_back(st, "FreezeExceeded", f"the final sync did not finish within the {spec.switch.freezeSeconds:g}s "
                   f"write freeze; {src} is unfenced and keeps serving", f.now)
        return False
    if fz["stage"] == "sync":
        h = outcome(stage_runs(st, FINAL), f.hooks)
        if h.state == "failed":
            _roll_back(st, "HookFailed", f"the final sync failed: {h.message}".rstrip(": "), f.now)
        elif h.state == "complete":
            fz["stage"] = "check" if data.get("maxLagSeconds") is not None else "done"
        else:
            st["message"] = f"{src} fenced: running the final sync ({h.message})"
    if fz["stage"] == "check":
        h = f.hooks.get(PROBE_FINAL) or HookState("absent")
        if h.state == "failed":
            _roll_back(st, "DataBehind", f"after the final sync the target still lags {src}: not switching "
                       f"({h.message})".replace(" ()", ""), f.now)
        elif h.state == "complete":
            fz["stage"] = "done"
            data.update(lostWrites=0, lostWritesMeasuredBy="probe")
        else:
            st["message"] = f"{src} fenced: checking the target has every write (lag 0)"
    if fz["stage"] == "done":
        fz["downtimeSeconds"] = round(f.now - fenced, 3)
        data.setdefault("lostWritesMeasuredBy", "none")
        st["data"] = data
        return True
    return False


def _rolling_back(st: Obj, f: Facts) -> None:
    original = _placement(st, "originalPlacement")
    dst = str(st.get("targetCluster"))
    c = f.copies.get(dst)
    target_back = (c is None) if dst not in original else (c is not None and c.replicas == original[dst]
                                                            and not c.removing)
    if dict(f.placement) == original and target_back:
        reason = str(st.get("rollbackReason") or "RolledBack")
        st["phase"] = ROLLED_BACK
        st["completionTime"] = rfc3339_ms(f.now)
        st["message"] = f"rolled back ({reason}): {st.get('sourceCluster')} kept serving{_claims_prepared(st, dst)}"
        set_condition(st, ROLLED_BACK_CONDITION, "True", reason, str(st.get("rollbackMessage") or reason), f.now)
    else:
        st["message"] = f"rolling back: removing the {dst} copy ({st.get('rollbackReason')})"


def _roll_back(st: Obj, reason: str, message: str, now: float) -> None:
    phase = str(st["phase"])
    if phase in CONDITION_OF:
        set_condition(st, CONDITION_OF[phase], "False", reason, message, now)
    st["rollbackReason"] = reason
    st["rollbackMessage"] = message
    st["failedPhase"] = phase
    _enter(st, ROLLING_BACK, now, f"rolling back: {message}")
    set_condition(st, ROLLED_BACK_CONDITION, "Unknown", reason, message, now, start=True)


def _skip(st: Obj, phase: str, reason: str, message: str, now: float) -> None:
    set_condition(st, CONDITION_OF[phase], "True", reason, message, now, start=True)


def _claim_names(st: Mapping[str, Any]) -> list[str]:
    """The claims the plan moved (``status.data.claims``), by name."""
    return [str(c.get("name")) for c in data_of(st).get("claims") or [] if isinstance(c, dict) and c.get("name")]


def _claims_left(st: Obj, src: str) -> str:
    """What a move leaves on its source: the claims, with the data as of the switch. The member keeps
    them (a StatefulSet's claims outlive it), and the workload placed back there later comes up on them."""
    names = _claim_names(st)
    if not names:
        return ""
    return (f"; its PersistentVolumeClaims {', '.join(names)} stay on {src} with the data as of the switch "
            f"(delete them there, or the workload placed on {src} again comes up on them)")


def _claims_prepared(st: Obj, dst: str) -> str:
    """What a rolled-back move leaves on its target: the claims its copy there made, as a move that
    succeeded leaves its source's (the copy's workload goes, its claims stay) — and those it found there,
    left by an earlier plan (``status.data.claimsFoundOnTarget``), which stay too."""
    names = _claim_names(st)
    if not names:
        return ""
    found = {str(c.get("name")): str(c.get("leftBy") or "an earlier move")
             for c in data_of(st).get("claimsFoundOnTarget") or [] if isinstance(c, dict) and c.get("name")}
    made = [n for n in names if n not in found]
    parts = []
    if made:
        parts.append(f"those of its PersistentVolumeClaims ({', '.join(made)}) created on {dst} for the copy stay "
                     "there")
    by_plan: dict[str, list[str]] = {}
    for n in names:
        if n in found:
            by_plan.setdefault(found[n], []).append(n)
    for by, claims in by_plan.items():
        parts.append(f"{', '.join(claims)} were on {dst} before this plan (left by {by}) and stay there")
    return (f"; {'; '.join(parts)} (delete them there, or the workload placed on {dst} later comes up on them)")


def _finish(st: Obj, phase: str, reason: str, message: str, now: float) -> None:
    running = str(st.get("phase"))
    if phase == FAILED and running in CONDITION_OF:  # the phase it failed in says so, as a rollback's does
        set_condition(st, CONDITION_OF[running], "False", reason, message, now)
    st["phase"] = phase
    st["message"] = message
    st["completionTime"] = rfc3339_ms(now)
    if phase == FAILED:
        set_condition(st, FAILED_CONDITION, "True", reason, message, now, start=True)


def _requeue(spec: MigrationPlanSpec, st: Mapping[str, Any], now: float) -> float:
    """When to look again without a watch event: the phase's timeout or declared wait, at most POLL_SECONDS."""
    phase = str(st.get("phase"))
    started = parse_rfc3339(st.get("phaseStartTime")) or now
    due = [POLL_SECONDS]
    if phase in FORWARD:
        due.append(started + spec.timeouts.of(phase) - now + 0.01)
    if phase == CATCH_UP and not st.get("catchUpRun") and data_of(st).get("maxLagSeconds") is None:
        due.append(started + _catch_up_wait(spec) - now + 0.01)
    probe_at = parse_rfc3339((st.get("catchUp") or {}).get("nextProbeTime"))
    if phase == CATCH_UP and probe_at is not None:
        due.append(probe_at - now + 0.01)
    fenced = parse_rfc3339((st.get("freeze") or {}).get("fencedTime"))
    if phase == SWITCH_TRAFFIC and fenced is not None:
        due.append(fenced + spec.switch.freezeSeconds - now + 0.01)
    switched = parse_rfc3339(st.get("switchedTime"))
    if phase == SWITCH_TRAFFIC and switched is not None:
        due.append(switched + spec.trafficDrainSeconds - now + 0.01)
    return max(0.05, min(due))


def _catch_up_wait(spec: MigrationPlanSpec) -> float:
    step = spec.data_step()
    return step.hook.catchUpWaitSeconds if step is not None and step.hook is not None else 0.0
