"""What the members hold of the Works' dependents (the ConfigMaps, Secrets … a workload carries), by
resourceVersion, as the work-status controller's watches see them.

A Work holds a workload and its dependents, applied in order. When the workload changed and its
dependents did not, applying them again is a call to the member each (a quarter of a push stream's
applies) that changes nothing. The execution controller skips one only while this says the member's
copy is the one its own last apply of the same manifest left: followed by a watch, and at the
resourceVersion that apply returned (anyone's write since changes it; Karmada's object watcher keeps
the same version record). A kind that is not followed — its watch not up yet, broken, or the member's
watch threads taken — is unknown, and applied as before. A dependent whose copy is gone is applied
again by its Work (`WorkStatusController`), as a deleted workload is.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field, replace

from drods.model.work import Ref

Kind = tuple[str, str]  # (apiVersion, kind)


@dataclass(slots=True)
class CopyVersions:
    """Per cluster, per followed kind: the resourceVersion of each DRO-DS copy the member holds."""

    _followed: dict[str, dict[Kind, dict[Ref, str]]] = field(default_factory=dict)

    def listed(self, cluster: str, kind: Kind, copies: Iterable[tuple[Ref, str]]) -> None:
        """A listing of ``kind`` on ``cluster``: followed from now on, until `unsynced`."""
        self._followed.setdefault(cluster, {})[kind] = dict(copies)

    def changed(self, cluster: str, kind: Kind, ref: Ref, version: str | None) -> None:
        """A watch event: the copy is at ``version`` now (None: deleted)."""
        followed = self._followed.get(cluster, {}).get(kind)
        if followed is None:
            return
        if version is None:
            followed.pop(ref, None)
        else:
            followed[ref] = version

    def unsynced(self, cluster: str, kind: Kind | None = None) -> None:
        """``kind`` (every kind, without one) of ``cluster`` is no longer followed: unknown."""
        kinds = self._followed.get(cluster)
        if kinds is None:
            return
        if kind is None:
            del self._followed[cluster]
        else:
            kinds.pop(kind, None)

    def version(self, cluster: str, ref: Ref) -> str | None:
        """The resourceVersion of ``ref``'s copy on ``cluster``; None when its kind is not followed or
        the member holds no copy."""
        followed = self._followed.get(cluster, {}).get((ref.api_version, ref.kind))
        return _copy(followed, ref) if followed is not None else None

    def holds(self, cluster: str, ref: Ref) -> bool | None:
        """Does ``cluster`` hold a copy of ``ref``? None: its kind is not followed."""
        followed = self._followed.get(cluster, {}).get((ref.api_version, ref.kind))
        return None if followed is None else _copy(followed, ref) is not None


def _copy(followed: dict[Ref, str], ref: Ref) -> str | None:
    """``ref``'s version among a kind's copies; a manifest of a namespaced kind that names no namespace
    is the member's copy in ``default``, where the member put it."""
    version = followed.get(ref)
    if version is None and not ref.namespace:
        version = followed.get(replace(ref, namespace="default"))
    return version
