"""The member-cluster controllers of one leadership term (A6), as one runnable.

Karmada's flow: the binding controller turns each scheduled Binding into one stored Work per target
cluster and rolls the Works' status back up; the execution controller applies push-mode members'
Works (pull-mode agents apply their own); the work-status controller records what push members hold
on their Works. Health, failover and cleanup run beside them. They share the member clients, the
manager's informers and the indexes over them (`drods.controllers.fleet`), and run together while
this process leads ``/leases/member-controllers``: every write goes through the term's fenced store
and registry, and each Work records the term's generation. Another replica takes over (rebuilding
everything from the store) when this one stops.
"""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING

from drods.controllers.app_failover import ApplicationFailover
from drods.controllers.binding import BindingController
from drods.controllers.cleanup import Cleanup
from drods.controllers.execution import Execution
from drods.controllers.failover import Failover
from drods.controllers.federated_quota import FederatedQuotaStatus
from drods.controllers.fleet import MemberFleet, MemberInformers
from drods.controllers.health import ClusterHealth
from drods.controllers.quota_assignments import QuotaAssignments
from drods.controllers.rebalancer import WorkloadRebalancerController
from drods.controllers.remedy import Remedies
from drods.controllers.rescheduler import Rescheduler
from drods.controllers.settings import MemberSettings
from drods.controllers.taint_policy import ClusterTaintPolicies
from drods.controllers.workstatus import WorkStatusController
from drods.machinery.manager import Leadership
from drods.machinery.tasks import run_all
from drods.members.clients import MemberClients

if TYPE_CHECKING:
    from drods.monitor.service import MonitorService

LEASE = "member-controllers"


class MemberControllers:
    def __init__(self, lead: Leadership, informers: MemberInformers, settings: MemberSettings,
                 monitor: MonitorService, rescheduler: Rescheduler) -> None:
        self.lead = lead
        self.informers = informers
        self.settings = settings
        self.monitor = monitor
        self.rescheduler = rescheduler
        self.fleet: MemberFleet | None = None  # while running (tests and the bench look at it)

    async def run(self) -> None:
        s = self.settings
        # a member cannot refuse a deposed leader's apply as the store refuses its writes: each is
        # sent only while this process's lease cannot have expired yet
        clients = MemberClients(self.lead.registry, replace(s.member_options(), may_write=self.lead.fresh))
        fleet = self.fleet = MemberFleet(self.lead.store, self.lead.registry, self.informers, clients)
        try:
            await fleet.start()
            execution = Execution(fleet, s)
            inf = self.informers
            karmada = [ClusterTaintPolicies(fleet, inf.taint_policies).run()] if inf.taint_policies is not None else []
            if inf.quotas is not None:
                karmada += [FederatedQuotaStatus(fleet, inf.quotas).run(),
                            QuotaAssignments(fleet, inf.quotas, self.lead.generation).run()]
            if inf.rebalancers is not None:
                karmada.append(WorkloadRebalancerController(self.lead.registry, inf.rebalancers).run())
            if inf.remedies is not None:
                karmada.append(Remedies(fleet, inf.remedies).run())
            await run_all(BindingController(fleet, s, generation=self.lead.generation).run(), execution.run(),
                          WorkStatusController(fleet, s).run(), ClusterHealth(fleet, s, self.monitor).run(),
                          Failover(fleet, s, self.rescheduler).run(),
                          ApplicationFailover(fleet, self.rescheduler,
                                              interval_s=min(1.0, s.probeIntervalSeconds)).run(),
                          Cleanup(fleet, s.cleanupIntervalSeconds).run(), *karmada)
        finally:
            fleet.stop()
            self.fleet = None
            await clients.close()
