"""Status aggregation: member copies' status → ``Binding.status.clusters[]`` and phase, and the
workload template's own status (what ``kubectl get deploy web`` shows against DRO-DS).

Binding status ownership is in `drods.model.binding` (`BindingStatus`): the scheduler writes the
placement and its phases, the binding controller ``clusters[]``, ``conditions[]`` and the phases
Scheduled → Propagated → Running, or Failed, for the current placement.

The template's status carries the sums a user expects (``replicas``, ``readyReplicas``,
``availableReplicas``, ``updatedReplicas``) and nothing its kind's schema does not name: kubectl's
client-side apply of a saved template (``kubectl get -o yaml`` then ``apply -f``) patches against the
typed struct and fails on an unknown status field. Where each instance runs, with its replicas, ready
replicas and measured use (M1), is the Binding's ``status.clusters[]`` and ``status.usage``, as
Karmada keeps it on the ResourceBinding.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from drods.controllers.manifests import WORKLOAD_KINDS
from drods.model.annotations import ANN_HASH
from drods.model.conditions import transition
from drods.model.interpreter import StatusRule, read_path, write_path
from drods.model.rollout import minimum_available

Obj = dict[str, Any]


@dataclass(frozen=True, slots=True)
class Observation:
    """What a member reports about one copy of a workload."""

    kind: str
    hash: str | None
    generation: int
    observed_generation: int
    replicas: int
    ready: int
    available: int
    updated: int
    complete: bool
    conditions: tuple[tuple[str, str, str, str], ...]  # (type, status, reason, message)
    times: tuple[str | None, str | None] = (None, None)  # a Job's startTime, completionTime

    def conditions_json(self) -> list[dict[str, str]]:
        return [{"type": t, "status": s, **({"reason": r} if r else {}), **({"message": m} if m else {})}
                for t, s, r, m in self.conditions]


def observe(obj: Obj) -> Observation:
    kind = str(obj.get("kind"))
    st = obj.get("status") or {}
    meta = obj.get("metadata") or {}
    conds = tuple((str(c.get("type", "")), str(c.get("status", "")), str(c.get("reason") or ""),
                   str(c.get("message") or ""))
                  for c in st.get("conditions") or [] if isinstance(c, dict))
    if kind == "DaemonSet":
        replicas, ready = int(st.get("desiredNumberScheduled") or 0), int(st.get("numberReady") or 0)
        available, updated = int(st.get("numberAvailable") or 0), int(st.get("updatedNumberScheduled") or 0)
    elif kind == "Job":
        active, succeeded = int(st.get("active") or 0), int(st.get("succeeded") or 0)
        replicas, ready, available, updated = active + succeeded, active + succeeded, succeeded, active + succeeded
    else:
        replicas, ready = int(st.get("replicas") or 0), int(st.get("readyReplicas") or 0)
        available, updated = int(st.get("availableReplicas") or 0), int(st.get("updatedReplicas") or 0)
    complete = any(c[0] == "Complete" and c[1] == "True" for c in conds)
    times = (st.get("startTime"), st.get("completionTime")) if kind == "Job" else (None, None)
    return Observation(kind, (meta.get("annotations") or {}).get(ANN_HASH), int(meta.get("generation") or 1),
                       int(st.get("observedGeneration") or 0), replicas, ready, available, updated, complete, conds,
                       (str(times[0]) if times[0] else None, str(times[1]) if times[1] else None))


def copy_ready(kind: str, share: int, obs: Observation | None, parallelism: int | None = None) -> bool:
    """Is this cluster's copy doing what it should (for its current manifest)?"""
    if kind not in WORKLOAD_KINDS:
        return True
    if obs is None:
        return False
    if kind == "Job":
        return obs.complete or obs.ready >= (parallelism if parallelism is not None else share)
    if kind == "DaemonSet":
        return obs.observed_generation >= obs.generation and obs.ready >= obs.replicas
    return obs.observed_generation >= obs.generation and obs.ready >= share and obs.replicas <= share


