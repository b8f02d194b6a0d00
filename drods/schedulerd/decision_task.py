"""The scheduling task a stored Binding is decided with: one function for the scheduler service and
for the what-if of a stored binding's change (`drods.whatif.dryrun`), so the two cannot drift apart."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from drods.model.annotations import evicted_from, offered
from drods.model.binding import BindingSpec, TargetCluster
from drods.scheduler.task import Task, users_of
from drods.schedulerd.records import DATA_MOVED, FOLLOW, RECONCILE, RESCHEDULE, BindingRecord
from drods.schedulerd.users import declared_users_changed, learned


def decision_task(spec: BindingSpec, rec: BindingRecord, obj: Mapping[str, Any], schedule_type: str,
                  current: Sequence[TargetCluster] | None = None) -> tuple[Task, bool]:
    """The task ``rec`` (stored as ``obj``, its spec parsed as ``spec``) is decided with for a decision of
    ``schedule_type``, placed at ``current`` (default: its recorded placement), and whether the spec
    restates the users: a change beyond the replicas that declares users other than those the last
    decision used divides the replicas by the new shares again (within the move budget) — unless the
    binding keeps data, which only a plan or failover moves."""
    placed = list(current) if current is not None else \
        [TargetCluster.model_construct(cluster=c, replicas=n) for c, n in rec.placement]
    users, slo = learned(obj)
    restated = schedule_type == RECONCILE and bool(placed) and not rec.keeps_data and \
        declared_users_changed(users_of(spec.placement, None), obj)
    # moved off one cluster (failover, a NoExecute taint, a drain): its replicas on the others stay where
    # they run, the moved ones are placed anew — as Karmada's scheduler assigns only a failover's missing
    # replicas (a fresh division had dropped 14 running replicas from a busy but healthy member)
    evicted = evicted_from(obj) if schedule_type == RESCHEDULE else None
    if evicted is not None:  # its replicas there are the ones to place anew (a cordoned cluster would keep them)
        placed = [t for t in placed if t.cluster != evicted]
    # a placement offer only adds a candidate: what runs keeps its place (and its bonus)
    keep = evicted is not None or (schedule_type == RESCHEDULE and offered(obj))
    task = Task(spec, name=rec.name, current=placed,
                rebalance=(schedule_type in (RESCHEDULE, FOLLOW, DATA_MOVED) and not keep) or restated,
                workload_class=rec.workload_class, workload=rec.workload, primary=rec.primary, users=users,
                latency_slo_ms=slo, placement_changed=schedule_type == RECONCILE)
    return task, restated
