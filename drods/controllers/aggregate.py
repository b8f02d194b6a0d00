"""Status aggregation (Karmada's binding status controller): a binding's Works rolled up into
``Binding.status.clusters[]``, its phase and its Propagated / Ready conditions.

Pure functions over the stored objects, so the binding controller can aggregate in the same pass in
which it decides whether a cluster that left the placement may be emptied (that decision needs the
new placement's ready replicas). Member status arrives one way — on the Work, written by the
execution and work-status controllers (push) or the agent (pull) — so push and pull aggregate alike.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from drods.controllers.manifests import REPLICA_KINDS, WORKLOAD_KINDS, ManifestSet
from drods.controllers.overrides import OverrideError
from drods.controllers.status import Observation, copy_ready, observe
from drods.controllers.work_record import WorkRecord
from drods.model.annotations import ANN_HASH
from drods.model.binding import PROPAGATING_PHASES, BindingStatus, owned_status
from drods.model.conditions import transition
from drods.model.interpreter import StatusRule, read_path
from drods.model.work import Ref
from drods.model.work import member_status as work_member_status
from drods.model.workload_usage import summed_doc

Obj = dict[str, Any]
WAITING_FOR_AGENT = "waiting for the cluster's agent"


@dataclass(frozen=True, slots=True)
class WorkState:
    """What a cluster's Work says about the manifest set the binding wants there."""

    applied: bool
    error: str | None = None
    failed: bool = False  # a permanent failure, or ``applyFailureThreshold`` failures in a row
    observation: Observation | None = None  # the member's copy of the main manifest, if reported
    observed_time: str | None = None


def observation(status: Obj | None, main: Ref | None) -> tuple[Observation | None, str | None]:
    """The member's status of ``main`` as a Work's (decoded) ``status`` reports it (with when it was seen)."""
    if status is None or main is None or main.kind not in WORKLOAD_KINDS:
        return None, None
    for m in status.get("manifests") or []:
        if not isinstance(m, dict) or m.get("status") is None:
            continue
        if (m.get("apiVersion"), m.get("kind"), m.get("namespace") or "", m.get("name")) == \
                (main.api_version, main.kind, main.namespace, main.name):
            seen = {"kind": main.kind, "status": m["status"],
                    "metadata": {"generation": m.get("generation") or 1,
                                 "annotations": {ANN_HASH: m.get("manifestHash") or ""}}}
            return observe(seen), m.get("observedTime")
    return None, None


def _manifest_part(status: Obj | None, main: Ref | None, part: str) -> Obj | None:
    """One object-valued part (``usage``, ``report``) of a Work ``status``'s row of ``main``, None if unreported."""
    if status is None or main is None:
        return None
    for m in status.get("manifests") or []:
        if isinstance(m, dict) and isinstance(m.get(part), dict) and \
                (m.get("kind"), m.get("namespace") or "", m.get("name")) == (main.kind, main.namespace, main.name):
            return dict(m[part])
    return None


def member_entry(status: Obj | None, main: Ref | None) -> Obj | None:
    """A Work ``status``'s entry of ``main`` (its reported status, health, …), None if unreported."""
    if status is None or main is None:
        return None
    for m in status.get("manifests") or []:
        if isinstance(m, dict) and \
                (m.get("apiVersion"), m.get("kind"), m.get("namespace") or "", m.get("name")) == \
                (main.api_version, main.kind, main.namespace, main.name):
            return m
    return None


def member_status(work: WorkRecord | None, main: Ref | None) -> Obj | None:
    """The member's status of ``main`` as the cached Work's status carries it (any kind), None if unreported."""
    return work_member_status(None if work is None else {"status": work.status}, main)


def fill_health(entry: Obj, status: Obj | None, main: Ref | None) -> None:
    """A scripted kind's health in the member (InterpretHealth), as the Work's ``status`` reports it."""
    health = (member_entry(status, main) or {}).get("health")
    if isinstance(health, str):
        entry["health"] = health
    else:
        entry.pop("health", None)


