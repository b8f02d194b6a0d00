"""The scheduler's memory of fleet changes (S11): bindings by what they select, the changes each
queued binding waits for, the move budget — and the placement a fresh decision leads to.

`fleet` holds the pure rules (which bindings a change affects, ``toward``, the budget); this module
applies them to the scheduler's records. The service keeps the queue: it asks ``affected`` on a
change, queues those bindings, and on their turn hands ``refit`` a fresh decision (divided without
the binding's own assumed load).
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Collection, Iterable, Sequence
from dataclasses import dataclass, replace
from typing import Any

from pydantic import ValidationError

from drods.model.annotations import migrated_from, moved_away_from, placement_offers
from drods.model.binding import BindingSpec, placeable
from drods.model.placement import Placement as PlacementSpec
from drods.scheduler.framework import ScheduleResult
from drods.scheduler.selection import ClusterFacts, ClusterSelection
from drods.schedulerd.fleet import (
    UNCORDONED,
    FleetChange,
    MoveBudget,
    SelectionIndex,
    moved,
    toward,
    worth_moving,
)
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


# A binding waiting for more clusters' changes than this takes the fresh division whole (`_follow_whole`)
MAX_FOLLOWED = 16
# A quiet fleet packs: a fresh division puts a binding whole on its best cluster, so a cluster that joins
# or returns a hair better than where it runs would take every replica. Such a move is made only when
# that cluster's total score beats those of the clusters it takes replicas from by this much (of 100).
PACK_MIN_GAIN = 5.0


class FleetFollower:
    def __init__(self, *, rebalance: bool, min_move_fraction: float, max_moves_per_minute: int,
                 clock: Callable[[], float] = time.time) -> None:
        self.rebalance = rebalance
        self.min_move_fraction = min_move_fraction
        self.selections = SelectionIndex()
        self.moves = MoveBudget(max_moves_per_minute, clock)
        self._pending: dict[str, dict[str, FleetChange]] = {}  # shared between bindings: replaced, never changed
        self._many: set[str] = set()  # bindings waiting for more than MAX_FOLLOWED clusters' changes

    # ------------------------------------------------------------------ bookkeeping
    def index(self, rec: BindingRecord) -> None:
        self.selections.put(rec.name, rec.selection, lambda: selection_of(rec))

    def forget(self, name: str) -> None:
        self.selections.remove(name)
        self._pending.pop(name, None)
        self._many.discard(name)

    def waiting(self, name: str) -> bool:
        """A fleet change waits for this binding's next decision."""
        return name in self._pending

    def drop(self, name: str) -> None:
        """A full decision (a retry) places the binding wherever it fits now: nothing left to follow."""
        self._pending.pop(name, None)
        self._many.discard(name)

    def affected(self, changes: Sequence[FleetChange], record: Callable[[str], BindingRecord | None]
                 ) -> list[BindingRecord]:
        """The bindings to re-decide for ``changes`` (``fleet.SelectionIndex.concerns``), each once, noted
        as waiting for them."""

        def placed_on(name: str) -> Iterable[str]:
            rec = record(name)
            return [c for c, _ in rec.placement] if rec is not None else ()

        out: dict[str, BindingRecord] = {}
        for names, concern in self.selections.concerns(changes, placed_on):
            dated = _Dated.of(concern)
            for name in names:
                rec = out.get(name) or record(name)
                if rec is None or rec.deleting:
                    continue
                news = dated.news_to(rec.scheduled_time)
                if news:
                    self._note(name, news)
                    out[name] = rec
        return list(out.values())

    def _note(self, name: str, concern: dict[str, FleetChange]) -> None:
        """``name`` waits for ``concern`` too. Past ``MAX_FOLLOWED`` clusters a binding takes the fresh
        division whole (`refit`) and keeps only the larger of the two dicts, shared, to name them: 100,000
        bindings each holding a copy of 10,000 returning clusters' changes would not fit in memory."""
        old = self._pending.get(name)
        if old is None or old is concern:
            merged = concern
        elif name in self._many or len(old) + len(concern) > MAX_FOLLOWED:
            merged = concern if len(concern) >= len(old) else old
            self._many.add(name)
        else:
            merged = {**old, **concern}
        self._pending[name] = merged
        if len(merged) > MAX_FOLLOWED:  # one batch of them is enough
            self._many.add(name)

    # ------------------------------------------------------------------ deciding
    def stale(self, rec: BindingRecord, facts: Callable[[str], ClusterFacts | None],
              held: Collection[str] = ()) -> frozenset[str]:
        """The clusters ``rec`` runs on that its selection no longer admits (affinity, labels, fields),
        whatever change made them so: a change on one cluster re-decides only that cluster's part, so
        a copy left on a cluster relabelled out while nothing else fitted stayed there for good. Not
        ``held`` ones (cordoned, NotReady with the taint: kept on purpose) nor unknown ones (a removal
        is its own change)."""
        sel = self.selections.selection(rec.name)
        if sel is None:
            return frozenset()
        return frozenset(c for c, _ in rec.placement if c not in held and (f := facts(c)) is not None
                         and not sel.selects(f))

    def refit(self, rec: BindingRecord, spec: BindingSpec, fresh: ScheduleResult,
              stale: frozenset[str] = frozenset()) -> Refit:
        """The binding's placement after the changes it waits for: of ``fresh`` (a decision from
        scratch) only the changed clusters' parts are taken, and the parts of the ``stale`` clusters
        (`stale`) go too. (What a divided binding holds on cordoned clusters is in ``fresh`` as it is,
        `SchedulerService._refit`: no change moves it.)"""
        changes = self._pending.pop(rec.name, {})
        many = rec.name in self._many
        self._many.discard(rec.name)
        current = tuple(sorted(rec.placement))
        obj = rec.object()
        away = moved_away_from(obj)
        held = {c for c, _ in current}
        if away:  # never back onto a cluster it was moved off on purpose, whatever its division, unless
            # the operator uncordoned it (a drained copy of a Duplicated workload returns): data
            # that moved with a plan goes back only with another
            migrated = migrated_from(obj)
            changes = {c: ch for c, ch in changes.items()
                       if c not in away or c in held or (UNCORDONED in ch.kinds and c != migrated)}
            if not changes:
                return Refit()
        stale = stale - changes.keys()
        # a division taken whole (static weights, a Duplicated binding's fleet back at once) must not
        # bring them back either, but for an uncordon let through above
        blocked = frozenset(away - held - changes.keys())
        # never fewer replicas for a fleet change (parked retries place the rest) — but a removed
        # cluster's replicas are gone already: what fits elsewhere goes there now
        sel = self.selections.selection(rec.name)
        left = sorted(c for c, _ in current if c in stale or (c in changes and _left(sel, changes[c])))
        if rec.keeps_data and current and not left:
            return Refit()  # F3: its data moves only with a plan; a fleet change brings none of it up empty
        gone = sum(n for c, n in current if c in changes and changes[c].removed)
        pl = spec.placement
        deferred: dict[str, FleetChange] = {}
        short = ""
        if fresh.phase != "Scheduled" or (not rec.duplicated and fresh.placed < sum(n for _, n in current) - gone):
            if not gone:
                return self._kept(fresh, changes, current, left, many) if left else Refit()
            # nowhere else fits them: the removed clusters' replicas are pending, not placed where no
            # cluster is (the rest stays; a Binding left with nothing is Unschedulable, parked for a retry)
            target = tuple((c, n) for c, n in current if not (c in changes and changes[c].removed))
            short = f"; {fresh.message}" if fresh.phase != "Scheduled" else "; the rest fit nowhere now"
            fresh = replace(fresh, phase="Scheduled" if target else "Unschedulable",
                            placed=(fresh.requested if target else 0) if rec.duplicated else fresh.placed)
        elif _static(rec, pl):
            # re-divided whole, but not onto a cluster it was moved off on purpose: fail-back brings it
            target, deferred = (current if _onto(fresh.pairs, blocked) else fresh.pairs), {}
        elif many:
            target, deferred = self._follow_whole(rec, pl, current, fresh.pairs, changes, away, blocked, stale)
        else:
            target, deferred = self._follow(rec, pl, current, fresh.pairs, changes, away, blocked, stale,
                                            # cost-first: the fresh division is the cheapest fill, what
                                            # the binding asks for, whatever the scores say
                                            pays=_packing_pays(fresh) if fresh.spread == 0.0 and not pl.costFirst
                                            else None)
        if deferred:
            self._note(rec.name, deferred)
            if many:
                self._many.add(rec.name)
        if target == current:
            return Refit(deferred=bool(deferred))
        before, after = dict(current), dict(target)
        moved_on = sorted(c for c in set(before) | set(after) if before.get(c, 0) != after.get(c, 0))
        scored = fresh.totals_for(moved_on)  # the record shows what each cluster it left or joined scored
        moves = [{"cluster": c, "from": before.get(c, 0), "to": after.get(c, 0),
                  **({"total": scored[c]} if c in scored else {})} for c in moved_on]
        named = sorted(changes)[:MAX_FOLLOWED]
        reason = _reason(changes, named, many)
        dropped = sorted(c for c in stale if c not in after)
        if dropped:
            reason = f"{reason} ({', '.join(dropped)} no longer {'matches' if len(dropped) == 1 else 'match'} " \
                "the placement)"
        message = f"re-placed after {reason}: " + ", ".join(f"{m['cluster']} {m['from']}→{m['to']}" for m in moves) \
            + short
        placed = fresh.placed if rec.duplicated else sum(n for _, n in target)
        trigger = _trigger(changes, named, reason, moves)
        return Refit(replace(fresh, pairs=target, placed=placed, message=message, _placement=None), trigger,
                     len(moves) if rec.duplicated else moved(current, target), bool(deferred))

    @staticmethod
    def _kept(fresh: ScheduleResult, changes: dict[str, FleetChange], current: Placement, left: list[str],
              many: bool) -> Refit:
        """Clusters it runs on no longer admit it and no other cluster fits: what runs stays (as Karmada
        keeps a binding's clusters when none fits), and the decision says so — Unschedulable with its
        placement kept, parked until a cluster event retries it (written, not silently skipped: the
        status still said it was scheduled on feasible clusters)."""
        named = sorted(changes)[:MAX_FOLLOWED]
        reason = _reason(changes, named, many) if changes else "a fleet change"
        verb = "matches" if len(left) == 1 else "match"
        fits = "no other cluster fits" if fresh.phase != "Scheduled" else \
            f"the other clusters fit {fresh.placed} of its replicas"
        message = f"kept on {', '.join(left)}, which no longer {verb} the placement after {reason}: " \
            f"{fits} ({fresh.message})"
        trigger = {**_trigger(changes, named, reason, []), "unmatched": left}
        return Refit(replace(fresh, phase="Unschedulable", pairs=current, placed=0, message=message,
                             _placement=None), trigger)

    def _follow_whole(self, rec: BindingRecord, pl: PlacementSpec, current: Placement, fresh: Placement,
                      changes: dict[str, FleetChange], away: frozenset[str], blocked: frozenset[str],
                      stale: frozenset[str] = frozenset()) -> tuple[Placement, dict[str, FleetChange]]:
        """`_follow` for a binding that waits for more than ``MAX_FOLLOWED`` clusters' changes (a fleet
        coming back at once): ``fresh`` as a whole — at once when a cluster it runs on no longer admits
        it, else within the same switch, minimum move and budget — unless it would bring replicas back
        to a cluster they were moved off on purpose (fail-back brings them)."""
        sel = self.selections.selection(rec.name)
        left = any(c in stale or (c in changes and _left(sel, changes[c])) for c, _ in current)
        if rec.duplicated:  # every copy it may have, but none back where it was moved off on purpose
            return tuple((c, n) for c, n in fresh if c not in blocked), {}
        if left:
            return fresh, {}
        switch = pl.rebalanceOnFleetChange
        if not (self.rebalance if switch is None else switch):
            return current, {}
        if _onto(fresh, away):
            return current, {}
        n = moved(current, fresh)
        if not worth_moving(rec.replicas, n, self.min_move_fraction):
            return current, {}
        granted = self.moves.take(n)
        if granted < n:
            self.moves.give_back(granted)
            return current, changes
        return fresh, {}

    def by_parts(self, rec: BindingRecord, pl: PlacementSpec) -> bool:
        """Whether the refit takes each changed cluster's part of the fresh division (`_follow`). That
        division is then made from scratch — no bonus for where the replicas are now: with it the part
        a cluster is offered would depend on the path (a binding placed on one cluster while two others
        had not reported kept 4 of 6 replicas there when both reported at once, 3 when one after the
        other). Moving only the changed clusters' parts, within the minimum move and the budget, is what
        keeps the rest where it is. A fresh division taken whole keeps the bonus."""
        return not (rec.duplicated or _static(rec, pl) or _holistic(pl) or rec.name in self._many)

    def _follow(self, rec: BindingRecord, pl: PlacementSpec, current: Placement, fresh: Placement,
                changes: dict[str, FleetChange], away: frozenset[str], blocked: frozenset[str] = frozenset(),
                stale: frozenset[str] = frozenset(), pays: Callable[[Placement, Placement], bool] | None = None
                ) -> tuple[Placement, dict[str, FleetChange]]:
        """The placement with each ``stale`` cluster's part taken off and each changed cluster brought to
        its part of ``fresh``; the changes the move budget could not afford yet. A cluster only opened to
        more never loses replicas by it, and none go onto a ``blocked`` cluster (moved off on purpose, not
        the change's own); ``pays`` (a packed division) judges whether a move onto the changed cluster is
        worth making."""
        sel = self.selections.selection(rec.name)
        want = dict(fresh)
        target = current
        deferred: dict[str, FleetChange] = {}
        switch = pl.rebalanceOnFleetChange
        holistic = _holistic(pl)
        for cluster in sorted(stale):  # no longer admitted: its part goes, whatever the budget (as `left` below)
            if rec.duplicated:
                target = tuple((c, n) for c, n in target if c != cluster)
            else:
                target = fresh if holistic else toward(target, fresh, cluster)
        for cluster, ch in changes.items():
            here = dict(target)
            left = cluster in here and _left(sel, ch)
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
            if _onto(cand, blocked) or (ch.only_opens and dict(cand).get(cluster, 0) < dict(target).get(cluster, 0)):
                continue
            n = moved(target, cand)
            if not worth_moving(rec.replicas, n, self.min_move_fraction):
                continue
            if pays is not None and not pays(target, cand):
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


