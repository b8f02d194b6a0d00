"""The simulator's peak-shaving pass: the descheduler's pass (`drods.monitor.shaving`), each plan
gated by `drods.monitor.autoops.execute` (policy, cooldown, somewhere to go) and paced by the
scheduler's `MoveBudget`, as the product runs it (`drods.controllers.descheduler`).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Iterable
from typing import Any, Protocol

import numpy as np

from drods.model.reschedule import RescheduleRequest, RescheduleResult
from drods.monitor.autoops import AutoOps, execute
from drods.monitor.shaving import ShavingPass
from drods.scheduler.arrays import BoolArr, FloatArr
from drods.scheduler.peakshave import Capacity, Holding, Shave
from drods.schedulerd.fleet import MoveBudget

Apply = Callable[[str, dict[int, int]], None]
Record = Callable[..., Awaitable[Any]]


class Placed(Protocol):
    """What the pass needs of a simulated workload."""

    name: str
    placement: dict[int, int]
    cpu: float
    memory: float
    origin: int  # its users' region


class PeakShavePass:
    """One policy run's peak shaving: the damping watch and the pass per tick."""

    def __init__(self, ops: AutoOps, names: list[str], cpu: FloatArr, memory: FloatArr, latency: FloatArr,
                 slo_ms: float | None, *, knows_users: bool) -> None:
        self.ops = ops
        self.names = names
        self.fleet = Capacity(cpu, memory)
        # ms from each users' region to every cluster: one array per region, shared by its workloads
        self.latency = [np.ascontiguousarray(latency[:, r]) for r in range(latency.shape[1])]
        self.slo_ms = slo_ms
        self.knows_users = knows_users
        self.shaving = ShavingPass.of(ops.policy)
        self._all = np.ones(len(names), dtype=bool)

    def holdings(self, workloads: Iterable[Placed]) -> list[Holding]:
        """Every placed workload (the simulator's are all divided by water level and select every cluster);
        its users' latencies whenever the policy knows its users, with or without a latency SLO."""
        return [Holding(w.name, dict(w.placement), w.cpu, w.memory, self._all,
                        self.latency[w.origin] if self.knows_users else None, self.slo_ms)
                for w in workloads if w.placement]

    def run(self, loop: asyncio.AbstractEventLoop, now_s: float, levels: FloatArr, limits: FloatArr,
            open_: BoolArr, workloads: Iterable[Placed], budget: MoveBudget, apply: Apply, record: Record) -> int:
        """Shave each cluster hot for the damping window, hottest first, then return replicas near their
        users where there is room; returns the replicas moved."""
        done = self.shaving.run(self.names, levels.astype(float), limits, open_, self.fleet, self.holdings(workloads),
                                now_s, lambda plan: self._execute(loop, plan, now_s, open_, apply, record), budget)
        return sum(plan.replicas for plan in done)

    def _execute(self, loop: asyncio.AbstractEventLoop, plan: Shave, now_s: float, open_: BoolArr,
                 apply: Apply, record: Record) -> bool:
        name = self.names[plan.cluster]
        reason = plan.reason(name)

        async def hook(req: RescheduleRequest) -> RescheduleResult:
            for workload, placement in plan.placements.items():
                apply(workload, placement)
            return RescheduleResult(True, plan.replicas, reason, tuple(sorted(plan.placements)))

        outcome, _ = loop.run_until_complete(execute(
            self.ops, "peakshave", name, reason, now_s, candidates=int(open_.sum()) - 1,
            details=plan.as_json(self.names), hook=hook, record=record))
        return outcome == "executed"
