"""What the scheduler keeps of each Binding, and the status fields it owns (API5, S7, S11).

Status ownership (the contract with the member controllers; `drods.model.binding` enforces it):

* the scheduler writes ``status.phase`` only to Pending / Scheduled / Unschedulable, and
  ``status.placement``, ``message``, ``reasons``, ``scheduledGeneration``, ``scheduledTime``,
  ``estimatedHourlyCost`` (F6; kept with the placement it prices when a retry is Unschedulable);
* the binding controller owns ``status.clusters[]`` and ``conditions`` and moves the phase Scheduled →
  Propagated → Running / Failed for the same placement;
* a new placement sets the phase back to Scheduled; the same placement keeps the phase it has;
* an Unschedulable result never evicts: a placement already in the status stays (as Karmada
  keeps its last result), only phase, message and reasons change.

Every write is a read-modify-write of the whole status under CAS, keeping the fields of others.

A binding pinned by a MigrationPlan (annotation ``multicluster.io/pinned-placement``) gets the pinned
placement verbatim, whatever triggers the decision, and needs one whenever its placement differs from
the pin; its status keeps the last pin after the plan releases it. Otherwise a binding needs a
decision when it was never scheduled, when ``metadata.generation`` moved past
``status.scheduledGeneration`` (spec changed: scale, placement edit …), or when
``spec.rescheduleTriggeredAt`` is later than ``status.scheduledTime`` (S11: re-place from scratch).
"""

from __future__ import annotations

import hashlib
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from drods.model import jsondoc
from drods.model.annotations import (
    DETECTOR_NAME,
    MANAGED_BY,
    PINNED_PLACEMENT,
    WORKLOAD_CLASS_LABEL,
    keeps_data,
    placement_offers,
)
from drods.model.binding import (
    EXPLANATION_FIELDS,
    SCHEDULER_PHASES,
    BindingStatus,
    TargetCluster,
    owned_status,
    without_reasons,
)
from drods.model.migration import parse_pin
from drods.model.packing import Packer
from drods.model.sharing import SharedPool
from drods.model.timefmt import parse_rfc3339, rfc3339_ms
from drods.scheduler.offers import OfferDemand

# A binding's status names a sample of the clusters that were dropped, a few per verdict, and counts
# them all by verdict (``reasonCounts``, with ``reasonsOmitted`` the ones the sample leaves out); the
# decision's history entry names up to 50. A status is stored with every write of the Binding: with
# 100 names, a binding that lost every cluster weighed ~13 KB in each cache of Bindings.
MAX_STATUS_REASONS = 20
STATUS_REASONS_PER_VERDICT = 5

# Why a binding is (re)scheduled; the ``scheduleType`` label of the Karmada-named metrics.
FIRST = "FirstSchedule"
RECONCILE = "ReconcileSchedule"
SCALE = "ScaleSchedule"
RESCHEDULE = "RescheduleTriggered"
FOLLOW = "FollowUpMoved"  # F3: the workload it follows was placed elsewhere
DATA_MOVED = "DatasetMoved"  # F4: a Dataset it reads has its copies on other clusters now
PINNED = "Pinned"  # F3: a MigrationPlan pinned a placement the status does not show yet
FLEET = "FleetChanged"  # S11: a cluster it may select joined, became Ready or changed

# the spec fields that decide which clusters a binding may select (``scheduler.selection``)
_SELECTING = ("targetClusters", "regions", "providers", "zones", "cities")

Placement = tuple[tuple[str, int], ...]


Requirements = tuple[float, float, float, float, float]
# Records share their requirement tuples and phases: a fleet's bindings repeat a few shapes (~180
# bytes each), and 100,000 records are kept. Bounded: emptied when full.
_SHAPES: SharedPool[Requirements, Requirements] = SharedPool(4096)
_PHASES = {p: p for p in ("Pending", "Scheduled", "Unschedulable")}


def requirement_tuple(resources: Mapping[str, Any] | None) -> Requirements:
    """The snapshot's resource vector (cpu, memory, gpu, pods, storage) straight from the spec dict."""
    r = resources or {}
    t = (float(r.get("cpu") or 0.0), float(r.get("memory") or 0.0), float(r.get("gpu") or 0), 1.0,
         float(r.get("storage") or 0.0))
    return _SHAPES.share(t)


