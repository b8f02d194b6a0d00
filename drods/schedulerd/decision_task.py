"""The scheduling task a stored Binding is decided with: one function for the scheduler service and
for the what-if of a stored binding's change (`drods.whatif.dryrun`), so the two cannot drift apart."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from drods.model.binding import BindingSpec, TargetCluster
from drods.scheduler.task import Task, users_of
from drods.schedulerd.records import FOLLOW, RECONCILE, RESCHEDULE, BindingRecord
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
    task = Task(spec, name=rec.name, current=placed, rebalance=schedule_type in (RESCHEDULE, FOLLOW) or restated,
                workload_class=rec.workload_class, workload=rec.workload, primary=rec.primary, users=users,
                latency_slo_ms=slo, placement_changed=schedule_type == RECONCILE)
    return task, restated
