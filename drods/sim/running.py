"""A running simulated member as its metrics routes and Prometheus collector read it.

`drods.sim.server.SimServer` is one; it also builds those routes and that collector, so they name
this Protocol instead of the server.
"""

from __future__ import annotations

from typing import Protocol

from drods.sim.config import SimConfig
from drods.sim.controller import SimController
from drods.sim.faults import FaultState
from drods.sim.traffic import TrafficMeter
from drods.sim.usage import LoadTable


class RunningSim(Protocol):
    cfg: SimConfig
    controller: SimController
    fault: FaultState
    loads: LoadTable
    traffic_demand: LoadTable  # Mbps per workload (`drods sim traffic`), shared by its running pods
    traffic: TrafficMeter
    started_at: float
