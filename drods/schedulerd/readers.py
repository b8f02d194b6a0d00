"""F4: the bindings that read each Dataset, so that a Dataset whose copies move re-places its readers.

DataLocality weighs where a Dataset's copies are when a reader is decided; without this a reader
stayed where it was when its data moved away (reading it across clusters from then on) until
something else re-decided it. A change of the clusters holding copies (not of the size or the
reads) queues every placed reader for a fresh decision within the move budget, whose trigger
names the Dataset and its new clusters.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any


def copy_clusters(obj: Any) -> tuple[str, ...]:
    """The clusters holding a copy of the Dataset ``obj`` (sorted; none for a deleted one)."""
    spec = obj.get("spec") if isinstance(obj, Mapping) else None
    locs = spec.get("locations") if isinstance(spec, Mapping) else None
    return tuple(sorted({str(loc["cluster"]) for loc in locs or ()
                         if isinstance(loc, Mapping) and loc.get("cluster")}))


def dataset_name(obj: Any) -> str | None:
    """"namespace/name" of a Dataset object, as readers name it."""
    meta = obj.get("metadata") if isinstance(obj, Mapping) else None
    if not isinstance(meta, Mapping) or not meta.get("name"):
        return None
    return f"{meta.get('namespace') or 'default'}/{meta['name']}"


class DatasetReaders:
    """Dataset → the bindings that read it; and the readers due a decision because their data moved."""

    def __init__(self) -> None:
        self._readers: dict[str, set[str]] = {}
        self._moved: dict[str, str] = {}  # reader → why (the Dataset and where its copies are now)

    def index(self, binding: str, old: Sequence[str], new: Sequence[str]) -> None:
        if old == new:  # every status write of every binding passes here: most read nothing
            return
        was, now = set(old), set(new)
        for d in was - now:
            s = self._readers.get(d)
            if s is not None:
                s.discard(binding)
                if not s:
                    del self._readers[d]
        for d in now - was:
            self._readers.setdefault(d, set()).add(binding)
        if not now:
            self._moved.pop(binding, None)

    def changed(self, old: Any, new: Any) -> list[str]:
        """A Dataset stored as ``new`` (None: deleted) over ``old``: the readers to decide again when
        its copies are on other clusters now (none when they are not); why is kept for each (`take`)."""
        name = dataset_name(new) or dataset_name(old)
        if name is None or old is None or new is None:
            return []  # a new Dataset is news to no placed reader's decision; a deleted one moves none
        before, after = copy_clusters(old), copy_clusters(new)
        if before == after or not after:
            return []
        why = f"Dataset {name} moved: copies on {', '.join(after)} (were on {', '.join(before) or 'none'})"
        readers = sorted(self._readers.get(name, ()))
        for r in readers:
            self._moved[r] = why
        return readers

    def due(self, binding: str) -> bool:
        return binding in self._moved

    def take(self, binding: str) -> str | None:
        """Why ``binding`` is decided again for its data (None: it is not), forgotten once asked."""
        return self._moved.pop(binding, None)
