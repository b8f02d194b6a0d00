"""One peak-shaving pass in order, shared by the descheduler (`drods.controllers.peak_shave`) and the
what-if simulator (`drods.whatif.shaving`) so that both decide alike.

Each cluster hot for the damping window is shaved (`drods.scheduler.peakshave.shave`), hottest first;
one standing ``peakshaveSevereMargin`` or more above the level its replicas could reach (`Hot.excess`)
is shaved after the shorter ``peakshaveSevereAfterSeconds``, as an alert's severity shortens its ``for``:
that far above, the level is no passing noise, and the fleet's peak is there.
A Binding that a plan of the pass moved is left out of its later plans, because a Binding carries one
plan's moves. Then replicas go back near their users where there is room (`returns`), except those
just shaved. Receivers keep ``peakshaveHeadroom`` under their limits. Carrying a plan out is the
caller's `Commit` (the product records it and asks the scheduler; the simulator applies it).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import Protocol

from drods.monitor.autoops import AutoOpsPolicy
from drods.scheduler.arrays import BoolArr, FloatArr
from drods.scheduler.peakshave import EPS, Capacity, Holding, PeakWatch, Shave, hot_clusters, returns, shave

# Replicas a pass without a budget returns near their users at most: more than a minute of the
# default move budget (600), so the scheduler's budget paces them, not this; planning more against
# levels the next pass will have measured anew only holds the event loop (~1 s for 28,000 moves at
# 1,000 clusters)
RETURNS_PER_PASS = 1000
UNPACED = 10**6  # a shave's moves when the scheduler's move budget paces them after the decision

Commit = Callable[[Shave], bool]  # carry a plan out; False: it was not (its moves did not happen)


class Pacing(Protocol):
    """A move budget taken before planning (the simulator's `MoveBudget`)."""

    per_minute: int

    def take(self, n: int) -> int: ...

    def give_back(self, n: int) -> None: ...


@dataclass(slots=True)
class ShavingPass:
    """The damping watches a pass reads and restarts, and the pass itself."""

    policy: AutoOpsPolicy
    watch: PeakWatch  # clusters hot in a row
    room: PeakWatch  # clusters with room for returns in a row
    severe: PeakWatch  # clusters far above what their replicas could reach, in a row

    @classmethod
    def of(cls, policy: AutoOpsPolicy) -> ShavingPass:
        return cls(policy, PeakWatch(policy.peakshaveAfterSeconds), PeakWatch(policy.peakshaveAfterSeconds),
                   PeakWatch(min(policy.peakshaveSevereAfterSeconds, policy.peakshaveAfterSeconds)))

    def run(self, names: Sequence[str], levels: FloatArr, limits: FloatArr, open_: BoolArr, fleet: Capacity,
            holdings: Sequence[Holding], now: float, commit: Commit, budget: Pacing | None = None) -> list[Shave]:
        """The plans ``commit`` carried out; ``levels`` and the holdings' placements follow them.
        Without a ``budget`` a plan is not paced here (the scheduler's move budget paces its moves)."""
        p = self.policy
        hot = hot_clusters(levels, fleet.cpu, open_, holdings, p.peakshaveMargin)
        due = set(self.watch.observe({names[c] for c in hot}, now))
        # far above what its replicas could reach is no passing noise: due after the shorter window
        severe = set() if p.peakshaveSevereMargin is None else set(self.severe.observe(
            {names[c] for c, h in hot.items() if h.excess(float(levels[c])) >= p.peakshaveSevereMargin - EPS},
            now)) - due
        index = {n: i for i, n in enumerate(names)}
        done: list[Shave] = []
        shaved: set[str] = set()
        for c in sorted((index[n] for n in due | severe), key=lambda c: (-float(levels[c]), c)):
            granted = budget.take(budget.per_minute) if budget is not None else UNPACED
            kept = levels.copy()
            plan = shave(c, hot[c], levels, limits, open_, fleet, holdings, min_gain=p.peakshaveMinGain,
                         budget=granted, headroom=p.peakshaveHeadroom, leave=shaved)
            if budget is not None:
                budget.give_back(granted - (plan.replicas if plan is not None else 0))
            if plan is None:
                continue
            plan = replace(plan, hot_since=self.watch.hot_since.get(names[c]), severe=names[c] in severe)
            self.watch.shaved(names[c], now)
            self.severe.shaved(names[c], now)
            if not commit(plan):
                levels[:] = kept
                if budget is not None:
                    budget.give_back(plan.replicas)
                continue
            done.append(plan)
            shaved.update(plan.placements)
            for h in holdings:
                if h.name in plan.placements:
                    h.placement = dict(plan.placements[h.name])
        if p.peakshaveReturn:
            granted = budget.take(budget.per_minute) if budget is not None else RETURNS_PER_PASS
            returned = 0
            for plan in returns(self.room, names, levels, limits, open_, fleet, holdings, leave=shaved,
                                margin=p.peakshaveMargin, min_gain_ms=p.peakshaveReturnMinGainMs, budget=granted,
                                now=now, headroom=p.peakshaveHeadroom):
                if commit(plan):
                    done.append(plan)
                    returned += plan.replicas
            if budget is not None:
                budget.give_back(granted - returned)
        return done