def _phase(value: Any) -> str:
    phase = str(value or "Pending")
    return _PHASES.get(phase, phase)


@dataclass(frozen=True, slots=True)
class BindingRecord:
    """A Binding as the scheduler's informer keeps it: the stored bytes plus the parsed facts."""

    key: str
    name: str
    packed: bytes  # the stored bytes but ``status.reasons`` (``kept_bytes``), packed (``BINDING_BYTES``)
    mod_revision: int
    generation: int
    priority: int
    replicas: int
    duplicated: bool
    deleting: bool
    phase: str
    placement: Placement
    scheduled_generation: int | None
    scheduled_time: float | None
    trigger_time: float | None
    requirements: Requirements
    managed: bool  # created by the resource detector
    workload_class: str | None = None  # H2: label multicluster.io/workload-class
    keeps_data: bool = False  # F3: label multicluster.io/keeps-data — moved only by a plan or failover
    workload: str = ""  # H1: "namespace/name" of spec.resource, else "default/<binding name>"
    follow: str | None = None  # F3: "namespace/name" of spec.followUp
    pin: Placement | None = None  # F3: the placement a running MigrationPlan pinned (sorted by cluster)
    primary: str | None = None  # F3: the cluster with ``role: Primary`` in the status (stateful topology)
    demand: OfferDemand | None = None  # F1: GPUs of an eligible model / GiB of a tier per replica
    selection: int = 0  # ``selection_key``: bindings with equal keys select the same clusters
    workload_kind: str = ""  # X1: spec.resource.kind ("" for a binding without a resource)
    groups: tuple[str, ...] = ()  # workloadAffinity: "namespace/labelKey=labelValue" of spec.affinityGroups
    namespace: str = "default"  # spec.resource's (a FederatedResourceQuota counts it there)
    reads: tuple[str, ...] = ()  # F4: "namespace/name" of the Datasets in spec.datasets

    @property
    def placed(self) -> int:
        if self.duplicated:
            return self.replicas if self.placement else 0
        return sum(c for _, c in self.placement)

    @property
    def partial(self) -> bool:
        return self.phase != "Unschedulable" and self.scheduled_generation == self.generation and \
            self.placed < self.replicas

    @property
    def raw(self) -> bytes:
        return BINDING_BYTES.unpack(self.packed)

    def object(self) -> dict[str, Any]:
        """The stored object but ``status.reasons`` (see ``kept_bytes``)."""
        obj: dict[str, Any] = jsondoc.loads(self.raw)
        return obj


# 100,000 records would hold ~2 KB of stored bytes each, ~0.2 KB packed
BINDING_BYTES = Packer()


def kept_bytes(obj: Mapping[str, Any], raw: bytes) -> bytes:
    """``raw`` (the bytes of ``obj``) as a record keeps them: without ``status.reasons``
    (``without_reasons``; ~0.2-0.4 KB a parked binding in a failure storm)."""
    status = obj.get("status")
    kept = without_reasons(status) if isinstance(status, dict) else None
    return raw if kept is None else encode_object({**obj, "status": kept})


