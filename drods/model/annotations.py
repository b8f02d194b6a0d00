"""Labels and annotations DRO-DS itself reads and writes on objects: ownership and the record of why
something moved.

They live in ``metadata`` so a user sees them with ``drods get … -o yaml`` or ``kubectl get … -o
yaml``, and so a restarted component resumes from the object, not from memory. This is the one
module that names them: the controllers, the pull-mode agent and the API read them from here.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

# ---- ownership of member copies (M3): what DRO-DS created, for which binding, from what
MANAGED_BY = "multicluster.io/managed-by"  # label; DRO-DS updates and deletes only objects with it
MANAGER = "drods"
MANAGED_SELECTOR = f"{MANAGED_BY}={MANAGER}"
FOREIGN_SELECTOR = f"{MANAGED_BY}!={MANAGER}"  # objects without the label too (Kubernetes' ``!=``)
# ---- Bindings the resource detector made (``MANAGED_BY`` = this), the only ones it updates or deletes,
# with the workload's kind
DETECTOR_NAME = "resource-detector"
RESOURCE_KIND_LABEL = "multicluster.io/resource-kind"
CLUSTER_LABEL = "multicluster.io/cluster"  # label on Works (an agent lists its own)
BINDING_LABEL = "multicluster.io/binding"  # label on Works and member copies
ANN_BINDING = "multicluster.io/binding"
ANN_BINDING_UID = "multicluster.io/binding-uid"
ANN_TEMPLATE_GENERATION = "multicluster.io/template-generation"
ANN_HASH = "multicluster.io/manifest-hash"
ANN_CLUSTER = "multicluster.io/cluster"
ANN_OVERRIDES = "multicluster.io/applied-overrides"
ANN_DEPENDENT_OF = "multicluster.io/dependent-of"
# what `drods.controllers.manifests.own` writes on a member copy (a released copy loses them all)
OWNERSHIP_LABELS = (MANAGED_BY, BINDING_LABEL)
OWNERSHIP_ANNOTATIONS = (ANN_BINDING, ANN_BINDING_UID, ANN_TEMPLATE_GENERATION, ANN_HASH, ANN_CLUSTER, ANN_OVERRIDES,
                         ANN_DEPENDENT_OF)
LAST_APPLIED = "kubectl.kubernetes.io/last-applied-configuration"  # kubectl's; never copied to members

# ---- F3: on a Binding (the detector's), its workload keeps data in PersistentVolumeClaims: its replicas
# leave a cluster only with a plan (drain, evacuation, `drods migrate`) or by failover, never by a fleet
# change, a peak shave or a move towards its users, which would bring them up on empty claims
KEEPS_DATA_LABEL = "multicluster.io/keeps-data"

# ---- placement (H2): the workload's class, copied from the workload to its Binding by the detector;
# the scheduler's Dissonance score reads it there
WORKLOAD_CLASS_LABEL = "multicluster.io/workload-class"
# F3: on a member's copy of a workload placed with a stateful topology, its cluster's role
# (``primary`` / ``replica``), so the database's own operator or scripts know which copy leads
STATEFUL_ROLE_LABEL = "multicluster.io/stateful-role"

# ---- Works (A6, S11)
# The leadership generation of the member controllers that last wrote the Work's spec: proof that no
# deposed leader wrote it (the write was fenced on that generation).
LEADER_GENERATION = "multicluster.io/leader-generation"
# The cluster left the binding's placement at this time (RFC 3339); the Work stays, untouched, until
# the new placement covers it or the graceful timeout passes.
REMOVING_SINCE = "multicluster.io/removing-since"

# Binding: why its last rescheduling was triggered (shown in the schedule history).
RESCHEDULE_REASON = "multicluster.io/reschedule-reason"
# Binding: clusters automatic operations moved it away from (comma-separated), so it can be
# offered back to them once they are calm again.
EVACUATED_FROM = "multicluster.io/evacuated-from"
# the clusters failover (S11) moved a Binding's replicas off; the descheduler offers them back once the
# cluster is Ready and calm again (fail-back), then forgets it here
FAILED_OVER_FROM = "multicluster.io/failed-over-from"
FAIL_BACK = "fail back to"  # how the reschedule reason of a fail-back begins
PEAK_SHAVE = "peak shave"  # how the reschedule reason of a peak-shaving move begins
OFFER = "offer"  # how the reschedule reason of a placement offer begins (`offer_reason`)
# the moves a peak shave planned for a Binding (JSON list of {"from", "to", "replicas"}), written with
# a ``PEAK_SHAVE`` reschedule and applied as they are by the scheduler (`drods.schedulerd.shaving`)
PEAK_SHAVE_MOVES = "multicluster.io/peak-shave-moves"
# Cluster: a pre-allocation hold, JSON ``{"waterLevel": float, "until": RFC 3339, "reason": str}``;
# until it expires the scheduler sees the cluster at least at that forecast water level.
PREALLOCATION = "multicluster.io/preallocation"
# Binding: clusters placement feedback (CATS CCC, `drods.steering`) offered it (comma-separated):
# the scheduler adds them to the names the binding may use (`drods.model.binding.with_offers`).
PLACEMENT_OFFERS = "multicluster.io/placement-offers"
# Binding: the users CATS steering learned from the demand of the workload's service, JSON
# ``{"sites": [{"site": str, "weight": float}], "latencySLOMs": float | null, "learnedAt": RFC 3339}``;
# written with a reschedule (``USERS_MOVED`` reason) when they move, read by the scheduler on every decision
LEARNED_USERS = "multicluster.io/learned-users"
USERS_MOVED = "users moved"  # how the reschedule reason of a learned-users change begins
# H1: when the descheduler last re-placed a binding nearer its traffic peers (RFC 3339): its cool-down
TRAFFIC_REBALANCED_AT = "multicluster.io/traffic-rebalanced-at"

# ---- stateful migration (F3, `drods.model.migration`)
# Binding: the placement the scheduler must write while a MigrationPlan runs, JSON
# ``{"by": "MigrationPlan <ns>/<name>", "placement": {"<cluster>": replicas, …}}``.
PINNED_PLACEMENT = "multicluster.io/pinned-placement"
# Binding: clusters whose copies no longer receive traffic (comma-separated): steering routes and the
# service directory leave them out while the copies still run (a plan's switch-traffic phase).
TRAFFIC_WITHDRAWN = "multicluster.io/traffic-withdrawn"
# Binding: the cluster a MigrationPlan that succeeded moved it off: a fleet change never moves it back
# there on its own (`moved_away_from`); the next plan replaces it
MIGRATED_FROM = "multicluster.io/migrated-from"
# Workload template (a StatefulSet): the hook a drain migrates it with (JSON or YAML of a MigrationHook).
MIGRATION_HOOK = "multicluster.io/migration-hook"
# Hook Jobs and their Bindings: the plan (``<namespace>.<name>``) they belong to.
PLAN_LABEL = "multicluster.io/migration-plan"
# on a member's Job: the run's own report, JSON (a data mover writes {bytes, bytesPerSecond, checksum,
# sourceChecksum} onto its Job when it ends, as `kubectl annotate job` from inside would); the Work's
# status carries it back (`drods.model.work.ManifestStatus.report`)
RUN_REPORT = "multicluster.io/run-report"
CACHE_PLAN_LABEL = "multicluster.io/cache-plan"  # label on a CachePlan's copy Job and its Binding


def evacuated_from(obj: Mapping[str, Any]) -> list[str]:
    """The clusters a Binding object was moved away from by automatic operations."""
    raw = ((obj.get("metadata") or {}).get("annotations") or {}).get(EVACUATED_FROM) or ""
    return [c for c in str(raw).split(",") if c]


def failed_over_from(obj: Mapping[str, Any]) -> list[str]:
    """The clusters failover moved a Binding object's replicas off, not yet offered back."""
    raw = ((obj.get("metadata") or {}).get("annotations") or {}).get(FAILED_OVER_FROM) or ""
    return [c for c in str(raw).split(",") if c]


