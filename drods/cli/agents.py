"""The pull-mode agents of one or many members in one process: each member's status reports
(`drods.members.agent`) and Works (`drods.members.pull`) followed side by side until SIGTERM/SIGINT.

``drods agent --cluster C --kubeconfig F`` runs one; ``drods agent --from DIR`` runs every member of
``DIR/agents.yaml`` (written by ``drods cluster join --from DIR --pull``), each with its own token,
member client and desired-state cache (``STATE_DIR/CLUSTER``). A member whose token is refused stops
its own agent only; the others keep going.
"""

from __future__ import annotations

import asyncio
import logging
import signal
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

log = logging.getLogger("drods.agent")


@dataclass(frozen=True)
class AgentMember:
    cluster: str
    member: Any  # a drods.members.client.MemberClient
    token: str
    directory: Path  # its desired-state cache


@dataclass(frozen=True)
class AgentRun:
    server: str
    interval: float
    verify: Any
    autonomy: Any  # AutonomySettings | None
    usage_interval: float = 15.0  # seconds between readings of the workloads' use
    probe: Any = None  # a drods.members.agent_probe.ProbePlan: network targets measured from each member


def read_agents_file(path: Path) -> tuple[str, list[dict[str, str]]]:
    """(server, [{cluster, kubeconfig, token}]) from ``agents.yaml``; ValueError when it is not one."""
    try:
        doc = yaml.safe_load(path.read_text())
        agents = [{"cluster": str(a["cluster"]), "kubeconfig": str(a["kubeconfig"]), "token": str(a["token"])}
                  for a in doc["agents"]]
        return str(doc.get("server") or ""), agents
    except (OSError, yaml.YAMLError, KeyError, TypeError) as e:
        raise ValueError(f"cannot read {path}: {e} (made by `drods cluster join --from DIR --pull`)") from e


async def follow(members: list[AgentMember], run: AgentRun) -> None:
    """Report and follow Works for every member until SIGTERM/SIGINT; with one member, a refused
    token ends the run (raised), with many it ends that member's agent (logged)."""
    from drods.members.agent import run_agent
    from drods.members.pull import run_works

    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)

    async def one(m: AgentMember) -> None:
        own = asyncio.Event()  # this member's agent stops on a refused token, or with everyone
        both = [asyncio.create_task(run_agent(m.cluster, m.member, run.server, m.token, interval=run.interval,
                                              verify=run.verify, stop=own)),
                asyncio.create_task(run_works(m.cluster, m.member, run.server, m.token, m.directory,
                                              verify=run.verify, stop=own, autonomy=run.autonomy,
                                              usage_interval=run.usage_interval))]
        if run.probe is not None and (run.probe.targets or run.probe.discover):
            both.append(asyncio.create_task(_probe(m, run, own)))
        relay = asyncio.create_task(_relay(stop, own))
        try:
            for t in asyncio.as_completed(both):
                await t
        finally:
            own.set()
            relay.cancel()
            await asyncio.gather(*both, return_exceptions=True)

    async def logged(m: AgentMember) -> None:
        """``one``, its end logged when it comes: the others may run for days yet."""
        try:
            await one(m)
        except Exception as e:  # one member's end, whatever it is, is not the others'
            log.error("agent for %s stopped: %s", m.cluster, e)

    if len(members) == 1:
        await one(members[0])
        return
    await asyncio.gather(*(logged(m) for m in members))


async def _relay(stop: asyncio.Event, own: asyncio.Event) -> None:
    await stop.wait()
    own.set()


async def _probe(m: AgentMember, run: AgentRun, stop: asyncio.Event) -> None:
    """Measure the network from this member's site to its probe targets, as the pairs TARGET → member."""
    import httpx

    from drods.members.agent_probe import run_probes
    from drods.transport import async_transport

    async with httpx.AsyncClient(base_url=run.server.rstrip("/"), transport=async_transport(run.verify),
                                 timeout=10, headers={"Authorization": f"Bearer {m.token}"}) as http:
        await run_probes(http, m.cluster, run.probe, stop)