def decode_binding(key: str, raw: bytes, mod_revision: int) -> BindingRecord | None:
    try:
        obj = jsondoc.loads(raw)
        meta = obj["metadata"]
        name = meta["name"]
    except (ValueError, KeyError, TypeError):
        return None
    spec = obj.get("spec") or {}
    status = obj.get("status") or {}
    rs = (spec.get("placement") or {}).get("replicaScheduling") or {}
    placement = placement_of(status.get("placement"))
    topo = (spec.get("placement") or {}).get("statefulTopology")
    sg = status.get("scheduledGeneration")
    labels = meta.get("labels") or {}
    return BindingRecord(
        key=key,
        name=name,
        packed=BINDING_BYTES.pack(kept_bytes(obj, raw)),
        mod_revision=mod_revision,
        generation=int(meta.get("generation") or 1),
        priority=int(spec.get("priority") or 0),
        replicas=topology_total(topo) if topo and int(spec.get("replicas", 1)) > 0 else int(spec.get("replicas", 1)),
        duplicated=rs.get("replicaSchedulingType") == "Duplicated",
        deleting=bool(meta.get("deletionTimestamp")),
        phase=_phase(status.get("phase")),
        placement=placement,
        scheduled_generation=int(sg) if isinstance(sg, int) else None,
        scheduled_time=parse_rfc3339(status.get("scheduledTime")),
        trigger_time=parse_rfc3339(spec.get("rescheduleTriggeredAt")),
        requirements=requirement_tuple(spec.get("resources")),
        managed=labels.get(MANAGED_BY) == DETECTOR_NAME,
        workload_class=labels.get(WORKLOAD_CLASS_LABEL) or None,
        keeps_data=keeps_data(labels),
        workload=workload_of(name, spec.get("resource")),
        follow=_follow_of(spec.get("followUp")),
        pin=_pin_of(meta),
        primary=primary_of(status.get("placement")),
        demand=_demand_of(spec.get("resources")),
        selection=selection_key(spec, placement_offers(obj)),
        workload_kind=_kind_of(spec.get("resource")),
        groups=_groups_of(spec),
        namespace=_namespace_of(spec.get("resource")),
        reads=_reads_of(spec),
    )


def shown_of(rec: BindingRecord) -> tuple[tuple[str, int, float], ...]:
    """What the members showed of its copies: (cluster, the copy's replicas, when read) per entry of
    ``status.clusters`` that says both. Read from the stored bytes when asked (only while the binding's
    placement is assumed), not kept on every record: 100,000 records would hold ~15 MB of it."""
    status = rec.object().get("status") or {}
    out = []
    for e in status.get("clusters") or ():
        if not isinstance(e, dict):
            continue
        n, when = e.get("observedReplicas"), parse_rfc3339(e.get("observedTime"))
        if isinstance(n, int) and when is not None and isinstance(e.get("cluster"), str):
            out.append((sys.intern(e["cluster"]), n, when))
    return tuple(out)


def kept_copies(obj: Mapping[str, Any], placement: Placement) -> Placement:
    """The binding's copies the members still run on clusters its placement left (a drain's, kept with
    its Work marked removing until the replicas are ready elsewhere): (cluster, replicas). Their pods are
    the binding's own load there, not another workload's; placed there again, the copy is reused."""
    placed = {c for c, _ in placement}
    out = []
    for e in (obj.get("status") or {}).get("clusters") or ():
        if isinstance(e, dict) and e.get("removing") and isinstance(c := e.get("cluster"), str) and c not in placed:
            n = e.get("observedReplicas")
            if isinstance(n, int) and n > 0:
                out.append((c, n))
    return tuple(sorted(out))


def _namespace_of(resource: Any) -> str:
    ns = resource.get("namespace") if isinstance(resource, dict) else None
    return sys.intern(ns) if isinstance(ns, str) and ns else "default"


def _reads_of(spec: Mapping[str, Any]) -> tuple[str, ...]:
    reads = spec.get("datasets")
    if not isinstance(reads, list) or not reads:
        return ()
    ns = _namespace_of(spec.get("resource"))
    return tuple(sys.intern(f"{ns}/{d['name']}") for d in reads
                 if isinstance(d, dict) and isinstance(d.get("name"), str))


def _groups_of(spec: Mapping[str, Any]) -> tuple[str, ...]:
    groups = spec.get("affinityGroups")
    if not isinstance(groups, dict):
        return ()
    ns = _namespace_of(spec.get("resource"))
    return tuple(f"{ns}/{g}" for g in (groups.get("affinityGroup"), groups.get("antiAffinityGroup"))
                 if isinstance(g, str) and g)


def _kind_of(resource: Any) -> str:
    kind = resource.get("kind") if isinstance(resource, dict) else None
    return sys.intern(kind) if isinstance(kind, str) else ""


def selection_key(spec: Mapping[str, Any], offers: Sequence[str] = ()) -> int:
    """A 128-bit digest of what selects clusters (the spec's fields and the clusters offered by
    placement feedback): the scheduler groups bindings by it, so a fleet change judges each
    distinct selection once, not each binding."""
    pl = spec.get("placement") or {}
    doc = [*(spec.get(k) or None for k in _SELECTING), pl.get("clusterAffinity"), pl.get("clusterAffinities") or None,
           list(offers) or None]
    return int.from_bytes(hashlib.blake2b(jsondoc.canonical(doc), digest_size=16).digest(), "big")