LOCATION_FIELDS = ("city", "region", "zone", "provider")
POD_COPY_FIELDS = ("phase", "hostIP", "podIP")


def fill_location(entries: list[Obj], cluster_specs: Mapping[str, Obj]) -> None:
    """Where each copy runs (the cluster's city code, region, zone, provider: M1), on its entry: the
    Binding's ``status.clusters[]`` is the per-cluster view (the template's status keeps to its kind's schema)."""
    for e in entries:
        spec = cluster_specs.get(str(e.get("cluster"))) or {}
        for k in LOCATION_FIELDS:
            if spec.get(k):
                e[k] = spec[k]
            else:
                e.pop(k, None)


def fill_pod(entry: Obj, status: Obj | None, main: Ref | None) -> None:
    """A Pod copy's ``phase``, ``hostIP`` and ``podIP`` in the member: the Binding's entry carries them
    because the template Pod's status keeps to ``PodStatus`` (`drods.controllers.pod_status`)."""
    reported = work_member_status(None if status is None else {"status": status}, main) \
        if main is not None and main.kind == "Pod" else None
    for k in POD_COPY_FIELDS:
        if reported and reported.get(k):
            entry[k] = reported[k]
        else:
            entry.pop(k, None)


def status_items(works: Mapping[str, WorkRecord], plans: Mapping[str, ManifestSet | OverrideError]) -> list[Obj]:
    """Karmada's statusItems for AggregateStatus: one per cluster holding a copy — ``clusterName``,
    the reflected ``status``, ``applied`` and ``health`` (Healthy / Unhealthy / Unknown)."""
    out = []
    for c, p in sorted(plans.items()):
        if not isinstance(p, ManifestSet):
            continue
        work = works.get(c)
        m = member_entry(work.status if work is not None else None, p.main) or {}
        item: Obj = {"clusterName": c, "applied": work is not None and work.applied,
                     "health": str(m.get("health") or "Unknown")}
        if isinstance(m.get("status"), dict):
            item["status"] = m["status"]
        out.append(item)
    return out


def fill_usage(entry: Obj, status: Obj | None, main: Ref | None) -> None:
    """The entry's ``usage`` and — for a Job — its ``report`` (`drods.model.annotations.RUN_REPORT`), from
    a Work's ``status``."""
    for part in ("usage", "report"):
        value = _manifest_part(status, main, part) if part == "usage" or (main and main.kind == "Job") else None
        if value is None:
            entry.pop(part, None)
        else:
            entry[part] = value


def work_state(work: WorkRecord | None, want: ManifestSet, *, pull: bool, failure_threshold: int,
               status: Obj | None = None) -> WorkState:
    """``status``: the Work's, when the caller decoded it already (each decoding unpacks and parses it)."""
    st = status if status is not None or work is None else work.status
    obs, seen = observation(st, want.main)
    if work is None or st is None or work.hash != want.hash:
        return WorkState(False, observation=obs, observed_time=seen)
    if st.get("observedHash") == want.hash and work.observes_this_generation:
        if st.get("applied"):
            return WorkState(True, observation=obs, observed_time=seen)
        message = str(st.get("message") or "not applied")
        failures = max(int(st.get("failures") or 0), 1)
        error = f"agent: {message}" if pull else message
        return WorkState(False, error[:500], bool(st.get("permanent")) or failures >= failure_threshold,
                         obs, seen)
    return WorkState(False, WAITING_FOR_AGENT if pull else None, observation=obs, observed_time=seen)


def fill_observation(entry: Obj, kind: str, obs: Observation | None, seen: str | None) -> None:
    if obs is None:
        return
    if kind in WORKLOAD_KINDS:
        entry.update(observedReplicas=obs.replicas, readyReplicas=obs.ready, availableReplicas=obs.available,
                     updatedReplicas=obs.updated)
        if kind == "Job":
            entry["complete"] = obs.complete
            for key, value in zip(("startTime", "completionTime"), obs.times, strict=True):
                if value:
                    entry[key] = value
        entry["conditions"] = obs.conditions_json()
    if seen:
        entry["observedTime"] = seen


