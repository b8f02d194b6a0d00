"""Where a plan without a ``targetCluster`` goes: where the scheduler would put the workload with the
source cordoned — the what-if dry run (`drods.whatif.dryrun`) over the view a scheduler starting now
would build from the store — the cluster that would get the most of its replicas."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from pydantic import ValidationError

from drods.model.binding import BindingSpec
from drods.model.decision import OPTIONS_TOP_K
from drods.scheduler.profile import Profile
from drods.schedulerd.view import view_from_store
from drods.store import Store
from drods.whatif.dryrun import Change, apply_changes, dry_run


@dataclass(frozen=True, slots=True)
class TargetChoice:
    """The target (None: none fits) and why, with the alternatives as the scheduler weighed them (X1):
    every other cluster's total and per-plugin scores, best first, at most ``OPTIONS_TOP_K``."""

    target: str | None
    note: str
    options: tuple[dict[str, Any], ...] = ()
    weights: Mapping[str, float] = field(default_factory=dict)
    refused: str | None = None  # a given target the scheduler's filters turn away: why


async def choose_target(store: Store, profile: Profile, binding: Mapping[str, Any], source: str,
                        given: str | None = None) -> TargetChoice:
    """Where the scheduler would put the workload with ``source`` cordoned; a ``given`` target is kept
    (the operator's choice) unless the scheduler's filters turn it away (``refused``: the workload's
    placement does not admit it, or it has no room — a plan there would wait for replicas that never
    start, or the next decision would move the workload back without its data); else the scheduler's
    answer only says how the alternatives compare."""
    name = str(binding["metadata"]["name"])
    try:
        spec = BindingSpec.model_validate(binding.get("spec") or {})
    except ValidationError as e:
        return TargetChoice(given, f"the Binding's spec is unreadable: {e.errors()[0].get('msg')}")
    view, _ = await view_from_store(store, profile)  # placed from scratch, as a drain re-places it
    apply_changes(view, [Change(cluster=source, cordon=True)])
    answer = dry_run(view, spec, name, about=given)
    explanation = answer.get("explanation") or {}
    options = tuple(sorted(({"cluster": str(o["cluster"]), "total": o.get("total"), "scores": o.get("scores") or {},
                             **({"room": o["room"]} if o.get("room") is not None else {})}
                            for o in explanation.get("options") or [] if o.get("cluster") != source),
                           key=lambda o: -float(o["total"] or 0.0))[:OPTIONS_TOP_K])
    weights = dict(explanation.get("weights") or {})
    if given:
        refused = (answer.get("about") or {}).get("filtered")
        if refused:  # the policy would not have it there, or it has no room: the next decision moves it away
            return TargetChoice(given, f"{given} was given, but the scheduler would not place it there: {refused}",
                                options, weights, refused=str(refused))
        return TargetChoice(given, f"{given} was given; the others as the scheduler weighs them", options, weights)
    where = [(int(t.get("replicas") or 0), str(t["cluster"])) for t in answer.get("placement") or []
             if t.get("cluster") != source and int(t.get("replicas") or 0) > 0]
    if not where:
        result = explanation.get("result") or {}
        return TargetChoice(None, f"no cluster but {source} can take it: "
                                  f"{result.get('message') or answer.get('phase')}", options, weights)
    best = max(where)[1]
    return TargetChoice(best, f"{best} is where the scheduler would place it with {source} cordoned", options,
                        weights)
