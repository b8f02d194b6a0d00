"""The pull-mode agents' view of the Works (M2): one watch of the Works per API server, shared by the
agents' watches, and their lists read without decoding other clusters' Works.

Each agent watches its own cluster's Works, but a store watch sees every Work under the prefix: with a
store watch per agent, each Work written was opened (Works are sealed at rest), decoded and dropped by
every other agent's stream — at 100 members, a hundred times a write. Here one store watch decodes each
event once and hands it to the streams of its cluster, as the Kubernetes API server's watch cache does
for every watcher of a resource.

A stream starts from the revision its agent listed at. The recent events are kept (``backlog``), so a
stream a little behind the shared watch is served from them; one further behind gets a store watch of
its own, as before. A stream whose reader falls ``max_queued`` events behind ends with ``Compacted``
(the agent's watch gets a 410 ``Expired`` and lists again), as a slow watcher is ended by Kubernetes.

A list reads every Work (the store keeps them under one prefix, not by cluster) but decodes only those
it cannot tell are another cluster's: each Work's cluster is remembered with the revision it was seen
at, from the shared watch and from earlier lists, and trusted only while the stored Work is still at
that revision. Agents list when they start and after a 410: when many start at once, each list decoded
every Work, a hundred times the Works at 100 members; now the first list decodes them, the others
their own.
"""

from __future__ import annotations

import asyncio
import logging
import sys
from collections import deque
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

from drods.api.streaming import until_stopped
from drods.machinery.tasks import yielding
from drods.model.kinds import WORK
from drods.model.selector import LabelSelector
from drods.registry.objects import ObjectRegistry
from drods.store import Compacted

log = logging.getLogger(__name__)
Obj = dict[str, Any]
_Event = tuple[int, str, Obj]  # revision, event type, object


@dataclass(eq=False, slots=True)
class _Stream:
    selector: LabelSelector | None
    queue: asyncio.Queue[_Event | None] = field(default_factory=asyncio.Queue)

    def wants(self, obj: Obj) -> bool:
        return self.selector is None or self.selector.matches((obj.get("metadata") or {}).get("labels") or {})


BACKLOG = 1024
MAX_QUEUED = 10_000


class WorkWatches:
    def __init__(self, registry: ObjectRegistry, stopping: asyncio.Event, *, backlog: int = BACKLOG,
                 max_queued: int = MAX_QUEUED) -> None:
        self.registry = registry
        self.stopping = stopping
        self.max_queued = max_queued
        self._streams: dict[str, set[_Stream]] = {}
        self._recent: deque[tuple[str, _Event]] = deque(maxlen=backlog)  # (cluster, event)
        self._since = 0  # the shared watch has handed on every Work event after this revision
        self._task: asyncio.Task[None] | None = None
        self._cluster_of: dict[str, tuple[str, int]] = {}  # Work key -> its cluster, at that revision

    async def list(self, cluster: str, selector: LabelSelector | None = None) -> tuple[list[Obj], int]:
        """``cluster``'s Works (with ``selector`` matched on the labels) and the revision they were read
        at, as `ObjectRegistry.list` returns them."""
        kvs, revision = await self.registry.store.range(WORK.key_prefix())
        known, seen = self._cluster_of, {}
        items: list[Obj] = []
        async for kv in yielding(kvs):
            obj, at = None, known.get(kv.key)
            if at is None or at[1] != kv.mod_revision:
                obj = self.registry.decode(WORK, kv)
                at = (_cluster(obj), kv.mod_revision)
            seen[kv.key] = at
            if at[0] != cluster:
                continue
            obj = obj or self.registry.decode(WORK, kv)
            if selector is None or selector.matches(obj["metadata"].get("labels") or {}):
                items.append(obj)
        self._cluster_of = seen  # the Works there are now: those deleted meanwhile are forgotten
        return items, revision

    def watch(self, cluster: str, after: int, selector: LabelSelector | None = None
              ) -> AsyncIterator[tuple[str, Obj]]:
        """``cluster``'s Work events after revision ``after`` (> 0), as `ObjectRegistry.watch` yields them
        (with ``selector`` matched on the labels)."""
        if self._task is None or self._task.done():
            self._since = after
            self._task = asyncio.create_task(self._run(after), name="work-watches")
        if after < self._since:  # further behind than what is kept
            return self.registry.watch(WORK, None, after, selector)
        stream = _Stream(selector)
        for c, ev in self._recent:  # no await from here on: nothing is handed on in between
            if c == cluster and ev[0] > after and stream.wants(ev[2]):
                stream.queue.put_nowait(ev)
        self._streams.setdefault(cluster, set()).add(stream)
        return self._read(cluster, stream, after)

    async def _read(self, cluster: str, stream: _Stream, after: int) -> AsyncIterator[tuple[str, Obj]]:
        try:
            while True:
                ev = await stream.queue.get()
                if ev is None:
                    raise Compacted(after)
                rev, etype, obj = ev
                if rev <= after:
                    continue  # listed already: the shared watch was behind the agent's list
                after = rev
                yield etype, obj
        finally:
            streams = self._streams.get(cluster)
            if streams is not None:
                streams.discard(stream)
                if not streams:
                    del self._streams[cluster]

    async def _run(self, after: int) -> None:
        events = self.registry.watch(WORK, None, after)
        try:
            async for etype, obj in until_stopped(self.stopping, events):
                self._hand_on(etype, obj)
        except Exception as e:  # noqa: BLE001 - every stream ends; the next agent watch starts a new one
            log.info("the shared watch of the Works ended (%s); its %d streams end with it", e,
                     sum(len(s) for s in self._streams.values()))
        finally:
            await events.aclose()  # type: ignore[attr-defined]
            for streams in list(self._streams.values()):
                for stream in list(streams):
                    stream.queue.put_nowait(None)
            self._streams.clear()
            self._recent.clear()

    def _hand_on(self, etype: str, obj: Obj) -> None:
        rev = int(obj["metadata"]["resourceVersion"])
        cluster = _cluster(obj)
        key = WORK.key(str(obj["metadata"]["name"]))
        if etype == "DELETED":
            self._cluster_of.pop(key, None)
        else:
            self._cluster_of[key] = (cluster, rev)
        ev = (rev, etype, obj)
        if len(self._recent) == self._recent.maxlen:
            self._since = self._recent[0][1][0]
        self._recent.append((cluster, ev))
        for stream in list(self._streams.get(cluster, ())):
            if not stream.wants(obj):
                continue
            if stream.queue.qsize() >= self.max_queued:
                self._streams[cluster].discard(stream)
                stream.queue.put_nowait(None)  # its reader is too far behind: it lists again
            else:
                stream.queue.put_nowait(ev)


def _cluster(work: Obj) -> str:
    return sys.intern(str((work.get("spec") or {}).get("cluster") or ""))
