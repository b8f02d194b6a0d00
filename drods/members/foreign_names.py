"""The names of a member's objects that DRO-DS did not create, per kind: listed once, then followed by
a watch (Karmada's execution controller answers the same question from its member informers' caches).

Before DRO-DS first applies an object to a member it must know whether the member already holds one
by that name that is not DRO-DS's: that is a conflict, left alone unless the manifest says
``overwrite``. The execution controller and the pull agent used to ask with a GET of each object,
so at a cold start each Work's two objects took four calls where two would do (a tenth of the
control plane's CPU went to those GETs). Followed, the answer is a set lookup: a watch of the kind
whose label selector (`FOREIGN_SELECTOR`) brings only the objects without DRO-DS's label, names kept.

A kind is followed while it holds one of the member client's watch threads (``max_kinds`` of them;
a kind not asked about for ``idle_seconds`` gives its thread to another). While a kind is not followed
— not yet listed, its watch broken and waiting to list again, no thread free, a kind the member does
not serve — `absent` answers None and the caller GETs as before. A name the set holds is checked
with a GET too: the object may have been adopted since.

The window this leaves is the watch's lag: an unmanaged object created in the member moments before
DRO-DS's first apply, whose event has not arrived yet, is taken as absent and applied over (with the
GET, the window was that call's round trip). Karmada's cache-based check has the same window.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

from drods.members.reflector import KindCalls, KindMember, Reflector
from drods.model.annotations import FOREIGN_SELECTOR

Obj = dict[str, Any]
Kind = tuple[str, str]  # (apiVersion, kind)
Key = tuple[str, str]  # (namespace, name)

WATCH_SECONDS = 60.0  # one watch request's length; then it is made again from where it stopped
RETRY_SECONDS = 5.0  # after a failure, listing the kind again waits this long
IDLE_SECONDS = 300.0  # a kind not asked about this long gives its watch thread to another
MAX_KINDS = 2  # kinds followed at once per member (the Deployment and ConfigMap of a typical Work)


class ForeignSource(KindMember, Protocol):
    """The member the follower lists and watches (`drods.members.client.MemberClient`)."""

    name: str


def _key(obj: Obj) -> Key:
    meta = obj.get("metadata") or {}
    return str(meta.get("namespace") or ""), str(meta.get("name") or "")


@dataclass
class _Followed:
    reflector: Reflector[Key]  # its synced: listed, and the watch goes on from that listing
    asked: float  # monotonic time of the last question about the kind
    names: set[Key] = field(default_factory=set)


class ForeignNames:
    """Per kind, the (namespace, name) of every object of one member without DRO-DS's label."""

    def __init__(self, source: ForeignSource, *, expired: Callable[[BaseException], bool] = lambda _e: False,
                 max_kinds: int = MAX_KINDS, idle_seconds: float = IDLE_SECONDS,
                 watch_seconds: float = WATCH_SECONDS, retry_seconds: float = RETRY_SECONDS,
                 clock: Callable[[], float] = time.monotonic) -> None:
        """``expired``: whether a watch's failure says the member no longer has its history (410):
        then the kind is listed again at once, after any other failure ``retry_seconds`` later."""
        self.source = source
        self.expired = expired
        self.max_kinds = max_kinds
        self.idle_seconds = idle_seconds
        self.watch_seconds = watch_seconds
        self.retry_seconds = retry_seconds
        self.clock = clock
        self._kinds: dict[Kind, _Followed] = {}
        self._stopped = False  # its member client closed: nothing is followed again
        self.lists = 0  # listings made (each kind's first, and each after a broken watch)

    def absent(self, api_version: str, kind: str, name: str, namespace: str | None) -> bool | None:
        """True when the member surely holds no object of the kind by that name that is not DRO-DS's
        (so a first apply needs no GET); None when that is not known (GET). Asking starts following
        the kind, on the running event loop, when a watch thread is free."""
        k = (api_version, kind)
        now = self.clock()
        followed = self._kinds.get(k)
        if followed is None or not followed.reflector.running:
            followed = self._start(k, now)
            if followed is None:
                return None
        followed.asked = now
        if not followed.reflector.synced:
            return None
        if namespace:
            return (namespace, name) not in followed.names
        # no namespace: a cluster-scoped kind's, or a namespaced kind's that the member puts in "default"
        return ("", name) not in followed.names and ("default", name) not in followed.names

    def following(self, api_version: str, kind: str) -> bool:
        followed = self._kinds.get((api_version, kind))
        return followed is not None and followed.reflector.synced

    def _start(self, kind: Kind, now: float) -> _Followed | None:
        self._kinds.pop(kind, None)
        if self._stopped:
            return None
        if len(self._kinds) >= self.max_kinds:
            if not self._kinds:
                return None  # follows no kind: every first apply reads
            idle = min(self._kinds, key=lambda k: self._kinds[k].asked)
            if now - self._kinds[idle].asked < self.idle_seconds:
                return None
            self._kinds.pop(idle).reflector.cancel()
        try:
            asyncio.get_running_loop()
        except RuntimeError:
            return None

        def replace(keys: list[Key]) -> bool:  # False: its entry was replaced while it listed
            self.lists += 1
            if self._kinds.get(kind) is not followed:
                return False
            followed.names = set(keys)
            return True

        calls = KindCalls(lambda: self.source, kind, FOREIGN_SELECTOR)
        reflector = Reflector[Key](
            name=f"{self.source.name} foreign {kind[1]}", transform=_key, replace=replace,
            list_call=calls.list, watch_call=calls.watch, apply=lambda event, key: self._apply(kind, event, key),
            expired=self.expired, watch_seconds=self.watch_seconds, retry_seconds=self.retry_seconds)
        followed = _Followed(reflector, now)
        self._kinds[kind] = followed
        reflector.start()
        return followed

    async def stop(self) -> None:
        self._stopped = True
        followed, self._kinds = list(self._kinds.values()), {}
        await asyncio.gather(*(f.reflector.stop() for f in followed))

    def _apply(self, kind: Kind, event: str, key: Key) -> None:
        followed = self._kinds.get(kind)
        if followed is None:
            return
        if event == "DELETED":
            followed.names.discard(key)
        elif event in ("ADDED", "MODIFIED"):
            followed.names.add(key)
