"""What placements draw from the GPU-by-model and storage-by-tier tables (F1), kept per binding.

The two ``OfferTable``s (``offers.py``) hold capacity and load per (cluster, key); this book also
remembers which binding drew what, so a binding placed anew, deleted or forgotten gives back
exactly its draws: ``placed`` ones for as long as the binding is placed (the load of members that
report no per-model / per-tier allocation), ``assumed`` ones with the cpu/memory of an assume.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

from drods.model.cluster import ClusterSpec
from drods.scheduler.offers import Cell, Draw, OfferDemand, OfferTable, draw_gpus

OfferDraws = tuple[tuple[Draw, ...], tuple[Draw, ...]]  # (GPU draws, tier draws) of one placement


def _shrunk(old: OfferDraws, new: OfferDraws) -> bool:
    """Whether any (table, cluster, key) cell of ``old`` holds more than in ``new``."""
    for o, n in zip(old, new, strict=True):
        now: dict[tuple[str, str], float] = {}
        for name, k, amount in n:
            now[(name, k)] = now.get((name, k), 0.0) + amount
        before: dict[tuple[str, str], float] = {}
        for name, k, amount in o:
            before[(name, k)] = before.get((name, k), 0.0) + amount
        if any(v > now.get(c, 0.0) + 1e-9 for c, v in before.items()):
            return True
    return False


class OfferBook:
    """The offer tables of every row and the draws of each binding on them."""

    def __init__(self, cap: int, index: Mapping[str, int]) -> None:
        self._index = index  # the snapshot's name → row map (the same dict for its lifetime)
        self.gpus = OfferTable(cap)
        self.tiers = OfferTable(cap)
        self.placements: dict[str, OfferDraws] = {}  # held while placed, by binding key
        self.assumed: dict[str, OfferDraws] = {}  # assumed with the cpu/memory of ``assume``

    # ------------------------------------------------------------------ rows
    def grow(self, new: int) -> None:
        self.gpus.grow(new)
        self.tiers.grow(new)

    def move(self, row: int, last: int) -> None:
        self.gpus.move(row, last)
        self.tiers.move(row, last)

    def clear(self, row: int) -> None:
        self.gpus.clear(row)
        self.tiers.clear(row)

    def set_spec(self, row: int, spec: ClusterSpec) -> None:
        self.gpus.set_spec(row, [(g.model, float(g.count), g.relativePerformance) for g in spec.gpus])
        self.tiers.set_spec(row, [(t.tier, t.capacityGiB, math.nan) for t in spec.storage])

    def set_status(self, row: int, gpu_by_model: Any, storage_by_tier: Any) -> None:
        self.gpus.set_status(row, gpu_by_model)
        self.tiers.set_status(row, storage_by_tier)

    # ------------------------------------------------------------------ draws
    def draw(self, placement: Sequence[tuple[str, int]], demand: OfferDemand, which: Cell, n: int) -> OfferDraws:
        """Add what ``placement`` takes of the offer tables to their ``which`` cells; returns the draws."""
        gpu: list[Draw] = []
        tier: list[Draw] = []
        for name, count in placement:
            row = self._index.get(name)
            if row is None or count <= 0:
                continue
            if demand.uses_gpus:
                for model, amount in draw_gpus(self.gpus, demand, row, n, count, which):
                    self.gpus.add(which, row, model, amount)
                    gpu.append((name, model, amount))
            if demand.storage_tier is not None and demand.uses_tier and demand.storage_tier in self.tiers.keys:
                amount = count * demand.storage_gib
                self.tiers.add(which, row, demand.storage_tier, amount)
                tier.append((name, demand.storage_tier, amount))
        return tuple(gpu), tuple(tier)

    def undraw(self, draws: OfferDraws, which: Cell) -> None:
        for table, part in zip((self.gpus, self.tiers), draws, strict=True):
            for name, k, amount in part:
                row = self._index.get(name)
                if row is not None:
                    table.add(which, row, k, -amount)

    def assume(self, key: str, placement: Sequence[tuple[str, int]], demand: OfferDemand, n: int) -> None:
        self.assumed[key] = self.draw(placement, demand, "assumed", n)

    def forget(self, key: str) -> None:
        if self.assumed:
            drew = self.assumed.pop(key, None)
            if drew is not None:
                self.undraw(drew, "assumed")

    def place(self, key: str, placement: Sequence[tuple[str, int]], demand: OfferDemand | None,
              n: int) -> bool:
        """Binding ``key`` holds ``demand`` per replica of ``placement`` (replacing what it held);
        True when some cluster now holds less of it than before."""
        old = self.placements.get(key)
        self.drop(key)
        draws: OfferDraws = ((), ())
        if demand is not None:
            draws = self.draw(placement, demand, "placed", n)
            if draws[0] or draws[1]:
                self.placements[key] = draws
        return old is not None and _shrunk(old, draws)

    def drop(self, key: str) -> bool:
        """Binding ``key`` holds nothing any more; True when it held something."""
        held = self.placements.pop(key, None)
        if held is None:
            return False
        self.undraw(held, "placed")
        return True