def failover_reason(cluster: str, since: str, toleration_s: float) -> str:
    return f"cluster {cluster} NotReady since {since} (toleration {toleration_s:g}s)"


def drain_reason(cluster: str, reason: str | None = None) -> str:
    return f"drain {cluster}" + (f": {reason}" if reason else "")


def offer_reason(cluster: str, reason: str) -> str:
    return f"{OFFER} {cluster}: {reason}"


def offered(obj: Mapping[str, Any]) -> bool:
    """Was the Binding's last reschedule a placement offer (`offer_reason`)? An offer adds a candidate and
    re-decides nothing that runs: a fresh division had dropped a copy on a cluster hot with its own load."""
    return str(((obj.get("metadata") or {}).get("annotations") or {}).get(RESCHEDULE_REASON) or "") \
        .startswith(f"{OFFER} ")


def evicted_from(obj: Mapping[str, Any]) -> str | None:
    """The cluster the Binding's last reschedule moves it off — failover (`failover_reason`), a NoExecute
    taint it does not tolerate (`drods.controllers.failover.taint_reason`) or a drain (`drain_reason`) —
    else None (a rebalance, a fail-back, a peak shave …). Its replicas elsewhere stay where they run."""
    reason = str(((obj.get("metadata") or {}).get("annotations") or {}).get(RESCHEDULE_REASON) or "")
    words = reason.split(" ")
    if len(words) >= 3 and words[0] == "cluster" and words[2] == "NotReady":
        return words[1]
    if len(words) >= 2 and words[0] == "drain":
        return words[1].rstrip(":")
    if len(words) >= 5 and words[0] == "taint" and words[2:4] == ["on", "cluster"]:
        return words[4]
    return None