def _packing_pays(fresh: ScheduleResult) -> Callable[[Placement, Placement], bool]:
    """Whether moving from ``before`` to ``after`` gains ``PACK_MIN_GAIN``: every cluster gaining replicas
    scores that much above every cluster losing some (one no longer a feasible candidate has no score:
    it gains nothing to stay there)."""
    totals: dict[str, float] = {}

    def pays(before: Placement, after: Placement) -> bool:
        if not totals:
            totals.update((str(o["cluster"]), float(o["total"])) for o in fresh.options())  # type: ignore[arg-type]
        was, now = dict(before), dict(after)
        totals.update(fresh.totals_for(c for c in was if c not in totals))  # beyond the ten options named
        gaining = [totals.get(c, 0.0) for c, k in now.items() if k > was.get(c, 0)]
        losing = [totals[c] for c, k in was.items() if k > now.get(c, 0) and c in totals]
        return not losing or not gaining or min(gaining) >= max(losing) + PACK_MIN_GAIN

    return pays


def _reason(changes: dict[str, FleetChange], named: list[str], many: bool) -> str:
    """The changes a decision followed, as its record and status name them."""
    reason = "; ".join(changes[c].describe() for c in named)
    return f"{reason} and other clusters" if many or len(changes) > len(named) else reason


