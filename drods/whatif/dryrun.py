"""Dry-run placement (W1): what the scheduler would decide, against a copy of its live view.

`LiveView` (`drods.schedulerd.view`) is a private copy of the running scheduler's snapshot, profile,
tie-break RNG state and the cluster records the hypothetical changes need. `apply_changes` edits
only that copy; `dry_run` runs the real `Scheduler.schedule` on it and explains the decision with the same
`drods.schedulerd.history.decision_record` a real decision gets. Nothing is stored, nothing assumed:
the live snapshot and RNG are never touched, so the next real decision is the one shown here when
nothing changes in between (same snapshot, same seed).

Changes, applied in order (docs/whatif.md):
``{"cluster": c, "down": true}`` (not Ready), ``{"cluster": c, "cordon": true}`` (unschedulable),
``{"cluster": c, "waterLevel": 0.9}`` (the status water level set), ``{"cluster": c,
"waterLevelDelta": 0.2}`` (shifted), ``{"addCluster": {name, labels, …spec…, "status": doc}}`` and
``{"profile": {…scheduler profile…}}``.
"""

from __future__ import annotations

import json
import time
from collections.abc import Container, Mapping, Sequence
from typing import Any

import numpy as np
from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from drods.errors import ApiError, Invalid, field_errors_of
from drods.model import jsondoc
from drods.model import member_status as ms
from drods.model.binding import BindingSpec, TargetCluster
from drods.model.cluster import ClusterSpec
from drods.model.decision import with_why_not
from drods.model.kinds import (
    BINDING,
    KARMADA_PROPAGATION_KINDS,
    PLACEMENT_POLICY_KINDS,
    PROPAGATION_POLICY,
    RESOURCE_PLACEMENT_POLICY,
    by_kind,
)
from drods.model.placement import ClusterAffinity
from drods.scheduler.framework import Scheduler, ScheduleResult
from drods.scheduler.profile import Profile, ProfileError
from drods.scheduler.status import parse_status
from drods.scheduler.task import Task
from drods.schedulerd.decision_task import decision_task
from drods.schedulerd.history import decision_record
from drods.schedulerd.records import FIRST, RECONCILE, SCALE, decode_binding
from drods.schedulerd.view import ClusterFacts, LiveView
from drods.store import KeyValue

WHATIF_SCHEDULER = "whatif"


class Change(BaseModel):
    """One hypothetical change; exactly one kind per entry."""

    model_config = ConfigDict(extra="forbid")

    cluster: str | None = None
    down: bool | None = None
    cordon: bool | None = None
    waterLevel: float | None = Field(default=None, ge=0, le=2)
    waterLevelDelta: float | None = Field(default=None, ge=-2, le=2)
    addCluster: dict[str, Any] | None = None
    profile: dict[str, Any] | None = None

    @model_validator(mode="after")
    def _one(self) -> Change:
        per_cluster = [k for k in ("down", "cordon", "waterLevel", "waterLevelDelta") if getattr(self, k) is not None]
        whole = [k for k in ("addCluster", "profile") if getattr(self, k) is not None]
        if len(per_cluster) + len(whole) != 1:
            raise ValueError("a change has exactly one of down, cordon, waterLevel, waterLevelDelta, addCluster, "
                             "profile")
        if per_cluster and not self.cluster:
            raise ValueError(f"{per_cluster[0]} needs cluster")
        if whole and self.cluster is not None:
            raise ValueError(f"{whole[0]} takes no cluster")
        return self


def _field_error(path: str, message: str) -> ApiError:
    return Invalid(f"{path}: {message}", {"fields": [{"field": path, "message": message}]})


