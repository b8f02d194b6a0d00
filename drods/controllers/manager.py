"""The member-cluster controllers of one leadership term (A6), as one runnable.

Propagation, status, health, failover and cleanup share the member clients and the informers, so
they run together while this process leads ``/leases/member-controllers``; their writes go through
the term's fenced registry. Another replica takes over (rebuilding everything from the store) when
this one stops.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from drods.controllers.cleanup import Cleanup
from drods.controllers.clients import MemberClients
from drods.controllers.failover import Failover
from drods.controllers.health import ClusterHealth
from drods.controllers.propagation import Propagation
from drods.controllers.rescheduler import Rescheduler
from drods.controllers.settings import MemberSettings
from drods.machinery.tasks import run_all
from drods.registry.objects import ObjectRegistry
from drods.store import Store

if TYPE_CHECKING:
    from drods.monitor.service import MonitorService

LEASE = "member-controllers"


class MemberControllers:
    def __init__(self, store: Store, registry: ObjectRegistry, settings: MemberSettings,
                 monitor: MonitorService | None, rescheduler: Rescheduler) -> None:
        self.store = store
        self.registry = registry
        self.settings = settings
        self.monitor = monitor
        self.rescheduler = rescheduler
        self.propagation: Propagation | None = None  # while running (tests and the bench look at it)

    async def run(self) -> None:
        s = self.settings
        clients = MemberClients(self.registry, s.member_options())
        prop = self.propagation = Propagation(self.store, self.registry, s, clients)
        try:
            await run_all(prop.run(), ClusterHealth(prop, s, self.monitor).run(),
                          Failover(prop, s, self.rescheduler).run(), Cleanup(prop, s.cleanupIntervalSeconds).run())
        finally:
            self.propagation = None
            await clients.close()
