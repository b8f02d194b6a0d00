"""The member-cluster controllers as one ``drods serve`` component, behind one leader election (A6).

Propagation, status, health, failover and cleanup share the member clients and the informers, so
they run together while this process holds ``/leases/member-controllers``; another replica takes
over (rebuilding everything from the store) when this one stops. While leading, the running
`Propagation` is ``ctx.services["propagation"]`` (for tests and the bench).
"""

from __future__ import annotations

import os
import socket
import uuid
from collections.abc import Awaitable, Callable
from typing import Any

from drods.controllers.cleanup import Cleanup
from drods.controllers.clients import MemberClients
from drods.controllers.failover import Failover
from drods.controllers.health import ClusterHealth
from drods.controllers.propagation import Propagation
from drods.controllers.settings import get_settings
from drods.controllers.tasks import run_all
from drods.machinery.leader import LeaderElector

LEASE = "member-controllers"


async def run_controllers(ctx: Any) -> None:
    """Everything, in this process, without an election (tests, single-process tools)."""
    settings = get_settings(ctx)
    clients = MemberClients(ctx.registry, settings.member_options())
    prop = Propagation(ctx.store, ctx.registry, settings, clients)
    ctx.services["propagation"] = prop
    try:
        await run_all(prop.run(), ClusterHealth(ctx, prop, settings).run(), Failover(ctx, prop, settings).run(),
                      Cleanup(prop, settings.cleanupIntervalSeconds).run())
    finally:
        if ctx.services.get("propagation") is prop:
            ctx.services.pop("propagation", None)
        await clients.close()


async def member_controllers(ctx: Any) -> None:
    """The ``drods serve`` component."""
    identity = f"{socket.gethostname()}-{os.getpid()}-{uuid.uuid4().hex[:6]}"
    await LeaderElector(ctx.store, LEASE, identity).run(lambda: run_controllers(ctx))


def member_components() -> list[Callable[[Any], Awaitable[None]]]:
    return [member_controllers]
