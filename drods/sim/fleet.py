"""`drods sim fleet`: many simulated member clusters served from one process.

Each member is a whole `drods.sim.server.SimServer` — its own store, API endpoint, TLS CA, admin
token, kubeconfig (``DIR/NAME/kubeconfig``), controller and fault control port (its state file is
``DIR/NAME.json``, so ``drods sim fault NAME down --state-dir DIR`` reaches one member) — so a
member of a fleet behaves exactly as a ``drods sim``. What they share is the interpreter and the
event loop: a hundred members cost one Python process, not a hundred.

Members are named and placed like ``drods dev up``'s (`drods.sim.sites`). ``DIR/fleet.yaml`` lists
them (name, server, kubeconfig, topology); it is written once every member serves (its presence
means "ready", as a sim's state file does) and removed at a clean stop. ``drods cluster join --from
DIR`` reads it.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import yaml
from prometheus_client import CollectorRegistry

from drods.machinery.memory import HeapReturn, tune_allocator, tune_gc
from drods.machinery.tasks import each_bounded
from drods.sim.config import SimConfig
from drods.sim.server import SimServer
from drods.sim.sites import site
from drods.sim.stop_signals import ignore_stop_signals, on_stop_signal

log = logging.getLogger("drods.sim.fleet")

# YAML, not JSON: STATE_DIR/*.json are the members' state files (`drods sim list` reads them all).
MANIFEST = "fleet.yaml"
# Members started at once: each start writes its nodes and makes a CA; more at once only queue on the CPU.
START_CONCURRENCY = 8


@dataclass(frozen=True)
class FleetConfig:
    """N members shaped like ``template`` (its name, topology and directories are set per member)."""

    clusters: int
    out: Path
    template: SimConfig
    prefix: str = ""
    base_port: int = 0  # member i serves on base_port + i (0: any free port, kept over restarts)

    def __post_init__(self) -> None:
        if self.clusters < 1:
            raise ValueError("--clusters must be at least 1")
        if self.base_port and not 1024 <= self.base_port <= 65536 - self.clusters:
            raise ValueError(f"--base-port must leave room for {self.clusters} ports: 1024..{65536 - self.clusters}")

    def member(self, i: int) -> SimConfig:
        where = site(i)
        name = f"{self.prefix}-{where.name}" if self.prefix else where.name
        return replace(self.template, name=name, region=where.region, zone=where.zone, provider=where.provider,
                       city=where.city, port=self.base_port + i if self.base_port else 0,
                       data_dir=self.out / name, state_dir=self.out, kubeconfig_out=self.out / name / "kubeconfig")


def manifest_entry(sim: SimServer) -> dict[str, Any]:
    cfg = sim.cfg
    return {"name": cfg.name, "server": sim.server_url, "kubeconfig": str(sim.kubeconfig_path),
            "region": cfg.region, "zone": cfg.zone, "provider": cfg.provider, "city": cfg.city,
            "nodes": cfg.node_count}


class Fleet:
    """Starts, lists and stops the members; one that fails to start stops the whole fleet."""

    def __init__(self, cfg: FleetConfig, *, fresh: bool = False) -> None:
        self.cfg = cfg
        self.members = [SimServer(cfg.member(i), fresh=fresh) for i in range(cfg.clusters)]

    @property
    def manifest_path(self) -> Path:
        return self.cfg.out / MANIFEST

    async def start(self) -> None:
        self.cfg.out.mkdir(parents=True, exist_ok=True)
        with contextlib.suppress(FileNotFoundError):
            self.manifest_path.unlink()  # a stale one (a killed fleet) must not read as "ready"
        await each_bounded(self.members, SimServer.start, START_CONCURRENCY)
        tmp = self.manifest_path.with_suffix(".tmp")
        tmp.write_text(yaml.safe_dump({"apiVersion": "sim.drods.io/v1alpha1", "kind": "Fleet", "pid": os.getpid(),
                                       "members": [manifest_entry(s) for s in self.members]}, sort_keys=False))
        os.replace(tmp, self.manifest_path)

    async def stop(self) -> None:
        with contextlib.suppress(FileNotFoundError):
            self.manifest_path.unlink()
        # every member, started or not: stopping one that never started is a no-op
        await asyncio.gather(*(s.stop() for s in self.members), return_exceptions=True)


async def serve_fleet(cfg: FleetConfig, *, fresh: bool = False, ready: asyncio.Event | None = None) -> None:
    """Serve the fleet until SIGTERM/SIGINT, then stop every member cleanly."""
    fleet = Fleet(cfg, fresh=fresh)
    loop = asyncio.get_running_loop()
    stop = on_stop_signal(loop)
    # before the members' store threads exist (set after them, each of ~250 threads could still make
    # an allocator arena of its own: 18 arenas at 10,000 workloads); with the heap trimmed every 30 s
    # the cold start's peak went 650.6 → 623.4 MiB (`bench/scale.py`, 100 members, 10,000 workloads)
    tune_allocator()
    heap = asyncio.create_task(HeapReturn(CollectorRegistry()).run())
    try:
        starting = asyncio.create_task(fleet.start())
        stopping = asyncio.create_task(stop.wait())
        await asyncio.wait({starting, stopping}, return_when=asyncio.FIRST_COMPLETED)
        if not starting.done():  # stopped while starting: what started is stopped below
            starting.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await starting
        else:
            starting.result()  # a member that could not start ends the fleet with its error
            # a hundred members' state, frozen out of collections: a full collection over it paused
            # every member at once for ~0.6 s every ~25 s under load
            tune_gc()
            log.warning("fleet of %d members serving; manifest %s", len(fleet.members), fleet.manifest_path)
            if ready is not None:
                ready.set()
            await stopping
    finally:
        heap.cancel()
        try:
            await fleet.stop()
        finally:
            ignore_stop_signals()