def topology_total(topo: Any) -> int:
    """The replicas a ``statefulTopology`` places (primary + clusters × per cluster), from the stored
    dict (validated on the way in)."""
    prim = (topo.get("primary") or {}).get("replicas", 1)
    rep = topo.get("replicas") or {}
    return int(prim) + int(rep.get("clusters", 0)) * int(rep.get("replicasPerCluster", 1))


def primary_of(value: Any) -> str | None:
    """The cluster a status placement marks ``role: Primary`` (F3), if any."""
    for t in value if isinstance(value, list) else ():
        if isinstance(t, dict) and t.get("role") == "Primary" and isinstance(t.get("cluster"), str):
            return str(t["cluster"])
    return None


def _demand_of(resources: Any) -> OfferDemand | None:
    if not isinstance(resources, Mapping):
        return None
    try:
        return OfferDemand.of(resources)
    except (TypeError, ValueError):
        return None


def _pin_of(meta: Mapping[str, Any]) -> Placement | None:
    raw = (meta.get("annotations") or {}).get(PINNED_PLACEMENT)
    if raw is None:
        return None
    pin = parse_pin(raw)
    return tuple(sorted((sys.intern(c), n) for c, n in pin.items())) if pin is not None else None


def _follow_of(ref: Any) -> str | None:
    if isinstance(ref, dict) and ref.get("name"):
        return f"{ref.get('namespace') or 'default'}/{ref['name']}"
    return None


def workload_of(binding: str, resource: Any) -> str:
    """The traffic graph's name of a binding's workload (H1)."""
    if isinstance(resource, dict) and resource.get("name"):
        return f"{resource.get('namespace') or 'default'}/{resource['name']}"
    return f"default/{binding}"


def with_status(rec: BindingRecord, obj: Mapping[str, Any], raw: bytes) -> BindingRecord:
    """What ``decode_binding`` makes of ``raw`` — the bytes of ``obj``, ``rec``'s object with a new
    status — without parsing them (the revision stays ``rec``'s until the write's is known)."""
    status: Mapping[str, Any] = obj.get("status") or {}
    sg = status.get("scheduledGeneration")
    return replace(rec, packed=BINDING_BYTES.pack(kept_bytes(obj, raw)), phase=_phase(status.get("phase")),
                   placement=placement_of(status.get("placement")), primary=primary_of(status.get("placement")),
                   scheduled_generation=int(sg) if isinstance(sg, int) else None,
                   scheduled_time=parse_rfc3339(status.get("scheduledTime")))


def _spec_but_replicas(rec: BindingRecord) -> dict[str, Any]:
    spec: dict[str, Any] = jsondoc.loads(rec.raw).get("spec") or {}
    return {k: v for k, v in spec.items() if k not in ("replicas", "rescheduleTriggeredAt")}


def placement_of(value: Any) -> Placement:
    if not isinstance(value, list):
        return ()
    out: list[tuple[str, int]] = []
    for t in value:
        if isinstance(t, dict) and isinstance(t.get("cluster"), str):
            # interned: 100,000 bindings name the same few thousand clusters
            out.append((sys.intern(t["cluster"]), int(t.get("replicas") or 0)))
    return tuple(out)


def schedule_type(rec: BindingRecord, previous: BindingRecord | None = None) -> str | None:
    """Why ``rec`` needs a decision now, or None when its status is current."""
    if rec.deleting:
        return None
    if rec.pin is not None and rec.pin != tuple(sorted(rec.placement)):
        return PINNED
    if rec.trigger_time is not None and (rec.scheduled_time is None or rec.trigger_time > rec.scheduled_time):
        return RESCHEDULE
    if rec.scheduled_generation is None:
        return FIRST
    if rec.scheduled_generation != rec.generation:
        # only a spec change gets here (rare next to creates and status writes): parse both to compare
        if previous is not None and previous.generation != rec.generation and \
                _spec_but_replicas(previous) == _spec_but_replicas(rec):
            return SCALE
        return RECONCILE
    return None


