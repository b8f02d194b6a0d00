"""What the sim's controllers decide, as pure functions of (workload, its pods, now): which pods to
create and delete, and the status to report. `drods.sim.controller` does the I/O."""

from __future__ import annotations

import copy
import hashlib
import random
from dataclasses import dataclass, field
from typing import Any

from drods.model import jsondoc
from drods.model.rollout import max_unavailable
from drods.sim.resources import condition, is_terminal

Obj = dict[str, Any]
_SUFFIX_ALPHABET = "bcdfghjklmnpqrstvwxz2456789"  # what Kubernetes uses for generated names


@dataclass
class Plan:
    create: list[Obj] = field(default_factory=list)
    delete: list[Obj] = field(default_factory=list)
    status: Obj | None = None


def suffix(n: int = 5) -> str:
    return "".join(random.choice(_SUFFIX_ALPHABET) for _ in range(n))


def template_hash(template: Obj) -> str:
    digest = hashlib.sha256(jsondoc.canonical(template)).hexdigest()
    return "".join(_SUFFIX_ALPHABET[int(digest[i:i + 2], 16) % len(_SUFFIX_ALPHABET)] for i in range(0, 20, 2))


def is_ready(pod: Obj) -> bool:
    cond = condition(pod, "Ready")
    return bool(cond and cond.get("status") == "True") and not is_terminal(pod)


def live(pods: list[Obj]) -> list[Obj]:
    return [p for p in pods if not is_terminal(p) and not p["metadata"].get("deletionTimestamp")]


def owner_ref(owner: Obj) -> Obj:
    return {"apiVersion": owner["apiVersion"], "kind": owner["kind"], "name": owner["metadata"]["name"],
            "uid": owner["metadata"]["uid"], "controller": True, "blockOwnerDeletion": True}


