"""The scheduler's memory of fleet changes (S11): bindings by what they select, the changes each
queued binding waits for, the move budget — and the placement a fresh decision leads to.

`fleet` holds the pure rules (which bindings a change affects, ``toward``, the budget); this module
applies them to the scheduler's records. The service keeps the queue: it asks ``affected`` on a
change, queues those bindings, and on their turn hands ``refit`` a fresh decision (divided without
the binding's own assumed load).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

from pydantic import ValidationError

from drods.model.annotations import moved_away_from, placement_offers
from drods.model.binding import BindingSpec, placeable
from drods.model.placement import Placement as PlacementSpec
from drods.scheduler.framework import ScheduleResult
from drods.scheduler.selection import ClusterSelection
from drods.schedulerd.fleet import FleetChange, MoveBudget, SelectionIndex, moved, toward, worth_moving
from drods.schedulerd.records import BindingRecord, Placement


@dataclass(frozen=True, slots=True)
class Refit:
    """What a fleet-change decision comes to; ``result`` None: nothing to write."""

    result: ScheduleResult | None = None
    trigger: dict[str, Any] | None = None
    moved: int = 0  # replicas moved (Duplicated: copies added or removed)
    deferred: bool = False  # some changes wait for the move budget


def selection_of(rec: BindingRecord) -> ClusterSelection | None:
    """What the binding selects (None: its spec does not parse; judged as selecting every cluster)."""
    try:
        obj = rec.object()
        return ClusterSelection.of(placeable(BindingSpec.model_validate(obj.get("spec") or {}),
                                              placement_offers(obj)))
    except (ValidationError, ValueError):
        return None


class FleetFollower:
    def __init__(self, *, rebalance: bool, min_move_fraction: float, max_moves_per_minute: int,
                 clock: Callable[[], float] = time.time) -> None:
        self.rebalance = rebalance
        self.min_move_fraction = min_move_fraction
        self.selections = SelectionIndex()
        self.moves = MoveBudget(max_moves_per_minute, clock)
        self._pending: dict[str, dict[str, FleetChange]] = {}

    # ------------------------------------------------------------------ bookkeeping
    def index(self, rec: BindingRecord) -> None:
        self.selections.put(rec.name, rec.selection, lambda: selection_of(rec))

    def forget(self, name: str) -> None:
        self.selections.remove(name)
        self._pending.pop(name, None)

    def waiting(self, name: str) -> bool:
        """A fleet change waits for this binding's next decision."""
        return name in self._pending

    def drop(self, name: str) -> None:
        """A full decision (a retry) places the binding wherever it fits now: nothing left to follow."""
        self._pending.pop(name, None)

    def affected(self, change: FleetChange, record: Callable[[str], BindingRecord | None]) -> list[BindingRecord]:
        """The bindings to re-decide for ``change`` (``fleet.SelectionIndex.affected``), noted as
        waiting for it."""

        def placed_there(name: str) -> bool:
            rec = record(name)
            return rec is not None and any(c == change.cluster for c, _ in rec.placement)

        out: list[BindingRecord] = []
        for name in self.selections.affected(change, placed_there):
            rec = record(name)
            if rec is None or rec.deleting:
                continue
            self._pending.setdefault(name, {})[change.cluster] = change
            out.append(rec)
        return out

    # ------------------------------------------------------------------ deciding
    def refit(self, rec: BindingRecord, spec: BindingSpec, fresh: ScheduleResult) -> Refit:
        """The binding's placement after the changes it waits for: of ``fresh`` (a decision from
        scratch) only the changed clusters' parts are taken."""
        changes = self._pending.pop(rec.name, {})
        current = tuple(sorted(rec.placement))
        if fresh.phase != "Scheduled" or (not rec.duplicated and fresh.placed < sum(n for _, n in current)):
            return Refit()  # never fewer replicas for a fleet change; parked retries place the rest
        pl = spec.placement
        rs = pl.replicaScheduling
        static = not rec.duplicated and rs is not None and rs.weightPreference is not None and \
            bool(rs.weightPreference.staticWeightList)
        target, deferred = (fresh.pairs, {}) if static else self._follow(rec, pl, current, fresh.pairs, changes)
        if deferred:
            self._pending.setdefault(rec.name, {}).update(deferred)
        if target == current:
            return Refit(deferred=bool(deferred))
        before, after = dict(current), dict(target)
        moves = [{"cluster": c, "from": before.get(c, 0), "to": after.get(c, 0)}
                 for c in sorted(set(before) | set(after)) if before.get(c, 0) != after.get(c, 0)]
        kinds = sorted({k for ch in changes.values() for k in ch.kinds})
        reason = "; ".join(ch.describe() for ch in changes.values())
        message = f"re-placed after {reason}: " + ", ".join(f"{m['cluster']} {m['from']}→{m['to']}" for m in moves)
        placed = fresh.placed if rec.duplicated else sum(n for _, n in target)
        trigger = {"kind": kinds[0] if len(kinds) == 1 else "FleetChanged", "kinds": kinds,
                   "clusters": sorted(changes), "reason": reason, "moves": moves}
        return Refit(replace(fresh, pairs=target, placed=placed, message=message, _placement=None), trigger,
                     len(moves) if rec.duplicated else moved(current, target), bool(deferred))

    def _follow(self, rec: BindingRecord, pl: PlacementSpec, current: Placement, fresh: Placement,
                changes: dict[str, FleetChange]) -> tuple[Placement, dict[str, FleetChange]]:
        """The placement with each changed cluster brought to its part of ``fresh``; the changes
        the move budget could not afford yet."""
        sel = self.selections.selection(rec.name)
        want = dict(fresh)
        target = current
        deferred: dict[str, FleetChange] = {}
        switch = pl.rebalanceOnFleetChange
        holistic = bool(pl.spreadConstraints) or pl.statefulTopology is not None
        away = moved_away_from(rec.object())
        for cluster, ch in changes.items():
            here = dict(target)
            left = cluster in here and sel is not None and not sel.selects(ch.now)
            if rec.duplicated:
                if cluster in want:
                    here[cluster] = want[cluster]
                elif left:
                    del here[cluster]
                target = tuple(sorted(here.items()))
                continue
            if left:  # no longer admitted: its replicas go, whatever the budget
                target = fresh if holistic else toward(target, fresh, cluster)
                continue
            if not (self.rebalance if switch is None else switch) or cluster in away:
                continue  # switched off, or moved off that cluster on purpose (failover, drain, evacuation)
            cand = fresh if holistic else toward(target, fresh, cluster)
            n = moved(target, cand)
            if not worth_moving(rec.replicas, n, self.min_move_fraction):
                continue
            granted = self.moves.take(n)
            if granted < n:
                deferred[cluster] = ch
                if holistic or granted == 0:
                    self.moves.give_back(granted)
                    continue
                cand = toward(target, fresh, cluster, limit=granted)
            target = cand
        return target, deferred
