"""Where a plan without a ``targetCluster`` goes: where the scheduler would put the workload with the
source cordoned — the what-if dry run (`drods.whatif.dryrun`) over the view a scheduler starting now
would build from the store — the cluster that would get the most of its replicas."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pydantic import ValidationError

from drods.model.binding import BindingSpec
from drods.scheduler.profile import Profile
from drods.schedulerd.view import view_from_store
from drods.store import Store
from drods.whatif.dryrun import Change, apply_changes, dry_run


async def choose_target(store: Store, profile: Profile, binding: Mapping[str, Any],
                        source: str) -> tuple[str | None, str]:
    """(the target, or None, and why)."""
    name = str(binding["metadata"]["name"])
    try:
        spec = BindingSpec.model_validate(binding.get("spec") or {})
    except ValidationError as e:
        return None, f"the Binding's spec is unreadable: {e.errors()[0].get('msg')}"
    view, _ = await view_from_store(store, profile)  # placed from scratch, as a drain re-places it
    apply_changes(view, [Change(cluster=source, cordon=True)])
    answer = dry_run(view, spec, name)
    where = [(int(t.get("replicas") or 0), str(t["cluster"])) for t in answer.get("placement") or []
             if t.get("cluster") != source and int(t.get("replicas") or 0) > 0]
    if not where:
        result = (answer.get("explanation") or {}).get("result") or {}
        return None, f"no cluster but {source} can take it: {result.get('message') or answer.get('phase')}"
    best = max(where)[1]
    return best, f"{best} is where the scheduler would place it with {source} cordoned"
