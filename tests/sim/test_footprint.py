"""A sim loads only what a member serves: none of the control plane's façade, scheduler, monitor
or numpy (one sim is one process, and benchmarks run dozens of them)."""

from __future__ import annotations

import subprocess
import sys

import pytest

pytestmark = pytest.mark.timeout(60)

# Starts and stops a whole sim (store, controller, app, TLS listener) in a fresh interpreter.
SCRIPT = """
import asyncio, sys, tempfile
from pathlib import Path
from drods.sim.config import NodePool, SimConfig
from drods.sim.server import SimServer

async def main() -> None:
    d = Path(tempfile.mkdtemp())
    sim = SimServer(SimConfig("fp", [NodePool(1, 4.0, 2**33)], state_dir=d, data_dir=d / "data"), fresh=True)
    await sim.start()
    await sim.stop()

asyncio.run(main())
print(" ".join(sorted(m for m in sys.modules if m.partition(".")[0] == "numpy"
                      or m.startswith(("drods.monitor", "drods.scheduler", "drods.api.routes.")))))
"""


def test_a_sim_does_not_load_the_control_plane() -> None:
    done = subprocess.run([sys.executable, "-c", SCRIPT], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["drods.api.routes.access_review", "drods.api.routes.admin",
                                   "drods.api.routes.component_status",
                                   "drods.api.routes.discovery", "drods.api.routes.kubernetes",
                                   "drods.api.routes.openapi_k8s", "drods.api.routes.pod_binding"]