def _trigger(changes: dict[str, FleetChange], named: list[str], reason: str,
             moves: list[dict[str, Any]]) -> dict[str, Any]:
    """A fleet decision's ``trigger`` in its record: the kinds of change it followed, on which clusters."""
    kinds = sorted({k for ch in changes.values() for k in ch.kinds})
    return {"kind": kinds[0] if len(kinds) == 1 else "FleetChanged", "kinds": kinds, "clusters": named,
            "reason": reason, "moves": moves}


def _onto(target: Placement, clusters: frozenset[str]) -> bool:
    """``target`` puts replicas on one of ``clusters`` (where the binding holds none now)."""
    return any(n > 0 for c, n in target if c in clusters)


def _left(sel: ClusterSelection | None, ch: FleetChange) -> bool:
    """The changed cluster no longer admits the binding: removed, or no longer selected (a spec that
    does not parse is judged as selecting every cluster)."""
    return ch.now is None or (sel is not None and not sel.selects(ch.now))


def _static(rec: BindingRecord, pl: PlacementSpec) -> bool:
    """Divided by static weights: a fleet change re-divides it whole."""
    rs = pl.replicaScheduling
    return not rec.duplicated and rs is not None and rs.weightPreference is not None and \
        bool(rs.weightPreference.static_weights)


