"""Placement that follows the fleet (S11): which bindings a cluster change affects, and how far
their placement moves.

A cluster that joins, becomes Ready, or changes what selects it (labels, region/zone/provider/city)
or what admits it (taints lifted, capabilities, cost, uncordoned) is a ``FleetChange``. The
scheduler groups its bindings by selection (`records.selection_key`), so a change judges each
distinct selection once against the cluster's facts before and after, and enqueues:

* every binding of a selection that admits the cluster now and did not before (or that admits it
  and the change is about more than selection, e.g. a lifted taint) — while the cluster is Ready;
* the bindings of a selection that admitted it before and no longer does, only those with replicas
  there — as every binding with replicas on a cluster that was removed (``ClusterRemoved``: no facts
  now, so no selection admits it).

The re-decision changes the changed cluster's part of the placement only (``toward``): a Duplicated
binding gains or loses that cluster's copy; a binding divided by water level or available replicas
moves replicas to (or off) it as far as a fresh division would, taken from (given to) the clusters
the fresh division wants fewer (more) on — so a joining cluster attracts its share and nothing else
is reshuffled. Moves onto a cluster happen only when they are at least ``min_move_fraction`` of the
replicas, within a fleet-wide budget of replicas moved per minute (``MoveBudget``).
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Collection, Iterable, Iterator, Sequence
from dataclasses import dataclass, field

from drods.scheduler.selection import ClusterFacts, ClusterSelection

Placement = tuple[tuple[str, int], ...]

# Triggers (the ``trigger.kind`` of a decision record)
CLUSTER_ADDED = "ClusterAdded"
CLUSTER_READY = "ClusterReady"
LABELS_CHANGED = "ClusterLabelsChanged"
TOPOLOGY_CHANGED = "ClusterTopologyChanged"  # region, zone, provider or city
TAINTS_LIFTED = "ClusterTaintsLifted"
CAPABILITIES_CHANGED = "ClusterCapabilitiesChanged"
COST_CHANGED = "ClusterCostChanged"
UNCORDONED = "ClusterUncordoned"
CLUSTER_REMOVED = "ClusterRemoved"

# changes that select the cluster differently; any other kind may admit it anew whatever selects it
_SELECTING = frozenset({LABELS_CHANGED, TOPOLOGY_CHANGED})
# changes that only open the cluster to more: none of them is a reason to take replicas off it
_OPENING = frozenset({CLUSTER_ADDED, CLUSTER_READY, UNCORDONED, TAINTS_LIFTED})


@dataclass(frozen=True, slots=True)
class FleetChange:
    """One cluster's change that can alter placements already decided."""

    cluster: str
    kinds: tuple[str, ...]
    now: ClusterFacts | None  # None: the cluster was removed
    before: ClusterFacts | None  # None: the cluster was not a candidate before (new, or not Ready)
    ready: bool
    # Seen as the scheduler started, not as it happened: when it happened by the cluster's object (0:
    # not known). A binding decided after that already saw it. None: it happens now, news to every one.
    since: float | None = None

    def news_to(self, decided_at: float | None) -> bool:
        """Did a decision made at ``decided_at`` (None: none yet) not see this change?"""
        return self.since is None or decided_at is None or decided_at < self.since

    @property
    def only_opens(self) -> bool:
        """The cluster was only opened to more (joined, Ready, uncordoned, a taint lifted)."""
        return all(k in _OPENING for k in self.kinds)

    @property
    def admits_anew(self) -> bool:
        """More than selection changed: the cluster may now pass filters it failed before."""
        return self.before is None or any(k not in _SELECTING for k in self.kinds)

    @property
    def removed(self) -> bool:
        return self.now is None

    def describe(self) -> str:
        return f"{', '.join(self.kinds)} {self.cluster}"


@dataclass(slots=True)
class _Group:
    selection: ClusterSelection | None  # None: the spec did not parse; it is judged as selecting all
    names: set[str] = field(default_factory=set)

    def selects(self, c: ClusterFacts | None) -> bool:
        if c is None:
            return False
        return self.selection is None or self.selection.selects(c)