def apply_changes(view: LiveView, changes: Sequence[Change]) -> None:
    """Apply the hypothetical changes to the view's copy (validating each against it)."""
    snap = view.snapshot
    for i, ch in enumerate(changes):
        path = f"changes[{i}]"
        if ch.profile is not None:
            try:
                view.profile = Profile.from_dict(ch.profile)
            except ProfileError as e:
                raise Invalid(str(e), {"fields": [{"field": f"{path}.profile", "message": m} for m in e.errors]}) from e
            continue
        if ch.addCluster is not None:
            _add_cluster(view, ch.addCluster, f"{path}.addCluster")
            continue
        name = str(ch.cluster)
        if name not in snap:
            raise _field_error(f"{path}.cluster", f"cluster {name!r} is not in the scheduler's view")
        facts = view.clusters.get(name)
        if ch.down is not None:
            snap.set_ready(name, not ch.down)
            continue
        if facts is None:
            raise _field_error(f"{path}.cluster", f"cluster {name!r} has no record to change")
        if ch.cordon is not None:
            facts.spec = facts.spec.model_copy(update={"unschedulable": ch.cordon})
            row = snap.index[name]
            snap.upsert_cluster(name, facts.labels, facts.spec, bool(snap.ready[row]), facts.status, facts.floor)
            continue
        status = dict(facts.status or {})
        if ch.waterLevel is not None:
            status[ms.WATER_LEVEL] = ch.waterLevel
        else:
            p = parse_status(facts.status, facts.floor)
            a = np.where(p.alloc[:2] > 0, p.alloc[:2], 1.0)
            observed = float((np.where(p.alloc[:2] > 0, p.load[:2] / a, 0.0)).max()) + p.wl_offset
            status[ms.WATER_LEVEL] = max(0.0, observed + float(ch.waterLevelDelta or 0.0))
        facts.status = status
        snap.set_status(name, status, None)


def _add_cluster(view: LiveView, body: Mapping[str, Any], path: str) -> None:
    name = body.get("name")
    if not isinstance(name, str) or not name:
        raise _field_error(f"{path}.name", "a new cluster needs a name")
    if name in view.snapshot:
        raise _field_error(f"{path}.name", f"cluster {name!r} already exists")
    labels = body.get("labels") or {}
    status = body.get("status")
    if not isinstance(labels, dict) or (status is not None and not isinstance(status, dict)):
        raise _field_error(path, "labels and status are objects")
    raw = {k: v for k, v in body.items() if k not in ("name", "labels", "status", "ready", "credentials")}
    try:
        spec = ClusterSpec.model_validate(raw)
    except ValidationError as e:
        err = e.errors()[0]
        raise _field_error(f"{path}.{'.'.join(str(x) for x in err['loc'])}", err["msg"]) from e
    ready = bool(body.get("ready", status is not None))
    view.snapshot.upsert_cluster(name, {str(k): str(v) for k, v in labels.items()}, spec, ready, status)
    view.clusters[name] = ClusterFacts(dict(labels), spec, ready, status, None)


