"""The components ``drods serve`` runs next to the API server; each is an async function of the context."""

from __future__ import annotations

from drods.controllers.compactor import compactor
from drods.controllers.manager import member_components
from drods.monitor.components import monitor_components
from drods.scheduler.service import scheduler_component
from drods.server import Component


def all_components() -> list[Component]:
    return [compactor, *monitor_components(), scheduler_component, *member_components()]