def moved_away_from(obj: Mapping[str, Any]) -> frozenset[str]:
    """The clusters a Binding was moved off on purpose — by failover (``failed-over-from``, until fail-back
    offers a cluster back) or a drain (its last
    reschedule reason, written by `failover_reason` / `drain_reason`), by automatic operations
    (``evacuated-from``, which the descheduler offers back once calm) or by a MigrationPlan
    (``migrated-from``): a fleet change must not move it back there on its own (S11; Karmada does not
    move a failed-over workload back either; a workload's data moves only with a plan)."""
    reason = str(((obj.get("metadata") or {}).get("annotations") or {}).get(RESCHEDULE_REASON) or "")
    out = set(evacuated_from(obj)) | set(failed_over_from(obj))  # every cluster failed over from, not the last only
    if (migrated := migrated_from(obj)) is not None:
        out.add(migrated)
    if (evicted := evicted_from(obj)) is not None and not reason.startswith("taint "):
        out.add(evicted)
    return frozenset(out)


def migrated_from(obj: Mapping[str, Any]) -> str | None:
    """The cluster the last MigrationPlan that succeeded moved a Binding off (with its data)."""
    raw = ((obj.get("metadata") or {}).get("annotations") or {}).get(MIGRATED_FROM)
    return str(raw) if raw else None


def keeps_data(labels: Mapping[str, Any] | None) -> bool:
    """A Binding's labels say its workload keeps data in claims (``KEEPS_DATA_LABEL``)."""
    return (labels or {}).get(KEEPS_DATA_LABEL) == "true"


def is_managed(obj: Mapping[str, Any] | None) -> bool:
    """Did DRO-DS create this member object (so it may update and delete it)?"""
    return bool(obj) and (((obj or {}).get("metadata") or {}).get("labels") or {}).get(MANAGED_BY) == MANAGER


def manifest_hash(obj: Mapping[str, Any]) -> str | None:
    return (((obj.get("metadata") or {}).get("annotations")) or {}).get(ANN_HASH)


def annotation(obj: Mapping[str, Any] | None, key: str) -> str | None:
    value = (((obj or {}).get("metadata") or {}).get("annotations") or {}).get(key)
    return None if value is None else str(value)


def placement_offers(obj: Mapping[str, Any]) -> list[str]:
    """The clusters placement feedback offered a Binding object."""
    raw = ((obj.get("metadata") or {}).get("annotations") or {}).get(PLACEMENT_OFFERS) or ""
    return [c for c in str(raw).split(",") if c]


def learned_users(obj: Mapping[str, Any]) -> dict[str, Any] | None:
    """The learned users a Binding carries (``LEARNED_USERS``), None when none or unreadable."""
    raw = annotation(obj, LEARNED_USERS)
    if not raw:
        return None
    try:
        doc = json.loads(raw)
    except ValueError:
        return None
    return doc if isinstance(doc, dict) and isinstance(doc.get("sites"), list) else None


def follows_learned_users(obj: Mapping[str, Any], service_id: str | None = None) -> bool:
    """Does the scheduler place this Binding object near users learned from demand (for ``service_id``,
    when given)? Then the user-following path owns its placement and steering offers it no cluster.
    Users declared on the placement rule over learned ones (`drods.scheduler.task.users_of`): a
    binding declaring some does not follow the learned ones."""
    doc = learned_users(obj)
    if doc is None or (service_id is not None and doc.get("serviceId") != service_id):
        return False
    placement = ((obj.get("spec") or {}).get("placement") or {})
    if isinstance(placement, dict) and placement.get("users"):
        return False
    return any(isinstance(u, dict) and u.get("site") and isinstance(w := u.get("weight"), int | float) and w > 0
               for u in doc["sites"])


def run_report(obj: Mapping[str, Any] | None) -> dict[str, Any] | None:
    """The ``RUN_REPORT`` annotation of a member object, parsed; None when absent or not a JSON object."""
    raw = (((obj or {}).get("metadata") or {}).get("annotations") or {}).get(RUN_REPORT)
    if not raw:
        return None
    try:
        doc = json.loads(str(raw))
    except ValueError:
        return None
    return doc if isinstance(doc, dict) else None


def learned_users_forgotten(obj: Mapping[str, Any]) -> bool:
    """The last decision used learned users (``status.users.source: learned``) that the Binding no longer
    carries: steering forgot them (its registration was deleted or names another workload). The status
    keeps the last decision's users — nothing was re-placed — but they are no longer being learned."""
    users = (obj.get("status") or {}).get("users")
    return isinstance(users, Mapping) and users.get("source") == "learned" and learned_users(obj) is None