def template_status(kind: str, spec: Obj, generation: int, entries: list[Obj], all_applied: bool, previous: Obj,
                    now: str, pending: int = 0) -> Obj:
    """The workload template's aggregated status from the binding's ``status.clusters[]``: the kind's
    own fields only (the per-cluster rows and the measured use stay on the Binding).

    ``Available`` means what it means on a Deployment: enough replicas available under the rollout
    budget (``spec.strategy``'s ``maxUnavailable``, 25 % by default) — it stays True while an update
    is applied and rolled out, which ``observedGeneration`` and ``updatedReplicas`` follow. ``pending``:
    replicas a partial placement left unplaced, which count as wanted and unavailable (39 of 500 placed
    and ready is not an available Deployment of 500)."""
    replicas = ready = available = updated = 0
    for e in entries:
        replicas += int(e.get("observedReplicas") or 0)
        ready += int(e.get("readyReplicas") or 0)
        available += int(e.get("availableReplicas") or 0)
        if not e.get("removing"):
            updated += int(e.get("updatedReplicas") or 0)
    out: Obj = {}
    prev_conds = previous.get("conditions") if isinstance(previous.get("conditions"), list) else None
    desired = sum(int(e.get("replicas") or 0) for e in entries if not e.get("removing")) + pending
    if kind == "Job":
        out.update(active=max(replicas - available, 0), succeeded=available)
        done = all(e.get("complete") for e in entries if not e.get("removing")) and bool(entries)
        out["conditions"] = [transition("Complete", done, "AllClustersComplete" if done else "Running",
                                       f"{sum(1 for e in entries if e.get('complete'))}/{len(entries)} clusters "
                                       "complete", prev_conds, now)]
        # as Karmada aggregates a Job: the earliest start, and the latest completion once every copy completed
        # (`kubectl get jobs` reads DURATION from them)
        starts = [str(e["startTime"]) for e in entries if e.get("startTime")]
        if starts:
            out["startTime"] = min(starts)
        current = [e for e in entries if not e.get("removing")]
        if done and all(e.get("completionTime") for e in current):
            out["completionTime"] = max(str(e["completionTime"]) for e in current)
    elif kind == "DaemonSet":
        out.update(desiredNumberScheduled=replicas, currentNumberScheduled=replicas, numberReady=ready,
                   numberAvailable=available, updatedNumberScheduled=updated)
    else:
        out.update(replicas=replicas, readyReplicas=ready, availableReplicas=available, updatedReplicas=updated)
        if replicas > available:
            out["unavailableReplicas"] = replicas - available
        minimum = minimum_available(spec, desired) if kind == "Deployment" else desired
        ok = bool(entries) and available >= minimum
        out["conditions"] = [transition("Available", ok, "MinimumReplicasAvailable" if ok else
                                       "MinimumReplicasUnavailable",
                                       f"{available}/{desired} replicas available in {len(entries)} cluster(s)",
                                       prev_conds, now)]
    out["observedGeneration"] = generation if all_applied else int(previous.get("observedGeneration") or 0)
    return out


def declared_status(rule: StatusRule, previous: Obj, members: dict[str, Obj]) -> Obj:
    """A customized kind's template status from its members' statuses (``members``: cluster → the
    member copy's ``status``), as its interpreter customization declares: each ``sum`` path is the sum
    of the members' integers there; the ``conditions`` list has every type the members report, True
    only when True on every cluster that reports it (reason and message from the first that is not).
    ``clusters[]`` says where each copy runs. Paths are the object's (``status.…``)."""
    out: Obj = {k: v for k, v in previous.items() if k == "observedGeneration"}
    wrapped: Obj = {"status": out}
    for path in rule.sums:
        total = 0
        for st in members.values():
            v = read_path({"status": st}, path)
            if isinstance(v, int) and not isinstance(v, bool):
                total += v
        write_path(wrapped, path, total)
    if rule.conditions is not None:
        merged: dict[str, Obj] = {}
        for _, st in sorted(members.items()):
            conds = read_path({"status": st}, rule.conditions)
            for c in conds if isinstance(conds, list) else []:
                if not isinstance(c, dict) or not c.get("type"):
                    continue
                seen = merged.get(str(c["type"]))
                if seen is None or (seen.get("status") == "True" and c.get("status") != "True"):
                    merged[str(c["type"])] = {k: c[k] for k in ("type", "status", "reason", "message") if k in c}
        write_path(wrapped, rule.conditions, [merged[t] for t in sorted(merged)])
    clusters = []
    for c, st in sorted(members.items()):
        row: Obj = {"cluster": c}
        if rule.ready is not None and isinstance(v := read_path({"status": st}, rule.ready), int):
            row["readyReplicas"] = v
        clusters.append(row)
    wrapped["status"]["clusters"] = clusters
    return dict(wrapped["status"])