def dry_run(view: LiveView, spec: BindingSpec, name: str, *, now: float | None = None,
            about: str | None = None, stored: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """Schedule ``spec`` as ``name`` on the view; the answer of ``POST /api/v1/whatif``. With ``about`` (a
    cluster) the answer also says why the filters turned that cluster away (``filtered``: None when
    they did not), however many others they turned away. ``stored``: the Binding ``name`` as stored
    now, which ``spec`` would replace."""
    snap = view.snapshot
    cur = view.current.get(name)
    # An existing binding is placed as a change of itself, against the snapshot as the scheduler has
    # it — its own assumed load included, as the real cycle does.
    current = [TargetCluster.model_construct(cluster=c, replicas=n) for c, n in (cur or {}).items()]
    task, schedule_type = as_decided(spec, name, current, stored)
    sched = Scheduler(view.profile)
    sched.rng = view.rng
    result: ScheduleResult = sched.schedule(task, snap)
    base = {p.name: w for p, w in view.profile.scores}
    unknown = unknown_cluster_names(spec, snap)
    explanation = with_why_not(decision_record(
        result, binding=name, generation=0, schedule_type=schedule_type, ts=time.time() if now is None else now,
        scheduler=WHATIF_SCHEDULER, profile=view.profile.name, base_weights=base, workload=_workload(spec),
        unknown_clusters=len(unknown)))
    if unknown:  # only then, so that a dry run without typos has exactly a real decision's keys
        explanation["unknownClusterNames"] = sorted(unknown)
        explanation["unknownClusterFields"] = {c: unknown[c] for c in sorted(unknown)}
    # as the scheduler writes it: a decision that places nothing keeps what runs (Karmada's too)
    kept = result.phase != "Scheduled" and bool(current)
    answer = {"placement": [{"cluster": t.cluster, "replicas": t.replicas}
                            for t in (current if kept else result.placement)],
              "phase": result.phase, "explanation": explanation,
              **({"placementKept": True} if kept else {})}
    if about is not None:
        answer["about"] = {"cluster": about, "filtered": result.reasons.get(about)}
    return answer


def unknown_cluster_names(spec: BindingSpec, known: Container[str]) -> dict[str, list[str]]:
    """The cluster names ``spec`` gives that no cluster of the view has → the fields that give them.

    Karmada accepts a name of a cluster that does not exist (yet), and so does DRO-DS; but a typo then
    reads as every other cluster being "not in clusterAffinity.clusterNames", so a dry run says it."""
    out: dict[str, list[str]] = {}

    def note(names: Sequence[str], path: str) -> None:
        for n in names:
            if n not in known and path not in out.setdefault(n, []):
                out[n].append(path)

    note(spec.targetClusters, "targetClusters")
    pl = spec.placement
    terms: list[tuple[str, ClusterAffinity]] = []
    if pl.clusterAffinity is not None:
        terms.append(("placement.clusterAffinity", pl.clusterAffinity))
    for i, term in enumerate(pl.clusterAffinities):
        terms.append((f"placement.clusterAffinities[{i}]", term))
        terms += [(f"placement.clusterAffinities[{i}].overflowAffinities[{j}]", o)
                  for j, o in enumerate(term.overflowAffinities)]
    wp = pl.replicaScheduling.weightPreference if pl.replicaScheduling is not None else None
    for i, w in enumerate(wp.staticWeightList if wp is not None else []):
        terms.append((f"placement.replicaScheduling.weightPreference.staticWeightList[{i}].targetCluster",
                      w.targetCluster))
    for path, aff in terms:
        note(aff.clusterNames, f"{path}.clusterNames")
        note(aff.exclude, f"{path}.exclude")
    return out


def as_decided(spec: BindingSpec, name: str, current: list[TargetCluster],
               stored: Mapping[str, Any] | None) -> tuple[Task, str]:
    """The task the scheduler service would decide ``spec`` with, and why (its ``scheduleType``), once
    it replaced the Binding ``stored`` placed at ``current``: a change beyond the replicas is a
    ReconcileSchedule (replicas beyond a latency SLO the new placement sets move; restated users divide
    again), a change of the replicas alone a ScaleSchedule (what still fits stays); the users learned
    from demand and the binding's own labels as the stored Binding carries them."""
    if not current or stored is None:
        # a Binding not stored yet is decided as the record its body would make (its workload's traffic
        # peers, its class, its primary), as the scheduler service decides the one written
        body = {"apiVersion": "multicluster.io/v1alpha1", "kind": "Binding", "metadata": {"name": name},
                "spec": spec.model_dump(mode="json", exclude_none=True)}
        new = decode_binding(BINDING.key(name), jsondoc.dumps(body), 0)
        stype = FIRST if not current else SCALE
        if new is None:
            return Task(spec, name=name, current=current), stype
        return decision_task(spec, new, body, stype, current)[0], stype
    rec = decode_binding(BINDING.key(name), jsondoc.dumps(stored), 0)
    try:
        before: BindingSpec | None = BindingSpec.model_validate(stored.get("spec") or {})
    except ValidationError:
        before = None
    changed = before is None or _but_replicas(before) != _but_replicas(spec)
    stype = RECONCILE if changed else SCALE
    if rec is None:
        return Task(spec, name=name, current=current, placement_changed=changed), stype
    task, _ = decision_task(spec, rec, stored, stype, current)
    return task, stype


def _but_replicas(spec: BindingSpec) -> BindingSpec:
    """What of ``spec`` a change of is more than a scale; a workload's manifest as a user submits it to the
    what-if carries no uid, its stored Binding the template's."""
    ref = spec.resource.model_copy(update={"uid": None}) if spec.resource is not None else None
    return spec.model_copy(update={"replicas": 0, "rescheduleTriggeredAt": None, "resource": ref})


def _workload(spec: BindingSpec) -> dict[str, str] | None:
    """The workload a binding places (as the real decision's history entry names it), if it names one."""
    r = spec.resource
    if r is None or not r.kind:
        return None
    return {"kind": r.kind, "namespace": r.namespace or "default", "name": r.name}


def _policy_object(pol: Mapping[str, Any], kind_name: str, workload_kind: str) -> dict[str, Any]:
    """A policy object from an object, a bare spec, or a bare placement (it then selects the workload)."""
    body = dict(pol)
    if "spec" not in body:
        spec = {k: v for k, v in body.items() if k not in ("apiVersion", "kind", "metadata")}
        body = {k: v for k, v in body.items() if k in ("apiVersion", "kind", "metadata")} | {"spec": spec}
    spec = dict(body["spec"]) if isinstance(body["spec"], dict) else {}
    if kind_name == PROPAGATION_POLICY.kind and not spec.get("resourceSelectors") and not spec.get("resourceType"):
        spec["resourceType"] = workload_kind
    body["spec"] = spec
    body.setdefault("metadata", {"name": "whatif"})
    return body


def workload_binding(workload: Mapping[str, Any], policy: Mapping[str, Any] | None,
                     stored: Sequence[Mapping[str, Any]] = (),
                     autoscalers: Sequence[Mapping[str, Any]] = ()) -> tuple[str, BindingSpec]:
    """The Binding the resource detector would derive for ``workload``, with the detector's own functions:
    under ``policy`` when given (whatever its selectors say), else under the best of the ``stored``
    PropagationPolicy / ResourcePlacementPolicy objects (Karmada's PropagationPolicy and
    ClusterPropagationPolicy too); with the replicas (and feedback weights) of
    the stored FederatedHPA / CronFederatedHPA that owns the workload's replicas, as the detector does."""
    from drods.model.autoscaling import owned_replicas, owned_weights
    from drods.model.detection import (
        DETECTED_KINDS,
        PolicyMatch,
        autoscaled,
        best_policy,
        decode_policy,
        desired_binding,
    )

    kind = by_kind(str(workload.get("apiVersion", "")), str(workload.get("kind", "")))
    meta = workload.get("metadata")
    if kind is None or kind not in DETECTED_KINDS:
        raise _field_error("workload.kind", "a kind DRO-DS stores on its Kubernetes paths")
    if not isinstance(meta, dict) or not meta.get("name"):
        raise _field_error("workload.metadata.name", "required")

    def decode(pol: Mapping[str, Any], i: int, path: str) -> Any:
        named = by_kind(str(pol.get("apiVersion", "")), str(pol.get("kind", "")))
        pkind = named if named in PLACEMENT_POLICY_KINDS else \
            RESOURCE_PLACEMENT_POLICY if pol.get("kind") == RESOURCE_PLACEMENT_POLICY.kind else PROPAGATION_POLICY
        given = path == "policy" and pkind not in KARMADA_PROPAGATION_KINDS  # a DRO-DS object, spec or placement
        body = _policy_object(pol, pkind.kind, kind.kind) if given else pol
        if path == "policy" and pkind.spec_model is not None:  # each bad field named, as a write of it would
            try:
                pkind.spec_model.model_validate(body.get("spec") or {})
            except ValidationError as e:
                fields = field_errors_of(e.errors(), "policy.spec.")
                raise Invalid(f"policy: not a valid {pkind.kind}: " + "; ".join(
                    f"{f['field']}: {f['message']}" for f in fields), {"fields": fields}) from e
        p = decode_policy(pkind)(KeyValue(f"/whatif/{i}", json.dumps(body).encode(), 0, 0, 0))
        if p is None and path == "policy":
            raise _field_error(path, f"not a valid {pkind.kind}")
        return p  # a stored policy the detector cannot read is skipped, as the detector skips it

    if policy is not None:
        p = decode(policy, 0, "policy")
        # as the detector matches it (a Karmada policy's terms, a policy's datasets), else whatever its selectors say
        match: PolicyMatch | None = best_policy([p], kind, workload) or PolicyMatch(
            1, 3, p.priority, 0 if p.kind is RESOURCE_PLACEMENT_POLICY else 1, p.name, p.kind, p.placement,
            p.target_names, p.target_labels)
    else:
        decoded = [decode(s, i, f"stored[{i}]") for i, s in enumerate(stored)]
        match = best_policy([p for p in decoded if p is not None], kind, workload)
    if match is None:
        raise Invalid("no propagation policy selects this workload; pass one as \"policy\"",
                      {"kind": kind.kind, "name": meta["name"]}, code="NO_MATCHING_POLICY")
    obj = desired_binding(kind, workload, match)
    key = (kind.api_version, kind.kind, str(meta.get("namespace") or "default"), str(meta["name"]))
    autoscaled(obj["spec"], owned_replicas(autoscalers, key), *owned_weights(autoscalers, key))
    try:
        spec = BindingSpec.model_validate(obj["spec"])
    except ValidationError as e:
        err = e.errors()[0]
        raise _field_error("workload", f"the derived binding is invalid: {err['msg']}") from e
    return str(obj["metadata"]["name"]), spec


