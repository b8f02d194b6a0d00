"""The pull-mode agent's Works task: the Work agent (`drods.members.works`) and, when asked, local
autonomy beside it (`drods.members.autonomy`), which drives the Work agent's local replica counts.

A module of its own because it starts both: the Work agent knows nothing of autonomy.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import httpx

from drods.members.autonomy import AutonomyAgent, AutonomySettings
from drods.members.client import MemberClient
from drods.members.works import WorkAgent
from drods.transport import async_transport


async def run_works(cluster: str, member: MemberClient, server: str, token: str, state_dir: Path, *,
                    verify: Any = True, stop: asyncio.Event | None = None, resync: float = 3.0,
                    autonomy: AutonomySettings | None = None, usage_interval: float = 15.0) -> None:
    """Follow, apply and report this cluster's Works until ``stop``; with ``autonomy``, also scale
    alone while cut off (`drods.members.autonomy`)."""
    stop = stop or asyncio.Event()
    async with httpx.AsyncClient(base_url=server.rstrip("/"), headers={"Authorization": f"Bearer {token}"},
                                 params={"cluster": cluster}, transport=async_transport(verify), timeout=10) as http:
        agent = WorkAgent(cluster, member, http, state_dir, resync=resync, usage_interval=usage_interval)
        runs = [agent.run(stop)]
        if autonomy is not None:
            local = AutonomyAgent(cluster, member, http, agent, state_dir, autonomy)
            local.load()  # before the Works apply: a restarted agent keeps its local counts
            runs.append(local.run(stop))
        tasks = [asyncio.create_task(r) for r in runs]
        try:
            done, _ = await asyncio.wait(tasks, return_when=asyncio.FIRST_EXCEPTION)
            for t in done:
                t.result()  # a refused token ends the agent
        finally:
            for t in tasks:
                t.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