class SelectionIndex:
    """Bindings grouped by what they select, so a fleet change costs one judgement per selection."""

    def __init__(self) -> None:
        self._groups: dict[int, _Group] = {}
        self._of: dict[str, int] = {}

    def __len__(self) -> int:
        return len(self._groups)

    def selection(self, name: str) -> ClusterSelection | None:
        key = self._of.get(name)
        g = self._groups.get(key) if key is not None else None
        return g.selection if g is not None else None

    def put(self, name: str, key: int, parse: Callable[[], ClusterSelection | None]) -> None:
        """File ``name`` under ``key``; ``parse`` is called only for a selection not seen yet."""
        old = self._of.get(name)
        if old == key:
            return
        if old is not None:
            self.remove(name)
        g = self._groups.get(key)
        if g is None:
            g = self._groups[key] = _Group(parse())
        g.names.add(name)
        self._of[name] = key

    def remove(self, name: str) -> None:
        key = self._of.pop(name, None)
        if key is None:
            return
        g = self._groups[key]
        g.names.discard(name)
        if not g.names:
            del self._groups[key]

    def concerns(self, changes: Sequence[FleetChange], placed_on: Callable[[str], Iterable[str]]
                 ) -> Iterator[tuple[Collection[str], dict[str, FleetChange]]]:
        """Bindings and the changes among ``changes`` that concern them (module docstring): each selection
        is judged once per change and its bindings are listed once for all the changes that admit a
        cluster to it — when a whole fleet comes back at once, the scheduler goes through its bindings
        once per batch, not once per cluster. The dicts yielded are shared: never changed."""
        for g in self._groups.values():
            joining: dict[str, FleetChange] = {}
            leaving: dict[str, FleetChange] = {}
            for ch in changes:
                now, before = g.selects(ch.now), g.selects(ch.before)
                if before and not now:
                    leaving[ch.cluster] = ch
                    joining.pop(ch.cluster, None)
                elif now and ch.ready and (not before or ch.admits_anew):
                    joining[ch.cluster] = ch
                    leaving.pop(ch.cluster, None)
            if joining:
                yield g.names, joining
            if leaving:
                for n in g.names:
                    there = {c: leaving[c] for c in placed_on(n) if c in leaving}
                    if there:
                        yield (n,), there


def moved(current: Iterable[tuple[str, int]], target: Iterable[tuple[str, int]]) -> int:
    """Replicas that leave a cluster going from ``current`` to ``target``."""
    t = dict(target)
    return sum(max(0, n - t.get(c, 0)) for c, n in current)


def toward(current: Placement, fresh: Placement, cluster: str, limit: int | None = None) -> Placement:
    """``current`` with ``cluster`` brought to its count in ``fresh`` (at most ``limit`` replicas
    moved): what it gains is taken one by one from the cluster most over its count in ``fresh``
    (then the fullest), what it loses goes to the cluster most under it (then the emptiest). The
    total stays; nothing else moves."""
    out = dict(current)
    want = dict(fresh)
    delta = want.get(cluster, 0) - out.get(cluster, 0)
    if limit is not None:
        delta = max(-limit, min(limit, delta))
    others = sorted((set(out) | set(want)) - {cluster})
    if delta < 0 and not any(want.get(c, 0) > 0 for c in others):
        return tuple(sorted(current))  # nowhere to go: the placement stays
    for _ in range(abs(delta)):
        if delta > 0:
            src = max((c for c in others if out.get(c, 0) > 0), default=None,
                      key=lambda c: (out[c] - want.get(c, 0), out[c]))
            if src is None:
                break
            out[src] -= 1
            out[cluster] = out.get(cluster, 0) + 1
        else:
            dst = max((c for c in others if want.get(c, 0) > 0),
                      key=lambda c: (want[c] - out.get(c, 0), -out.get(c, 0)))
            out[dst] = out.get(dst, 0) + 1
            out[cluster] -= 1
    return tuple(sorted((c, n) for c, n in out.items() if n > 0))


def worth_moving(replicas: int, moves: int, min_fraction: float) -> bool:
    """A move onto a cluster is made when it shifts at least ``min_fraction`` of the replicas (and
    at least one)."""
    return moves >= max(1, math.ceil(min_fraction * replicas - 1e-9))


class MoveBudget:
    """Replicas that fleet-change re-decisions may move per minute, fleet-wide (a token bucket);
    removals from a cluster that no longer admits the binding are not counted."""

    def __init__(self, per_minute: int, clock: Callable[[], float] = time.monotonic) -> None:
        self.per_minute = per_minute
        self.clock = clock
        self._tokens = float(per_minute)
        self._at = clock()

    def take(self, n: int) -> int:
        """Up to ``n`` moves granted now."""
        now = self.clock()
        self._tokens = min(float(self.per_minute), self._tokens + (now - self._at) * self.per_minute / 60.0)
        self._at = now
        granted = max(0, min(n, int(self._tokens)))  # none while in debt (`take_whole`)
        self._tokens -= granted
        return granted

    def give_back(self, n: int) -> None:
        self._tokens = min(float(self.per_minute), self._tokens + n)

    def take_whole(self, n: int) -> bool:
        """All ``n`` moves at once, or none: a move that cannot be split (a workload following its
        users) and is larger than a whole minute's budget goes when the bucket is full and leaves it
        in debt, so it waits minutes rather than for ever and the long-run rate stays ``per_minute``."""
        now = self.clock()
        self._tokens = min(float(self.per_minute), self._tokens + (now - self._at) * self.per_minute / 60.0)
        self._at = now
        if self.per_minute <= 0 or self._tokens < min(n, self.per_minute) - 1e-9:
            return False
        self._tokens -= n
        return True
