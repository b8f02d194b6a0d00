"""What a drain would do to the bindings it re-places, before it is made: each one decided as the scheduler
decides a drain's reschedule (its replicas elsewhere stay, those on the drained cluster are placed anew),
with the cluster cordoned, one after another so that each sees the replicas placed before it — the answer
to "can the rest of the fleet take this cluster's load?" that ``?dryRun=All`` gave none of."""

from __future__ import annotations

import copy
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from pydantic import ValidationError

from drods.model import jsondoc
from drods.model.annotations import RESCHEDULE_REASON, drain_reason
from drods.model.binding import BindingSpec
from drods.model.kinds import BINDING
from drods.scheduler.framework import Scheduler
from drods.schedulerd.decision_task import decision_task
from drods.schedulerd.records import RESCHEDULE, decode_binding
from drods.schedulerd.view import LiveView
from drods.whatif.dryrun import Change, apply_changes


@dataclass(frozen=True, slots=True)
class Forecast:
    binding: str
    placement: tuple[tuple[str, int], ...]  # where its replicas would run
    requested: int
    placed: int
    message: str

    @property
    def pending(self) -> int:
        return max(0, self.requested - self.placed)

    def as_json(self) -> dict[str, Any]:
        return {"binding": self.binding, "placement": [{"cluster": c, "replicas": n} for c, n in self.placement],
                "requested": self.requested, "placed": self.placed, "pending": self.pending,
                "message": self.message}


def forecast_drain(view: LiveView, cluster: str, bindings: Sequence[Mapping[str, Any]]) -> list[Forecast]:
    """Each of ``bindings`` (as stored) re-placed off ``cluster``, on ``view`` (changed: the cluster cordoned,
    each decision assumed)."""
    snap = view.snapshot
    if cluster in snap:
        apply_changes(view, [Change(cluster=cluster, cordon=True)])
    sched = Scheduler(view.profile)
    sched.rng = view.rng
    out: list[Forecast] = []
    for stored in bindings:
        obj = copy.deepcopy(dict(stored))
        name = str(obj["metadata"]["name"])
        obj["metadata"].setdefault("annotations", {})[RESCHEDULE_REASON] = drain_reason(cluster)
        rec = decode_binding(BINDING.key(name), jsondoc.dumps(obj), 0)
        try:
            spec = BindingSpec.model_validate(obj.get("spec") or {})
        except ValidationError:
            continue  # the scheduler reports such a Binding Invalid whatever the drain
        if rec is None:
            continue
        task, _ = decision_task(spec, rec, obj, RESCHEDULE)
        result = sched.schedule(task, snap)
        if result.phase == "Scheduled":
            pairs = tuple((t.cluster, t.replicas) for t in result.placement if t.replicas > 0)
            was = dict(rec.placement)
            added = tuple((c, n - was.get(c, 0)) for c, n in pairs if n > was.get(c, 0))
            if added:
                snap.assume(added, rec.requirements)  # the next binding sees them
            placed = result.placed
        else:  # nowhere for the drained replicas: those elsewhere run on
            pairs = tuple((t.cluster, t.replicas) for t in task.current if t.replicas > 0)
            placed = sum(n for _, n in pairs)
        out.append(Forecast(name, pairs, result.requested, placed, result.message))
    return out