@dataclass
class Rollup:
    """The binding's entries for its current placement, and what they add up to."""

    entries: list[Obj] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    all_applied: bool = False
    all_ready: bool = False
    desired: int = 0  # replicas the copies ask for, overrides applied
    placed: int = 0  # replicas the placement gives

    @property
    def ready_applied(self) -> int:
        """Ready replicas of the applied copies of the current placement (graceful moves wait for them)."""
        return sum(int(e.get("readyReplicas") or 0) for e in self.entries if e.get("applied"))


def current_entries(kind: str, wanted: Mapping[str, int], plans: Mapping[str, ManifestSet | OverrideError],
                    works: Mapping[str, WorkRecord], previous: Mapping[str, Obj], pull: Mapping[str, bool],
                    failure_threshold: int, rule: StatusRule | None = None) -> Rollup:
    """``status.clusters[]`` entries of the clusters in the placement (``rule``: a customized kind's
    status rule, whose ready path gives each entry's ``readyReplicas``)."""
    out = Rollup(all_applied=bool(wanted), all_ready=bool(wanted), desired=sum(wanted.values()),
                 placed=sum(wanted.values()))
    for c, share in sorted(wanted.items()):
        e = dict(previous.get(c) or {"cluster": c})
        p = plans[c]
        if isinstance(p, ManifestSet) and p.replicas is not None and kind in REPLICA_KINDS and p.replicas != share:
            out.desired += p.replicas - share  # an override set the copy's count: it is judged by that
            share = p.replicas
        e["replicas"] = share
        e.pop("removing", None)
        e.pop("removingSince", None)
        if isinstance(p, OverrideError):
            e["applied"] = False
            e["lastError"] = str(p)
            out.errors.append(f"{c}: {p}")
            out.all_applied = out.all_ready = False
            out.entries.append(e)
            continue
        e["resources"] = [str(r) for r in p.refs]
        work = works.get(c)
        st = work.status if work is not None else None  # decoded once for every part read below
        state = work_state(work, p, pull=pull.get(c, False), failure_threshold=failure_threshold, status=st)
        e["applied"] = state.applied
        if state.applied or state.error is None:
            e.pop("lastError", None)
        else:
            e["lastError"] = state.error
            if state.failed:
                out.errors.append(f"{c}: {state.error}")
        if state.observation is not None and not state.observation.hash and not state.applied:
            # another's object of that name (a conflict): its counts are not the workload's
            for k in ("observedReplicas", "readyReplicas", "availableReplicas", "updatedReplicas", "conditions"):
                e.pop(k, None)
        else:
            fill_observation(e, kind, state.observation, state.observed_time)
        fill_usage(e, st, p.main)
        fill_health(e, st, p.main)
        fill_pod(e, st, p.main)
        if rule is not None and rule.ready is not None:
            reported = work_member_status(None if st is None else {"status": st}, p.main)
            ready_count = read_path(reported or {}, rule.ready.removeprefix("status."))
            if isinstance(ready_count, int) and not isinstance(ready_count, bool):
                e["readyReplicas"] = ready_count
        current = state.observation if state.observation is not None and state.observation.hash == p.main_hash \
            else None
        # a copy the kind's InterpretHealth script calls Unhealthy is not ready (Karmada's health), nor one
        # whose script failed (Unknown): nothing says it is
        ready = state.applied and copy_ready(kind, share, current) and e.get("health") not in ("Unhealthy", "Unknown")
        out.all_applied = out.all_applied and state.applied
        out.all_ready = out.all_ready and ready
        out.entries.append(e)
    return out


