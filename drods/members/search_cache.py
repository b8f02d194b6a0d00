"""The search cache: the member clusters' objects that ResourceRegistries select, as the members
last reported them (Karmada's karmada-search cache, `drods.model.search`).

`drods.controllers.search` fills it (one list then watch per kind and member) and says, per kind and
member, which namespaces are selected; the API serves it read-only (`drods.api.routes.search`).
Every object carries the ``resource.karmada.io/cached-from-cluster`` annotation naming its member.
It lives in the memory of the process that leads ``search-cache``; nothing of it is stored.

Each change gets the next cache revision, which becomes the object's ``resourceVersion`` (members'
own versions are not comparable with each other — karmada-search rewrites them too); the last
`HISTORY` changes are kept so a watch resumes from a list's or an object's version, and one from
further back is told 410 Expired, as by the Kubernetes API server.
"""

from __future__ import annotations

import asyncio
import copy
from collections import deque
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

from drods.model.search import CACHED_FROM_CLUSTER
from drods.model.selector import LabelSelector

Obj = dict[str, Any]
HISTORY = 4096  # changes kept for watches resuming from a resourceVersion
WATCH_BUFFER = 4096  # changes a slow watcher may fall behind by before it is ended (410)


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
    member_versions: dict[tuple[str, str], str] = field(default_factory=dict)  # the member's resourceVersion

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

    def matches(self, kind: CachedKind, obj: Obj) -> bool:
        meta = obj.get("metadata") or {}
        if kind.group_version != (self.group, self.version) or kind.plural != self.plural:
            return False
        if self.namespace is not None and str(meta.get("namespace") or "") != self.namespace:
            return False
        if self.name is not None and str(meta.get("name") or "") != self.name:
            return False
        return self.selector is None or self.selector.matches(meta.get("labels") or {})


@dataclass(frozen=True)
class CacheEvent:
    revision: int
    type: str  # ADDED, MODIFIED, DELETED
    kind: CachedKind
    object: Obj


class Expired(Exception):
    """A watch asked to resume from a revision no longer kept: list again."""


class Subscription:
    """A watch's view of the cache: the kept changes after its revision, then each new one."""

    def __init__(self, cache: SearchCache, backlog: list[CacheEvent]) -> None:
        self.cache = cache
        self.backlog = backlog
        self.queue: asyncio.Queue[CacheEvent | None] = asyncio.Queue(WATCH_BUFFER)  # None: fell behind

    async def next(self) -> CacheEvent:
        if self.backlog:
            return self.backlog.pop(0)
        event = await self.queue.get()
        if event is None:
            raise Expired("the watch fell too far behind the cache")
        return event

    def close(self) -> None:
        self.cache._subscribers.discard(self)