def _holistic(pl: PlacementSpec) -> bool:
    """Spread constraints or a stateful topology judge the placement as a whole, never cluster by cluster."""
    return bool(pl.spreadConstraints) or pl.statefulTopology is not None


@dataclass(frozen=True, slots=True)
class _Dated:
    """A concern and the range of its changes' dates (``FleetChange.since``; None, a change happening
    now, counts as the latest), so that a binding is judged against it in O(1) unless it was decided
    between two of them: after a restart listing 10,000 clusters, each of 100,000 bindings."""

    concern: dict[str, FleetChange]
    first: float
    last: float

    @classmethod
    def of(cls, concern: dict[str, FleetChange]) -> _Dated:
        dates = [math.inf if ch.since is None else ch.since for ch in concern.values()]
        return cls(concern, min(dates, default=math.inf), max(dates, default=math.inf))

    def news_to(self, decided_at: float | None) -> dict[str, FleetChange]:
        """The changes a decision made at ``decided_at`` did not see: after a restart the clusters
        listed are not news to a binding decided after they joined (a restart moves nothing). The
        concern itself (shared) when all are news."""
        if decided_at is None or decided_at < self.first:
            return self.concern
        if decided_at >= self.last:
            return {}
        return {c: ch for c, ch in self.concern.items() if ch.news_to(decided_at)}
