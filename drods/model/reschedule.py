"""Asking for a re-placement: what automatic operations, failover and drain send, and what comes back.

The request is handled by `drods.controllers.rescheduler.Rescheduler`, which records it on the
Bindings (``spec.rescheduleTriggeredAt`` plus a reason) for whichever scheduler leads.
"""

from __future__ import annotations

from collections.abc import Awaitable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

Action = Literal["evacuate", "preallocate", "restore", "offer", "rebalance", "failback", "peakshave"]


@dataclass(frozen=True, slots=True)
class RescheduleRequest:
    """What automatic operations ask for."""

    action: Action
    cluster: str
    reason: str
    fraction: float  # evacuate: share of the cluster's replicas to move; preallocate: headroom to create
    # (offer: ``details["binding"]`` names the binding offered ``cluster``; fraction is unused;
    # rebalance: ``details["binding"]`` names the binding to re-place nearer its traffic peers, ``cluster``
    # is where the descheduler's verdict would put most of it)
    min_availability: float  # graceful: new replicas up before old ones go, never below this share
    details: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class RescheduleResult:
    accepted: bool
    moved: int = 0  # replicas moved or pre-placed
    message: str = ""
    bindings: tuple[str, ...] = ()  # the bindings asked to move
    plans: tuple[str, ...] = ()  # MigrationPlans started instead ("namespace/name"; F3 drain, evacuation)
    # F3: bindings left where they are, each with why ("binding: reason") — data that would not move with them
    refused: tuple[str, ...] = ()
    # X1: what an evacuation weighed — (binding, replicas on the cluster), most replicas first, at most
    # `CONSIDERED_TOP_K` beyond those moved — and how many more it left unnamed
    considered: tuple[tuple[str, int], ...] = ()
    omitted: int = 0
    # replicas of the bindings offered a cluster back (restore, fail-back, a traffic rebalance): the
    # scheduler decides how many of them go, so none is counted as moved here
    offered: int = 0
    # a dry run's bindings asked to move, as it read them: the drain forecast decides on these
    as_read: tuple[Mapping[str, Any], ...] = ()


class RescheduleHook(Protocol):
    def __call__(self, request: RescheduleRequest, /) -> Awaitable[RescheduleResult]: ...


CONSIDERED_TOP_K = 10


Weighed = tuple[tuple[str, int], ...]


def considered(on_cluster: list[tuple[int, str]], chosen: list[tuple[int, str]]) -> tuple[Weighed, int]:
    """The bindings an evacuation names in its decision record: the chosen ones and the next
    `CONSIDERED_TOP_K` by replicas; the count of the rest."""
    ranked = sorted(on_cluster, key=lambda x: (-x[0], x[1]))
    keep = ranked[:len(chosen) + CONSIDERED_TOP_K]
    return tuple((name, n) for n, name in keep), len(ranked) - len(keep)


def choose_evacuation(on_cluster: list[tuple[int, str]], fraction: float) -> list[tuple[int, str]]:
    """Which bindings an evacuation moves: ``(replicas there, name)`` pairs, most replicas first
    (then by name), until ``fraction`` of the cluster's replicas (at least one) are covered.
    Pure, so the what-if simulator runs the same choice."""
    goal = max(1.0, fraction * sum(n for n, _ in on_cluster))
    out: list[tuple[int, str]] = []
    moved = 0
    for n, name in sorted(on_cluster, key=lambda x: (-x[0], x[1])):
        if moved >= goal:
            break
        out.append((n, name))
        moved += n
    return out


@dataclass(frozen=True, slots=True)
class DataMove:
    """How one binding leaves a cluster (F3): plainly (the default), by a MigrationPlan carrying
    ``data`` for ``workload`` (kind, namespace, name; ``plan`` once started), not at all (``refused``:
    why, ``workload`` naming what stays), or not now (``moving``: a plan moves it already)."""

    workload: tuple[str, str, str] | None = None
    data: Mapping[str, Any] | Literal["None"] | None = None
    freeze_seconds: float = 0.0  # the plan's write freeze (the default mover's final sync)
    plan: str = ""
    refused: str = ""
    moving: bool = False

    @property
    def plain(self) -> bool:
        return self.workload is None and not self.moving