def removing_entry(cluster: str, kind: str, work: WorkRecord, previous: Obj | None, since: str) -> Obj:
    """The entry of a cluster that left the placement and still holds (or is emptying) its copy."""
    e = dict(previous or {"cluster": cluster})
    e["removing"] = True
    e["removingSince"] = since
    if work.refs:
        e["resources"] = [str(r) for r in work.refs]
    st = work.status
    obs, seen = observation(st, work.main)
    fill_observation(e, kind, obs, seen)
    fill_usage(e, st, work.main)
    return e


def binding_status(status: Obj, kind: str, rollup: Rollup, removing: list[Obj], *, active: bool,
                   now: str, script_failures: list[str] | None = None,
                   suspended: frozenset[str] = frozenset(), pending: int = 0) -> Obj:
    """The Binding's status with the controllers' fields (``clusters``, and phase and conditions while
    propagating) replaced; the scheduler's fields are left as they are. ``script_failures``: the
    kind's Lua interpreter scripts failing on this workload (an InterpreterScriptFailed condition);
    ``suspended``: the clusters the policy's ``suspension`` holds its changes from; ``pending``: the
    replicas a partial placement left unplaced (a ``Scheduled`` False condition says so: the placed
    copies can all be ready while most of the workload waits for room)."""
    new = _binding_status(status, kind, rollup, removing, active=active, now=now, suspended=suspended,
                          pending=pending)
    if script_failures and "conditions" in new:
        previous = status.get("conditions") if isinstance(status.get("conditions"), list) else None
        new["conditions"] = [*new["conditions"], transition(
            "InterpreterScriptFailed", True, "ScriptError", "; ".join(script_failures)[:1000], previous, now)]
    return new


def _binding_status(status: Obj, kind: str, rollup: Rollup, removing: list[Obj], *, active: bool,
                    now: str, suspended: frozenset[str] = frozenset(), pending: int = 0) -> Obj:
    new = dict(status)
    entries = rollup.entries + removing
    if entries or "clusters" in status:
        new["clusters"] = entries
    usage = summed_doc(entries)
    if usage is not None:
        new["usage"] = usage
    else:
        new.pop("usage", None)
    phase = status.get("phase")
    previous = status.get("conditions") if isinstance(status.get("conditions"), list) else None
    wanted = len(rollup.entries)
    if not (active and wanted and phase in PROPAGATING_PHASES):
        return owned_status(status, new, BindingStatus.CONTROLLER_FIELDS)
    if rollup.errors:
        msg = "; ".join(rollup.errors)[:1000]
        new["phase"] = "Failed"
        new["conditions"] = [transition("Propagated", False, "ApplyFailed", msg, previous, now),
                             transition("Ready", False, "ApplyFailed", msg, previous, now)]
        return owned_status(status, new, BindingStatus.CONTROLLER_FIELDS)
    applied, ready = rollup.all_applied, rollup.all_ready
    new["phase"] = "Running" if applied and ready else "Propagated" if applied else "Scheduled"
    n_applied = sum(1 for e in rollup.entries if e.get("applied"))
    ready_total = sum(int(e.get("readyReplicas") or 0) for e in rollup.entries)
    replica_kind = kind in REPLICA_KINDS
    held = "" if applied or not suspended else \
        f"; dispatching to {', '.join(sorted(suspended))} is suspended (spec.suspension): the copies there stay " \
        "as they were"
    new["conditions"] = [
        transition("Propagated", applied, "Applied" if applied else "Suspended" if held else "Applying",
                  f"applied in {n_applied}/{wanted} cluster(s){held}", previous, now),
        transition("Ready", ready, "Ready" if ready else "NotReady",
                  (f"{ready_total}/{rollup.desired} replicas ready"
                   + (f" ({pending} more not placed)" if pending else "")) if replica_kind else
                  ("ready" if ready else "waiting for the member copies"), previous, now)]
    if pending:
        new["conditions"].append(transition(
            "Scheduled", False, "PartiallyScheduled",
            f"placed {rollup.placed}/{rollup.placed + pending} replicas: {pending} not placed (yet)", previous, now))
    return owned_status(status, new, BindingStatus.CONTROLLER_FIELDS)
