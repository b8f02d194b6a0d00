"""The validated specs of bindings awaiting a retry.

A parked binding is tried again many times (every fleet change); validating its spec each time costs
more than the decision. The cache is bounded — in a failure storm every binding is parked and a spec
weighs ~2.5 KB — and a spec is reused only while what it was made from holds: the binding's
generation, its uid (a binding deleted and created again under its name is at generation 1 again)
and the clusters placement feedback offers it (an annotation, which does not change the generation).
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Mapping
from typing import Any

from drods.model.annotations import placement_offers
from drods.model.binding import BindingSpec, placeable

SPEC_CACHE_SIZE = 4096

Version = tuple[int, str, tuple[str, ...]]


class SpecCache:
    def __init__(self, size: int = SPEC_CACHE_SIZE) -> None:
        self.size = size
        self._specs: OrderedDict[str, tuple[Version, BindingSpec]] = OrderedDict()

    def spec(self, name: str, generation: int, obj: Mapping[str, Any]) -> BindingSpec:
        """The binding's spec, validated, widened by its placement offers (CATS CCC)."""
        offers = placement_offers(obj)
        version = (generation, str((obj.get("metadata") or {}).get("uid") or ""), tuple(offers))
        hit = self._specs.get(name)
        if hit is not None and hit[0] == version:
            self._specs.move_to_end(name)
            return hit[1]
        spec = placeable(BindingSpec.model_validate(obj.get("spec") or {}), offers)
        self._specs[name] = (version, spec)
        self._specs.move_to_end(name)
        if len(self._specs) > self.size:
            self._specs.popitem(last=False)
        return spec

    def forget(self, name: str) -> None:
        self._specs.pop(name, None)

    def __len__(self) -> int:
        return len(self._specs)
