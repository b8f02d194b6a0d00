"""The manager: one owner of a control-plane process (controller-runtime's shape, A2/A3/A6).

It owns the store, the object registry and one shared informer per key prefix; it runs
*runnables* — every replica's (``add``) and single-active ones (``add_leader``) — restarting a
crashed one with backoff, and stops them all before the store closes. Every controller, whether
driven key by key (`drods.machinery.controller`) or pass by pass (`drods.machinery.periodic`), is
one such runnable: its reconciles are counted in the manager's `ReconcileMetrics`, and what it
must have done before the process serves (``ready``) is part of `readiness` (``/readyz``).

A single-active runnable is built only while this process leads its lease, from a `Leadership`:
the fence, and a store and registry whose every write carries it. A replica that lost the lease
cannot write, even if it has not noticed yet; a replica restarted with the same identity gets a
new generation, so the old one's writes fail too.

Components get what they use as typed constructor arguments from the code that registers them
(`drods.assembly`); nothing here is looked up by name.
"""

from __future__ import annotations

import asyncio
import logging
import os
import socket
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

from drods.machinery import metrics
from drods.machinery.fence import Fence, FencedStore
from drods.machinery.informer import Decode, Informer
from drods.machinery.leader import LeaderElector
from drods.machinery.looplag import LoopLag
from drods.machinery.memory import HeapReturn
from drods.machinery.shared import SharedInformers
from drods.machinery.tasks import stop_tasks
from drods.registry import changes
from drods.registry.objects import ObjectRegistry
from drods.store import Store, Unavailable

log = logging.getLogger(__name__)


class Runnable(Protocol):
    async def run(self) -> None:
        """Run until cancelled (returning normally means: done, do not restart)."""


@runtime_checkable
class ReportsReady(Protocol):
    """A runnable the process is not ready without (e.g. the scheduler until its caches are warm)."""

    ready: asyncio.Event


@dataclass(frozen=True, slots=True)
class Leadership:
    """What a single-active runnable is built from while this process leads ``name``."""

    name: str
    fence: Fence
    store: Store
    registry: ObjectRegistry
    # still leading by this process's clock (`LeaderElector.fresh`): the guard of writes the store
    # cannot fence, such as applies to member clusters
    fresh: Callable[[], bool] = lambda: True

    @property
    def generation(self) -> int:
        """The leadership generation: recorded on what this term writes (e.g. each Work)."""
        return self.fence.generation


LeaderFactory = Callable[[Leadership], Runnable]


def default_identity() -> str:
    return f"{socket.gethostname()}-{os.getpid()}-{uuid.uuid4().hex[:6]}"


@dataclass
class _Entry:
    name: str
    runnable: Runnable | None = None
    factory: LeaderFactory | None = None
    elector: LeaderElector | None = None


@dataclass(slots=True)
class RestartBackoff:
    """How long a crashed runnable waits before it runs again: doubling from ``first`` up to ``cap``, and
    from ``first`` again once a run lasted ``cap`` (a crash after a good while is a new fault, not the last
    one again: after one etcd outage a scheduler waited 30 s at its next one's first crash). A store outage
    waits at most ``store_cap``: the runnable is back within seconds of the store."""

    first: float = 0.5
    cap: float = 30.0
    store_cap: float = 4.0
    _next: float = 0.0

    def after(self, ran_s: float, *, store_away: bool) -> float:
        if self._next <= 0.0 or ran_s >= self.cap:
            self._next = self.first
        delay = min(self._next, self.store_cap) if store_away else self._next
        self._next = min(self._next * 2, self.cap)
        return delay


