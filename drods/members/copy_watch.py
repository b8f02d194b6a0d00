"""A pull agent's view of its DRO-DS copies in the member, one kind at a time: listed once, then
followed by a watch (Karmada's agent keeps informers on the member for the same reason).

The agent reports each Work's status as the member shows it. It used to list every kind its Works
hold on each pass — every few seconds, and again on each Work event: with 100 agents in one process,
~70 lists a second while idle, and a fifth of the agents' time under a stream of changes spent
listing and decoding copies that had not changed. Followed, a copy costs its events; each event
wakes the agent (``on_change``), so a copy's new status is reported when it happens.

A kind is followed only while it holds one of the member client's watch threads (the pod cache holds
another: `drods.members.pod_cache`); the agent lists the kinds not followed (more than
``MAX_FOLLOWED``, a watch that broke and waits to list again, a member that serves no watch) as before.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable, Iterable
from typing import Any

from drods.members.client import COPY_WATCHES, MemberClient, history_gone
from drods.members.reflector import KindCalls, Reflector, without_managed_fields
from drods.model.annotations import MANAGED_SELECTOR

Obj = dict[str, Any]
Kind = tuple[str, str]  # (apiVersion, kind)
Key = tuple[str, str]  # (namespace, name)

WATCH_SECONDS = 60.0  # one watch request's length; then the kind is listed again (a resync) and followed
RETRY_SECONDS = 5.0  # after a failure, listing again waits this long
MAX_FOLLOWED = COPY_WATCHES  # kinds followed at once: one watch thread of the member client's each


def _key(obj: Obj) -> Key:
    meta = obj.get("metadata")
    meta = meta if isinstance(meta, dict) else {}
    return str(meta.get("namespace") or ""), str(meta.get("name") or "")


class FollowedCopies:
    """The member's DRO-DS-managed objects of the kinds followed, by (namespace, name)."""

    def __init__(self, member: MemberClient, on_change: Callable[[], None], *,
                 watch_seconds: float = WATCH_SECONDS, retry_seconds: float = RETRY_SECONDS,
                 max_followed: int = MAX_FOLLOWED) -> None:
        self.member = member
        self.on_change = on_change
        self.watch_seconds = watch_seconds
        self.retry_seconds = retry_seconds
        self.max_followed = max_followed
        self._copies: dict[Kind, dict[Key, Obj]] = {}
        self._synced: set[Kind] = set()  # listed, and the watch goes on from that listing
        self._tasks: dict[Kind, asyncio.Task[None]] = {}
        self._modified: dict[tuple[Kind, Key], Obj] = {}  # copies changed in the member since `take_modified`
        self.lists = 0  # listings made (each kind's first, one a watch length, each after a failure)

    def follow(self, kinds: Iterable[Kind]) -> None:
        """Follow ``kinds`` (the first ``max_followed`` of them in order); stop following the others."""
        want = list(dict.fromkeys(kinds))[: self.max_followed]
        for kind in set(self._tasks) - set(want):
            self._tasks.pop(kind).cancel()
            self._forget(kind)
        for kind in want:
            task = self._tasks.get(kind)
            if task is None or task.done():
                self._tasks[kind] = asyncio.get_running_loop().create_task(
                    self._reflector(kind).run(), name=f"copies-{self.member.name}-{kind[1]}")

    def listed(self, kind: Kind) -> dict[Key, Obj] | None:
        """The copies of ``kind`` while it is followed (shared: read, don't change); None: list it."""
        return self._copies.get(kind) if kind in self._synced else None

    def applied(self, obj: Obj) -> None:
        """An object the agent just applied, as the member returned it: held at once, so a status read
        before its watch event does not take it for deleted."""
        kind = (str(obj.get("apiVersion")), str(obj.get("kind")))
        if kind in self._synced:
            self._copies[kind][_key(obj)] = without_managed_fields(obj)

    def take_modified(self) -> list[Obj]:
        """The copies a watch brought as changed since the last call (each as it is now)."""
        out, self._modified = list(self._modified.values()), {}
        return out

    async def close(self) -> None:
        tasks, self._tasks = list(self._tasks.values()), {}
        for t in tasks:
            t.cancel()
        for t in tasks:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await t
        self._copies.clear()
        self._synced.clear()

    def _forget(self, kind: Kind) -> None:
        self._synced.discard(kind)
        self._copies.pop(kind, None)

    def _listed(self, kind: Kind, items: list[Obj]) -> None:
        self.lists += 1
        self._copies[kind] = {_key(it): it for it in items}
        self._synced.add(kind)

    def _event(self, kind: Kind, event: str, obj: Obj) -> None:
        held = self._copies.get(kind)
        if held is None or kind not in self._synced:
            return
        if event == "DELETED":
            held.pop(_key(obj), None)
            self._modified.pop((kind, _key(obj)), None)
        elif event in ("ADDED", "MODIFIED"):
            held[_key(obj)] = obj
            if event == "MODIFIED":
                self._modified[(kind, _key(obj))] = obj
        else:
            return
        self.on_change()

    def _reflector(self, kind: Kind) -> Reflector[Obj]:
        """The kind listed, watched for a watch length, then listed again (a resync); while a failure
        leaves it not listed, the agent lists it (`listed` answers None)."""
        calls = KindCalls(lambda: self.member, kind, MANAGED_SELECTOR)
        return Reflector[Obj](
            name=f"{self.member.name} {kind[1]}", list_call=calls.list, watch_call=calls.watch,
            transform=without_managed_fields,
            replace=lambda items: self._listed(kind, items), apply=lambda e, obj: self._event(kind, e, obj),
            unsynced=lambda: self._forget(kind), resync=True, expired=history_gone, expired_unsynced=True,
            watch_seconds=self.watch_seconds, retry_seconds=self.retry_seconds)
