"""The search cache: the member clusters' objects that ResourceRegistries select, as the members
last reported them (Karmada's karmada-search cache, `drods.model.search`).

`drods.controllers.search` fills it (one list then watch per kind and member) and says, per kind and
member, which namespaces are selected; the API serves it read-only (`drods.api.routes.search`).
Every object carries the ``resource.karmada.io/cached-from-cluster`` annotation naming its member.
It lives in the memory of the process that leads ``search-cache``; nothing of it is stored.
"""

from __future__ import annotations

import copy
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from drods.model.search import CACHED_FROM_CLUSTER
from drods.model.selector import LabelSelector

Obj = dict[str, Any]
ALL_NAMESPACES: frozenset[str] = frozenset()  # a scope naming no namespace: every namespace


@dataclass(frozen=True)
class CachedKind:
    """One kind of one member, as the member serves it."""

    cluster: str
    api_version: str
    kind: str
    plural: str
    namespaced: bool

    @property
    def group_version(self) -> tuple[str, str]:
        group, _, version = self.api_version.rpartition("/")
        return group, version


@dataclass
class _Entries:
    scope: frozenset[str]  # the selected namespaces; empty: all
    objects: dict[tuple[str, str], Obj] = field(default_factory=dict)  # (namespace, name) → object

    def in_scope(self, obj: Obj) -> bool:
        return not self.scope or str((obj.get("metadata") or {}).get("namespace") or "") in self.scope


@dataclass(frozen=True)
class Query:
    """A read of the cache: a Kubernetes resource path's group, version and plural, optionally a
    namespace and a name, and a label selector."""

    group: str
    version: str
    plural: str
    namespace: str | None = None
    name: str | None = None
    selector: LabelSelector | None = None


class SearchCache:
    def __init__(self) -> None:
        self.active = False  # filled by this process (it leads ``search-cache``)
        self._kinds: dict[CachedKind, _Entries] = {}

    def kinds(self) -> list[CachedKind]:
        return list(self._kinds)

    def scope(self, kind: CachedKind, namespaces: Iterable[str]) -> None:
        """Keep ``kind`` from its member, in ``namespaces`` (none: every namespace)."""
        entries = self._kinds.setdefault(kind, _Entries(frozenset(namespaces)))
        entries.scope = frozenset(namespaces)
        for key in [k for k, o in entries.objects.items() if not entries.in_scope(o)]:
            del entries.objects[key]

    def replace(self, kind: CachedKind, items: Iterable[Obj]) -> None:
        """What a list of the kind returned: everything the member has now."""
        entries = self._kinds.get(kind)
        if entries is None:
            return
        entries.objects = {}
        for obj in items:
            self._put(kind, entries, obj)

    def apply(self, kind: CachedKind, event: str, obj: Obj) -> None:
        """A watch event (ADDED, MODIFIED, DELETED; BOOKMARKs change nothing)."""
        entries = self._kinds.get(kind)
        if entries is None or event == "BOOKMARK":
            return
        if event == "DELETED":
            meta = obj.get("metadata") or {}
            entries.objects.pop((str(meta.get("namespace") or ""), str(meta.get("name") or "")), None)
            return
        self._put(kind, entries, obj)

    def drop(self, kind: CachedKind) -> None:
        """No registry selects the kind in that member any more: its objects leave the cache."""
        self._kinds.pop(kind, None)

    def clear(self) -> None:
        self._kinds.clear()

    @staticmethod
    def _put(kind: CachedKind, entries: _Entries, obj: Obj) -> None:
        if not entries.in_scope(obj):
            return
        cached = copy.deepcopy(obj)
        cached["apiVersion"], cached["kind"] = kind.api_version, kind.kind  # a list's items carry neither
        meta = cached.setdefault("metadata", {})
        meta["annotations"] = {**(meta.get("annotations") or {}), CACHED_FROM_CLUSTER: kind.cluster}
        entries.objects[(str(meta.get("namespace") or ""), str(meta.get("name") or ""))] = cached

    def serves(self, group: str, version: str, plural: str) -> CachedKind | None:
        """Some member's kind under that group, version and plural (None: nothing cached as that)."""
        return next((k for k in self._kinds if k.group_version == (group, version) and k.plural == plural), None)

    def find(self, q: Query) -> list[Obj]:
        """The cached objects the query names, ordered by namespace, name and member."""
        out: list[tuple[str, str, str, Obj]] = []
        for kind, entries in self._kinds.items():
            if kind.group_version != (q.group, q.version) or kind.plural != q.plural:
                continue
            for (ns, name), obj in entries.objects.items():
                if q.namespace is not None and ns != q.namespace or q.name is not None and name != q.name:
                    continue
                if q.selector is not None and not q.selector.matches((obj.get("metadata") or {}).get("labels") or {}):
                    continue
                out.append((ns, name, kind.cluster, obj))
        return [o for *_, o in sorted(out, key=lambda t: t[:3])]