class Manager:
    def __init__(self, store: Store, registry: ObjectRegistry, *, identity: str | None = None,
                 lease_ttl: int = 10, max_backoff: float = 30.0) -> None:
        self.store = store
        self.registry = registry
        self.identity = identity or default_identity()
        self.lease_ttl = lease_ttl
        self.max_backoff = max_backoff
        self.informers = SharedInformers(store)
        self.metrics = metrics.ReconcileMetrics()
        self.metrics.registry.register(metrics.LeasesHeld(
            lambda: {e.name: e.elector.fence is not None for e in self._entries if e.elector is not None}))
        self.loop_lag = LoopLag(self.metrics.registry)
        self.heap_return = HeapReturn(self.metrics.registry)
        self.audit_sink: changes.Sink | None = None
        self._entries: list[_Entry] = []
        self._tasks: list[asyncio.Task[None]] = []

    # ---------------------------------------------------------------- registration
    def informer(self, prefix: str, decode: Decode) -> Informer:
        """The process's informer of ``prefix`` decoded by ``decode``: one watch however many read it."""
        return self.informers.informer(prefix, decode)

    def add(self, name: str, runnable: Runnable) -> None:
        """Run ``runnable`` on every replica."""
        self._entries.append(_Entry(name, runnable=runnable))

    def add_leader(self, name: str, factory: LeaderFactory) -> None:
        """Run ``factory(leadership).run()`` only while this process holds ``/leases/<name>``."""
        elector = LeaderElector(self.store, name, self.identity, ttl=self.lease_ttl)
        self._entries.append(_Entry(name, factory=factory, elector=elector))

    def fence(self, name: str) -> Fence | None:
        """This process's fence for ``name`` while it leads, else None."""
        for e in self._entries:
            if e.name == name and e.elector is not None:
                return e.elector.fence
        return None

    @property
    def names(self) -> list[str]:
        return [e.name for e in self._entries]

    def readiness(self) -> dict[str, bool]:
        """This process's readiness checks (``/readyz``): the shared informers have listed, and each
        every-replica runnable that reports readiness is ready. A single-active runnable is not one:
        a standby is ready too."""
        checks = {"informers": self.informers.synced}
        for e in self._entries:
            if e.runnable is not None and isinstance(e.runnable, ReportsReady):
                checks[e.name] = e.runnable.ready.is_set()
        return checks

    # ---------------------------------------------------------------- running
    async def run(self) -> None:
        """Start the informers and runnables; stop everything when cancelled."""
        try:
            self._spawn("informers", self.informers.run)
            self._spawn("event-loop-lag", self.loop_lag.run)
            self._spawn("heap-return", self.heap_return.run)
            for e in self._entries:
                self._spawn(e.name, self._body(e))
            await asyncio.Event().wait()
        finally:
            await stop_tasks(self._tasks)
            self._tasks.clear()

    def _body(self, e: _Entry) -> Callable[[], object]:
        if e.runnable is not None:
            return e.runnable.run
        assert e.factory is not None and e.elector is not None
        factory, elector = e.factory, e.elector

        async def lead(fence: Fence) -> None:
            fenced = FencedStore(self.store, fence)
            leadership = Leadership(e.name, fence, fenced, self.registry.with_store(fenced), elector.fresh)
            await factory(leadership).run()

        return lambda: elector.run(lead)

    def _spawn(self, name: str, body: Callable[[], object]) -> None:
        self._tasks.append(asyncio.create_task(self._supervise(name, body), name=name))

    async def _supervise(self, name: str, body: Callable[[], object]) -> None:
        """Restart a crashed runnable with backoff: one component's bug never stops the others."""
        if self.audit_sink is not None:
            changes.COMPONENT.set((name, self.audit_sink))  # its writes are audited under its name
        metrics.CURRENT.set(self.metrics)  # its controllers' reconciles are counted here
        backoff = RestartBackoff(cap=self.max_backoff)
        loop = asyncio.get_running_loop()
        while True:
            started = loop.time()
            try:
                await body()  # type: ignore[misc]
                return
            except asyncio.CancelledError:
                raise
            except Unavailable as e:  # the store is away (an etcd restart): no fault of the runnable's
                delay = backoff.after(loop.time() - started, store_away=True)
                log.warning("%s: the store is unavailable (%s); restarting in %.1fs", name, e, delay)
                await asyncio.sleep(delay)
            except Exception:
                delay = backoff.after(loop.time() - started, store_away=False)
                log.exception("%s crashed; restarting in %.1fs", name, delay)
                await asyncio.sleep(delay)