class SearchCache:
    def __init__(self) -> None:
        self.active = False  # filled by this process (it leads ``search-cache``)
        self._kinds: dict[CachedKind, _Entries] = {}
        self.revision = 0
        self._history: deque[CacheEvent] = deque(maxlen=HISTORY)
        self._subscribers: set[Subscription] = set()

    def kinds(self) -> list[CachedKind]:
        return list(self._kinds)

    def scope(self, kind: CachedKind, namespaces: Iterable[str]) -> None:
        """Keep ``kind`` from its member, in ``namespaces`` (none: every namespace)."""
        entries = self._kinds.setdefault(kind, _Entries(frozenset(namespaces)))
        entries.scope = frozenset(namespaces)
        for key in [k for k, o in entries.objects.items() if not entries.in_scope(o)]:
            self._changed(kind, "DELETED", entries.objects.pop(key))

    def replace(self, kind: CachedKind, items: Iterable[Obj]) -> None:
        """What a list of the kind returned: everything the member has now."""
        entries = self._kinds.get(kind)
        if entries is None:
            return
        before, versions = entries.objects, entries.member_versions
        entries.objects, entries.member_versions = {}, {}
        for obj in items:
            self._put(kind, entries, obj, before, versions)
        for key in before.keys() - entries.objects.keys():
            self._changed(kind, "DELETED", before[key])

    def apply(self, kind: CachedKind, event: str, obj: Obj) -> None:
        """A watch event (ADDED, MODIFIED, DELETED; BOOKMARKs change nothing)."""
        entries = self._kinds.get(kind)
        if entries is None or event == "BOOKMARK":
            return
        if event == "DELETED":
            meta = obj.get("metadata") or {}
            key = (str(meta.get("namespace") or ""), str(meta.get("name") or ""))
            entries.member_versions.pop(key, None)
            gone = entries.objects.pop(key, None)
            if gone is not None:
                self._changed(kind, "DELETED", gone)
            return
        self._put(kind, entries, obj, entries.objects, entries.member_versions)

    def drop(self, kind: CachedKind) -> None:
        """No registry selects the kind in that member any more: its objects leave the cache."""
        entries = self._kinds.pop(kind, None)
        for obj in (entries.objects.values() if entries is not None else ()):
            self._changed(kind, "DELETED", obj)

    def clear(self) -> None:
        """The term is over: everything leaves, and every watch ends (the next leader lists anew)."""
        self._kinds.clear()
        self._history.clear()
        for sub in list(self._subscribers):
            self._offer(sub, None)

    def _put(self, kind: CachedKind, entries: _Entries, obj: Obj, before: dict[tuple[str, str], Obj],
             versions: dict[tuple[str, str], str]) -> None:
        if not entries.in_scope(obj):
            return
        meta = obj.get("metadata") or {}
        key = (str(meta.get("namespace") or ""), str(meta.get("name") or ""))
        old = before.get(key)
        version = str(meta.get("resourceVersion") or "")
        seen = versions.get(key)
        entries.member_versions[key] = version
        if old is not None and version != "" and seen == version:
            entries.objects[key] = old  # a relist of an unchanged object: no event
            return
        cached = copy.deepcopy(obj)
        cached["apiVersion"], cached["kind"] = kind.api_version, kind.kind  # a list's items carry neither
        cached_meta = cached.setdefault("metadata", {})
        cached_meta["annotations"] = {**(cached_meta.get("annotations") or {}), CACHED_FROM_CLUSTER: kind.cluster}
        entries.objects[key] = cached
        self._changed(kind, "ADDED" if old is None else "MODIFIED", cached)

    def _changed(self, kind: CachedKind, type_: str, obj: Obj) -> None:
        self.revision += 1
        if type_ != "DELETED":
            obj["metadata"]["resourceVersion"] = str(self.revision)
        else:
            obj = {**obj, "metadata": {**obj["metadata"], "resourceVersion": str(self.revision)}}
        event = CacheEvent(self.revision, type_, kind, obj)
        self._history.append(event)
        for sub in list(self._subscribers):
            self._offer(sub, event)

    def _offer(self, sub: Subscription, event: CacheEvent | None) -> None:
        try:
            sub.queue.put_nowait(event)
        except asyncio.QueueFull:  # too far behind: ended, the client lists again
            self._subscribers.discard(sub)
            sub.queue.get_nowait()
            sub.queue.put_nowait(None)

    def subscribe(self, since: int | None) -> Subscription:
        """A watch from revision ``since`` (None: every object now, as ADDED, then what changes).
        Raises `Expired` when changes after ``since`` are no longer all kept."""
        if since is None:
            backlog = [CacheEvent(self.revision, "ADDED", k, o) for k, e in self._kinds.items()
                       for o in e.objects.values()]
        else:
            oldest = self._history[0].revision if self._history else self.revision + 1
            if since > self.revision or since < oldest - 1:
                raise Expired(f"resourceVersion {since} is not kept (the cache keeps {oldest - 1}..{self.revision})")
            backlog = [e for e in self._history if e.revision > since]
        sub = Subscription(self, backlog)
        self._subscribers.add(sub)
        return sub

    def serves(self, group: str, version: str, plural: str) -> CachedKind | None:
        """Some member's kind under that group, version and plural (None: nothing cached as that)."""
        return next((k for k in self._kinds if k.group_version == (group, version) and k.plural == plural), None)

    def find(self, q: Query) -> list[Obj]:
        """The cached objects the query names, ordered by namespace, name and member."""
        candidates: Iterable[tuple[CachedKind, tuple[str, str], Obj]]
        if q.namespace is not None and q.name is not None:  # one object per member: looked up, not scanned
            hits = ((k, (q.namespace, q.name), e.objects.get((q.namespace, q.name))) for k, e in self._kinds.items())
            candidates = ((k, key, o) for k, key, o in hits if o is not None)
        else:
            candidates = self._objects()
        found = [(ns, name, kind.cluster, obj) for kind, (ns, name), obj in candidates if q.matches(kind, obj)]
        return [o for *_, o in sorted(found, key=lambda t: t[:3])]

    def _objects(self) -> Iterator[tuple[CachedKind, tuple[str, str], Obj]]:
        for kind, entries in self._kinds.items():
            for key, obj in entries.objects.items():
                yield kind, key, obj
