"""How fast failover hands bindings to the scheduler (Karmada's eviction queue, Kubernetes' node eviction
rates): at ``members.evictionRate`` bindings a second (none: as fast as their tolerations run out) while the
fleet is healthy; when more than ``unhealthyClusterThreshold`` of its clusters are NotReady, at
``secondaryEvictionRate`` on a fleet of more than ``largeClusterNumThreshold`` clusters and not at all on a
smaller one. Most of a fleet failing at once is more likely the control plane's own trouble (its network, a
partition) than theirs, and the few clusters left could not take everyone's replicas: a slow pace limits
what a wrong call moves. A cluster counts as unhealthy once found NotReady (its Ready condition False), not
while it is still joining (Unknown): such a cluster holds nothing to move.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from drods.controllers.settings import MemberSettings

Pace = Literal["full", "limited", "slowed", "halted"]


@dataclass
class EvictionPace:
    """A token bucket whose rate follows the fleet's health (burst: one second's worth, at least one)."""

    settings: MemberSettings
    tokens: float = 0.0
    at: float | None = None  # when the bucket was last filled (None: not limited since)

    def rate(self, not_ready: int, clusters: int) -> tuple[Pace, float | None]:
        """The pace and the bindings a second failover may hand on now (None: no limit)."""
        s = self.settings
        if clusters and not_ready / clusters > s.unhealthyClusterThreshold:
            if clusters > s.largeClusterNumThreshold and s.secondaryEvictionRate > 0:
                return "slowed", s.secondaryEvictionRate
            return "halted", 0.0
        return ("full", None) if s.evictionRate is None else ("limited", s.evictionRate)

    def take(self, wanted: int, rate: float | None, now: float) -> int:
        """How many of ``wanted`` evictions may go now."""
        if rate is None:
            self.at = None
            return wanted
        if rate <= 0:
            self.tokens, self.at = 0.0, now
            return 0
        burst = max(1.0, rate)
        self.tokens = burst if self.at is None else min(burst, self.tokens + max(0.0, now - self.at) * rate)
        self.at = now
        n = min(wanted, int(self.tokens))
        self.tokens -= n
        return n

    def give_back(self, n: int) -> None:
        """Tokens taken for evictions that were no longer due."""
        self.tokens += n