def placement_json(placement: Sequence[TargetCluster] | Placement,
                   roles: Mapping[str, str] | None = None) -> list[dict[str, Any]]:
    """``[{cluster, replicas}]``, each with its ``role`` when ``roles`` names it (F3)."""
    out: list[dict[str, Any]] = []
    for t in placement:
        if isinstance(t, TargetCluster):
            row: dict[str, Any] = {"cluster": t.cluster, "replicas": t.replicas}
        else:
            row = {"cluster": t[0], "replicas": t[1]}
        if roles and row["cluster"] in roles:
            row["role"] = roles[row["cluster"]]
        out.append(row)
    return out


@dataclass(frozen=True, slots=True)
class Decision:
    """The scheduler-owned part of a status write."""

    scheduled: bool  # False = Unschedulable
    placement: Placement
    message: str
    reasons: Mapping[str, str]  # a sample (``MAX_STATUS_REASONS``)
    generation: int
    time: float
    hourly_cost: float | None = None  # F6: ``status.estimatedHourlyCost`` of a scheduled placement
    roles: Mapping[str, str] | None = None  # F3: Primary / Replica per cluster of a stateful topology
    users: Mapping[str, Any] | None = None  # ``status.users`` (None: the decision knew no users)
    reason_counts: Mapping[str, int] | None = None  # every dropped cluster, by verdict
    dropped: int = 0  # how many clusters were dropped in all (the sample's total)
    # the clusterAffinities term a placement came from (Karmada's ``schedulerObservingAffinityName``)
    affinity_name: str | None = None


def merge_status(current: Mapping[str, Any] | None, d: Decision) -> dict[str, Any]:
    """The new status: the scheduler's fields from ``d``, everything else as it was (see module doc)."""
    status = dict(current or {})
    old_placement = placement_of(status.get("placement"))
    old_phase = status.get("phase")
    if d.scheduled:
        new_placement = placement_json(d.placement, d.roles)
        changed = tuple(sorted(d.placement)) != tuple(sorted(old_placement)) or \
            primary_of(new_placement) != primary_of(status.get("placement"))
        if changed or old_phase is None or old_phase in SCHEDULER_PHASES:
            status["phase"] = "Scheduled"
        status["placement"] = new_placement
        if d.hourly_cost is not None:
            status["estimatedHourlyCost"] = d.hourly_cost
        else:
            status.pop("estimatedHourlyCost", None)
        if d.affinity_name:  # an Unschedulable decision leaves the term the placement came from said
            status["schedulerObservingAffinityName"] = d.affinity_name
        else:
            status.pop("schedulerObservingAffinityName", None)
    else:
        status["phase"] = "Unschedulable"
        if tuple(sorted(d.placement)) != tuple(sorted(old_placement)):  # a removed cluster's part taken off
            status["placement"] = placement_json(d.placement, None)
        status.setdefault("placement", [])
    if d.users is not None:  # the users the decision knew, placed or not (USERS said none while Unschedulable)
        status["users"] = dict(d.users)
    else:
        status.pop("users", None)
    status["message"] = d.message
    explain(status, d)
    status["scheduledGeneration"] = d.generation
    status["scheduledTime"] = rfc3339_ms(d.time)
    return owned_status(current or {}, status, BindingStatus.SCHEDULER_FIELDS)


def explain(status: dict[str, Any], d: Decision) -> None:
    """``status``'s explanation from ``d``: the sampled reasons, the counts by verdict and how many
    dropped clusters the sample does not name (none of them when the decision dropped nothing)."""
    reasons = dict(list(d.reasons.items())[:MAX_STATUS_REASONS])
    for f in EXPLANATION_FIELDS:
        status.pop(f, None)
    if reasons:
        status["reasons"] = reasons
    if d.reason_counts:
        status["reasonCounts"] = dict(d.reason_counts)
    if d.dropped > len(reasons):
        status["reasonsOmitted"] = d.dropped - len(reasons)


def encode_object(obj: Mapping[str, Any]) -> bytes:
    """Bytes as the registry stores them (no resourceVersion: that is the store's revision)."""
    body = dict(obj)
    meta = body.get("metadata")
    if isinstance(meta, dict) and "resourceVersion" in meta:
        body["metadata"] = {k: v for k, v in meta.items() if k != "resourceVersion"}
    return jsondoc.dumps(body)
