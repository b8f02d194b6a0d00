"""``drods agent --from DIR``: a member's agent that ends (a refused token) is logged when it ends, while
the others keep running — it was logged only once every member's had ended, i.e. at the process's exit."""

from __future__ import annotations

import asyncio
import logging
import signal
from pathlib import Path
from typing import Any

import drods.members.agent as agent
import drods.members.pull as pull
from drods.cli.agents import AgentMember, AgentRun, follow
from drods.members.agent import AgentRefused
from tests.members.waiting import wait_until


class _Records(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.messages: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.messages.append(record.getMessage())


async def test_a_member_agent_that_ends_is_logged_while_the_others_run(tmp_path: Path, monkeypatch: Any) -> None:
    async def run_agent(cluster: str, member: Any, server: str, token: str, *, stop: asyncio.Event,
                        **kwargs: Any) -> None:
        if token == "revoked":
            raise AgentRefused(f"{server} refused the token for cluster {cluster}: HTTP 401 token revoked")
        await stop.wait()

    async def run_works(cluster: str, member: Any, server: str, token: str, state_dir: Path, *,
                        stop: asyncio.Event, **kwargs: Any) -> None:
        await stop.wait()

    monkeypatch.setattr(agent, "run_agent", run_agent)
    monkeypatch.setattr(pull, "run_works", run_works)
    records = _Records()
    logger = logging.getLogger("drods.agent")
    logger.addHandler(records)
    level = logger.level
    logger.setLevel(logging.INFO)
    members = [AgentMember("m1", None, "revoked", tmp_path / "m1"), AgentMember("m2", None, "good", tmp_path / "m2")]
    previous = {sig: signal.getsignal(sig) for sig in (signal.SIGTERM, signal.SIGINT)}
    running = asyncio.create_task(follow(members, AgentRun("https://cp:8080", 15.0, True, None)))
    try:
        await wait_until(lambda: any("m1" in m for m in records.messages) or running.done(), 5.0,
                         "m1's end logged")
        assert not running.done(), "the run ended with m1's agent"
        assert records.messages == ["agent for m1 stopped: https://cp:8080 refused the token for cluster m1: "
                                    "HTTP 401 token revoked"]
        signal.raise_signal(signal.SIGTERM)  # as at the process's stop: m2's agent ends, the run with it
        await asyncio.wait_for(running, 5.0)
        assert len(records.messages) == 1
    finally:
        if not running.done():
            running.cancel()
        logger.removeHandler(records)
        logger.setLevel(level)
        loop = asyncio.get_running_loop()
        for sig, handler in previous.items():  # follow's handlers off this loop: the worker's back
            loop.remove_signal_handler(sig)
            signal.signal(sig, handler)
