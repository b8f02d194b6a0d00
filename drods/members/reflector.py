"""List, then watch from the listing's resourceVersion, against a member (client-go's Reflector): the one
loop under the member-side caches (`drods.members.pod_cache`, `drods.members.copy_watch`,
`drods.members.foreign_names`) and the work-status controller's watches.

A listing replaces what its user holds; each watch event is applied after it, on the event loop (the
member client delivers events from a worker thread). When the member no longer has the history a
watch asked for (410) it lists again at once; after any other failure, ``retry_seconds`` later, not
``synced`` meanwhile: its users fall back to listing on their own until it is.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import random
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, Generic, Protocol, TypeVar

Obj = dict[str, Any]
Deliver = Callable[[str, Obj], None]  # (event type, object), from a worker thread
T = TypeVar("T")
log = logging.getLogger(__name__)


def _same(obj: Obj) -> Any:
    return obj


def without_managed_fields(obj: Obj) -> Obj:
    """``obj`` without ``metadata.managedFields`` (a quarter of a Deployment as a member returns it),
    which no reader of a member's copies uses: client-go's informers drop it with the same transform."""
    meta = obj.get("metadata")
    if not isinstance(meta, dict) or "managedFields" not in meta:
        return obj
    return {**obj, "metadata": {k: v for k, v in meta.items() if k != "managedFields"}}


@dataclass(kw_only=True)
class Reflector(Generic[T]):
    """One list-and-watch loop: `start` and `stop` it (or `run` it in a task of one's own)."""

    name: str  # what it follows, for the log
    list_call: Callable[[], Awaitable[tuple[list[Obj], str]]]  # → (the objects, the resourceVersion to watch from)
    watch_call: Callable[[str, float, Deliver], Awaitable[str]]  # (rv, seconds, deliver) → the last rv seen
    replace: Callable[[list[T]], bool | None]  # a listing, transformed; False: nobody wants it, the reflector ends
    apply: Callable[[str, T], None]  # an event, transformed, on the event loop
    transform: Callable[[Obj], T] = _same  # what is kept of an object (of an event's, in the worker thread)
    unsynced: Callable[[], None] = lambda: None  # after each failure, and when cancelled
    expired: Callable[[BaseException], bool] = lambda _e: False  # the member no longer has the history (410)
    expired_unsynced: bool = False  # an expiry when not synced (the listing's) lists again at once too
    resync: bool = False  # list again after each watch length, instead of watching on from its rv
    watch_seconds: float  # the longest a watch request runs (each one between half of it and all of it)
    retry_seconds: float
    synced: bool = field(default=False, init=False)  # listed, and the watch goes on from that listing
    _task: asyncio.Task[None] | None = field(default=None, init=False, repr=False)

    def start(self) -> asyncio.Task[None]:
        """`run` in a task on the running loop, not synced until it has listed again (what it held from
        a run on a loop that ended is not current)."""
        self.synced = False
        self._task = asyncio.get_running_loop().create_task(self.run(), name=self.name)
        return self._task

    def _on_this_loop(self) -> bool:
        try:
            return self._task is not None and self._task.get_loop() is asyncio.get_running_loop()
        except RuntimeError:
            return False

    @property
    def running(self) -> bool:
        """Started on the running loop, and not ended."""
        return self._on_this_loop() and self._task is not None and not self._task.done()

    @property
    def following(self) -> bool:
        """Synced, on the running loop: a reflector left on a loop that ended is not current."""
        return self.synced and self._on_this_loop()

    def cancel(self) -> asyncio.Task[None] | None:
        """Cancel the task `start` made, without waiting for it; that task."""
        task, self._task = self._task, None
        self.synced = False
        if task is not None:
            with contextlib.suppress(RuntimeError):  # its loop has ended: nothing runs it any more
                task.cancel()
        return task

    async def stop(self) -> None:
        """`cancel`, and wait for the task when it is on the running loop."""
        here = self._on_this_loop()
        task = self.cancel()
        if task is not None and here:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task

    def watch_length(self) -> float:
        """One watch request's length, drawn between half of ``watch_seconds`` and all of it (client-go
        draws its own between one and two minimum timeouts): the watches of members joined together
        would otherwise end, and with ``resync`` list their kinds again, all at once every length."""
        return self.watch_seconds * random.uniform(0.5, 1.0)

    async def run(self) -> None:
        loop = asyncio.get_running_loop()

        def deliver(event: str, obj: Obj) -> None:  # a worker thread of the member's client
            loop.call_soon_threadsafe(self.apply, event, self.transform(obj))

        while True:
            try:
                items, rv = await self.list_call()
                if self.replace([self.transform(o) for o in items]) is False:
                    return
                self.synced = True
                rv = await self.watch_call(rv, self.watch_length(), deliver)
                while not self.resync:
                    rv = await self.watch_call(rv, self.watch_length(), deliver)
                continue  # the watch ran its length: list again (a resync) and go on
            except BaseException as e:  # a broken or refused watch: list again (its users list meanwhile)
                was_synced, self.synced = self.synced, False
                self.unsynced()
                if not isinstance(e, Exception):  # cancelled
                    raise
                if (was_synced or self.expired_unsynced) and self.expired(e):
                    continue
                log.debug("%s: following failed: %s", self.name, e)
            await asyncio.sleep(self.retry_seconds)


class KindMember(Protocol):
    """What `KindCalls` calls on a member (`drods.members.client.MemberClient`)."""

    def resource(self, api_version: str, kind: str) -> Awaitable[Any]: ...

    def list_versioned(self, res: Any, label_selector: str | None = ...) -> Awaitable[tuple[list[Obj], str]]: ...

    def watch_from(self, res: Any, resource_version: str, seconds: float, deliver: Deliver,
                   label_selector: str | None = ...) -> Awaitable[str]: ...


@dataclass
class KindCalls:
    """A reflector's calls for one kind's objects that ``selector`` selects, on the member ``member()``
    gives at each listing (it may raise: no member); the watches go to the member and resource listed."""

    member: Callable[[], KindMember]
    kind: tuple[str, str]  # (apiVersion, kind)
    selector: str
    _listed: tuple[KindMember, Any] | None = field(default=None, init=False, repr=False)

    async def list(self) -> tuple[list[Obj], str]:
        member = self.member()
        res = await member.resource(*self.kind)
        self._listed = member, res
        return await member.list_versioned(res, self.selector)

    async def watch(self, resource_version: str, seconds: float, deliver: Deliver) -> str:
        assert self._listed is not None, "watched before listing"
        member, res = self._listed
        return await member.watch_from(res, resource_version, seconds, deliver, self.selector)