def pod_from_template(owner: Obj, name: str, extra_labels: dict[str, str], node_name: str | None = None) -> Obj:
    template = copy.deepcopy((owner.get("spec") or {}).get("template") or {})
    tmeta = template.get("metadata") or {}
    spec = template.get("spec") or {}
    spec.setdefault("restartPolicy", "Always")
    spec.setdefault("schedulerName", "default-scheduler")
    if node_name:
        spec["nodeName"] = node_name
    meta: Obj = {"name": name, "namespace": owner["metadata"].get("namespace", "default"),
                 "labels": {**(tmeta.get("labels") or {}), **extra_labels}, "ownerReferences": [owner_ref(owner)]}
    if tmeta.get("annotations"):
        meta["annotations"] = dict(tmeta["annotations"])
    return {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": spec, "status": {"phase": "Pending"}}


def deletion_order(pods: list[Obj]) -> list[Obj]:
    """Which pods go first when scaling down: unscheduled, then not ready, then the newest."""
    def key(p: Obj) -> tuple[int, int, str, str]:
        bound = 1 if (p.get("spec") or {}).get("nodeName") else 0
        return (bound, 1 if is_ready(p) else 0, _neg(p["metadata"].get("creationTimestamp", "")),
                _neg(p["metadata"]["name"]))
    return sorted(pods, key=key)


def _neg(text: str) -> str:
    """Sort key that orders strings descending inside an ascending sort."""
    return "".join(chr(0x10FFFF - ord(c)) for c in text)


def _cond(type_: str, ok: bool, reason: str, message: str, previous: Obj | None, now: str) -> Obj:
    status = "True" if ok else "False"
    same = previous is not None and previous.get("status") == status and previous.get("reason") == reason
    since = previous.get("lastTransitionTime", now) if same and previous else now
    updated = previous.get("lastUpdateTime", since) if same and previous else now
    return {"type": type_, "status": status, "reason": reason, "message": message,
            "lastTransitionTime": since, "lastUpdateTime": updated}


# ---- Deployment ---------------------------------------------------------------------------------


def plan_deployment(d: Obj, pods: list[Obj], now: str) -> Plan:
    spec = d.get("spec") or {}
    desired = int(spec.get("replicas", 1))
    h = template_hash(spec.get("template") or {})
    pods = live(pods)
    new = [p for p in pods if p["metadata"].get("labels", {}).get("pod-template-hash") == h]
    new_names = {p["metadata"]["name"] for p in new}
    old = [p for p in pods if p["metadata"]["name"] not in new_names]
    plan = Plan()
    name = d["metadata"]["name"]
    for _ in range(max(0, desired - len(new))):
        plan.create.append(pod_from_template(d, f"{name}-{h}-{suffix()}", {"pod-template-hash": h}))
    if len(new) > desired:
        plan.delete += deletion_order(new)[: len(new) - desired]
    strategy = spec.get("strategy") or {}
    unavailable = max_unavailable(spec, desired)
    ready_new = sum(1 for p in new if is_ready(p))
    keep_old = 0 if strategy.get("type") == "Recreate" else max(0, desired - ready_new - unavailable)
    if len(old) > keep_old:
        plan.delete += deletion_order(old)[: len(old) - keep_old]
    gone = {p["metadata"]["name"] for p in plan.delete}
    kept = [p for p in pods if p["metadata"]["name"] not in gone]
    ready = sum(1 for p in kept if is_ready(p))
    updated = sum(1 for p in kept if p["metadata"]["name"] in new_names)
    prev = d.get("status") or {}
    prev_conds = {c.get("type"): c for c in prev.get("conditions") or []}
    available_ok = ready >= desired - unavailable
    done = updated == desired and ready >= desired and len(kept) == desired
    status: Obj = {
        "observedGeneration": d["metadata"].get("generation", 1),
        "replicas": len(kept), "updatedReplicas": updated, "readyReplicas": ready, "availableReplicas": ready,
        "conditions": [
            _cond("Available", available_ok,
                  "MinimumReplicasAvailable" if available_ok else "MinimumReplicasUnavailable",
                  "Deployment has minimum availability." if available_ok
                  else "Deployment does not have minimum availability.", prev_conds.get("Available"), now),
            _cond("Progressing", True, "NewReplicaSetAvailable" if done else "ReplicaSetUpdated",
                  f'ReplicaSet "{name}-{h}" has successfully progressed.' if done
                  else f'ReplicaSet "{name}-{h}" is progressing.', prev_conds.get("Progressing"), now),
        ],
    }
    if desired - ready > 0:
        status["unavailableReplicas"] = desired - ready
    plan.status = status
    return plan


# ---- ReplicaSet ---------------------------------------------------------------------------------


def plan_replicaset(rs: Obj, pods: list[Obj]) -> Plan:
    """``spec.replicas`` pods from the template (no rollout: a ReplicaSet's template change applies
    to the pods it makes next, as in Kubernetes), the surplus deleted in `deletion_order`."""
    spec = rs.get("spec") or {}
    desired = int(spec.get("replicas", 1))
    name = rs["metadata"]["name"]
    pods = live(pods)
    plan = Plan()
    for _ in range(max(0, desired - len(pods))):
        plan.create.append(pod_from_template(rs, f"{name}-{suffix()}", {}))
    if len(pods) > desired:
        plan.delete += deletion_order(pods)[: len(pods) - desired]
    gone = {p["metadata"]["name"] for p in plan.delete}
    kept = [p for p in pods if p["metadata"]["name"] not in gone]
    ready = sum(1 for p in kept if is_ready(p))
    plan.status = {"observedGeneration": rs["metadata"].get("generation", 1), "replicas": len(kept),
                   "fullyLabeledReplicas": len(kept), "readyReplicas": ready, "availableReplicas": ready}
    return plan


# ---- StatefulSet --------------------------------------------------------------------------------


def plan_statefulset(s: Obj, pods: list[Obj], now: str) -> Plan:
    spec = s.get("spec") or {}
    desired = int(spec.get("replicas", 1))
    name = s["metadata"]["name"]
    revision = f"{name}-{template_hash(spec.get('template') or {})}"
    parallel = spec.get("podManagementPolicy") == "Parallel"
    by_ordinal: dict[int, Obj] = {}
    for p in live(pods):
        tail = p["metadata"]["name"].rsplit("-", 1)[-1]
        if tail.isdigit():
            by_ordinal[int(tail)] = p
    plan = Plan()
    for i in range(desired):
        if i in by_ordinal:
            continue
        if not parallel and any(not is_ready(by_ordinal[j]) for j in range(i) if j in by_ordinal):
            break
        pod = pod_from_template(s, f"{name}-{i}", {"controller-revision-hash": revision,
                                                   "statefulset.kubernetes.io/pod-name": f"{name}-{i}",
                                                   "apps.kubernetes.io/pod-index": str(i)})
        pod["spec"]["hostname"] = f"{name}-{i}"
        if spec.get("serviceName"):
            pod["spec"]["subdomain"] = spec["serviceName"]
        plan.create.append(pod)
        if not parallel:
            break
    extra = sorted((i for i in by_ordinal if i >= desired), reverse=True)
    plan.delete += [by_ordinal[i] for i in (extra if parallel else extra[:1])]
    kept = {i: p for i, p in by_ordinal.items() if i < desired}
    outdated = sorted((i for i, p in kept.items()
                       if p["metadata"].get("labels", {}).get("controller-revision-hash") != revision), reverse=True)
    if outdated and not extra and all(is_ready(p) for p in kept.values()):
        plan.delete.append(kept.pop(outdated[0]))  # rolling update: highest ordinal first, one at a time
    ready = sum(1 for p in kept.values() if is_ready(p))
    updated = sum(1 for p in kept.values()
                  if p["metadata"].get("labels", {}).get("controller-revision-hash") == revision)
    prev = s.get("status") or {}
    current_rev = revision if updated == len(kept) == desired else prev.get("currentRevision", revision)
    current = sum(1 for p in kept.values()
                  if p["metadata"].get("labels", {}).get("controller-revision-hash") == current_rev)
    plan.status = {
        "observedGeneration": s["metadata"].get("generation", 1), "replicas": len(kept),
        "readyReplicas": ready, "availableReplicas": ready, "currentReplicas": current, "updatedReplicas": updated,
        "currentRevision": current_rev, "updateRevision": revision, "collisionCount": 0,
    }
    return plan


# ---- DaemonSet ----------------------------------------------------------------------------------


def plan_daemonset(ds: Obj, pods: list[Obj], eligible_nodes: list[str]) -> Plan:
    spec = ds.get("spec") or {}
    name = ds["metadata"]["name"]
    h = template_hash(spec.get("template") or {})
    plan = Plan()
    on_node: dict[str, Obj] = {}
    for p in live(pods):
        node = (p.get("spec") or {}).get("nodeName")
        stale = p["metadata"].get("labels", {}).get("controller-revision-hash") != h
        if node not in eligible_nodes or node in on_node or stale:
            plan.delete.append(p)
        else:
            on_node[node] = p
    for node in eligible_nodes:
        if node not in on_node:
            plan.create.append(pod_from_template(ds, f"{name}-{suffix()}", {"controller-revision-hash": h},
                                                 node_name=node))
    ready = sum(1 for p in on_node.values() if is_ready(p))
    plan.status = {
        "observedGeneration": ds["metadata"].get("generation", 1),
        "desiredNumberScheduled": len(eligible_nodes), "currentNumberScheduled": len(on_node),
        "updatedNumberScheduled": len(on_node), "numberReady": ready, "numberAvailable": ready,
        "numberMisscheduled": 0,
    }
    if len(eligible_nodes) - ready > 0:
        plan.status["numberUnavailable"] = len(eligible_nodes) - ready
    return plan


# ---- Job ----------------------------------------------------------------------------------------


def plan_job(job: Obj, pods: list[Obj], now: str) -> Plan:
    spec = job.get("spec") or {}
    meta = job["metadata"]
    completions = int(spec.get("completions") or 1)
    parallelism = int(spec.get("parallelism", 1))
    succeeded = sum(1 for p in pods if (p.get("status") or {}).get("phase") == "Succeeded")
    failed = sum(1 for p in pods if (p.get("status") or {}).get("phase") == "Failed")
    active = live(pods)
    prev = job.get("status") or {}
    plan = Plan()
    complete = succeeded >= completions
    # Kubernetes' backoffLimit (default 6): more failed pods than that and the Job has failed for good.
    failed_for_good = not complete and failed > int(spec.get("backoffLimit", 6))
    if not complete and not failed_for_good and not spec.get("suspend"):
        uid = meta["uid"]
        labels = {"job-name": meta["name"], "batch.kubernetes.io/job-name": meta["name"],
                  "controller-uid": uid, "batch.kubernetes.io/controller-uid": uid}
        for _ in range(max(0, min(parallelism, completions - succeeded) - len(active))):
            pod = pod_from_template(job, f"{meta['name']}-{suffix()}", labels)
            if pod["spec"].get("restartPolicy") == "Always":
                pod["spec"]["restartPolicy"] = "Never"
            plan.create.append(pod)
    if spec.get("suspend") or failed_for_good:
        plan.delete += active
    status: Obj = {"active": 0 if complete or failed_for_good else len(active) + len(plan.create) - len(plan.delete),
                   "succeeded": succeeded, "failed": failed, "ready": sum(1 for p in active if is_ready(p)),
                   "startTime": prev.get("startTime", now), "uncountedTerminatedPods": {}}
    if complete:
        status["completionTime"] = prev.get("completionTime", now)
        prev_conds = {c.get("type"): c for c in prev.get("conditions") or []}
        status["conditions"] = [
            _cond("SuccessCriteriaMet", True, "CompletionsReached", "Reached expected number of succeeded pods",
                  prev_conds.get("SuccessCriteriaMet"), now),
            _cond("Complete", True, "CompletionsReached", "Reached expected number of succeeded pods",
                  prev_conds.get("Complete"), now),
        ]
    if failed_for_good:
        prev_conds = {c.get("type"): c for c in prev.get("conditions") or []}
        message = "Job has reached the specified backoff limit"
        status["conditions"] = [
            _cond("FailureTarget", True, "BackoffLimitExceeded", message, prev_conds.get("FailureTarget"), now),
            _cond("Failed", True, "BackoffLimitExceeded", message, prev_conds.get("Failed"), now)]
    plan.status = status
    return plan
