"""A process's shared informers: one watch per key prefix, one cache per (prefix, decoder).

controller-runtime's manager shares one cache between its controllers; here the manager owns one
`SharedInformers` and every component asks it for what it reads. Components that decode a prefix
the same way share one informer (one cache); different decoders of a prefix share the prefix's one
list and watch (`Reflector`) and keep only their own decoded form, so nothing is cached twice in
the same shape and no prefix is watched twice (each watch is a store subscription: a store wakes
every watch of a prefix on each write under it).
"""

from __future__ import annotations

import asyncio

from drods.machinery.informer import Decode, Informer, KeptEncoded, Reflector
from drods.machinery.tasks import stop_tasks
from drods.model.packing import Packer
from drods.registry.objects import decode_stored
from drods.store import Store

# How every reader caches the workload templates (every template kind's prefix and the custom
# resources'): kept as stored, packed, decoded on each read. Each reader passes this one decoder, so
# the templates are held once.
decode_template = KeptEncoded(decode_stored, Packer())


class SharedInformers:
    def __init__(self, store: Store) -> None:
        self.store = store
        self._informers: dict[tuple[str, Decode], Informer] = {}
        self._reflectors: dict[str, Reflector] = {}
        self._tasks: list[asyncio.Task[None]] = []
        self._running = False

    def informer(self, prefix: str, decode: Decode) -> Informer:
        """The process's informer of ``prefix`` decoded by ``decode``; fed by the prefix's one watch."""
        key = (prefix, decode)
        inf = self._informers.get(key)
        if inf is not None:
            return inf
        inf = self._informers[key] = Informer(self.store, prefix, decode)
        reflector = self._reflectors.get(prefix)
        if reflector is None:
            reflector = self._reflectors[prefix] = Reflector(self.store, prefix, [inf])
            if self._running:
                self._start(reflector)
        else:
            reflector.add(inf)
        return inf

    def decoders(self, prefix: str) -> list[Decode]:
        """How ``prefix`` is decoded in this process: one cache each."""
        return [decode for (p, decode) in self._informers if p == prefix]

    @property
    def prefixes(self) -> list[str]:
        return list(self._reflectors)

    @property
    def synced(self) -> bool:
        """Every informer has listed its prefix once."""
        return all(inf.synced for inf in self._informers.values())

    async def run(self) -> None:
        """Watch every prefix until cancelled (prefixes asked for later start at once)."""
        self._running = True
        try:
            for reflector in list(self._reflectors.values()):
                self._start(reflector)
            await asyncio.Event().wait()
        finally:
            self._running = False
            await stop_tasks(self._tasks)
            self._tasks.clear()

    def _start(self, reflector: Reflector) -> None:
        self._tasks.append(asyncio.create_task(reflector.run(), name=f"informer {reflector.prefix}"))
