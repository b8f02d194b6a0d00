"""The namespace controller: a deleted Namespace takes everything stored in it along (kube-controller-manager's).

Deleting a Namespace only marks it Terminating (`drods.model.namespaces`): the registry refuses new
content in it from then on, and this controller deletes what it holds (`CONTENT_GRACE_SECONDS` later)
— every namespaced kind the process's `KindCatalog` knows, built-in and custom — then removes the
``kubernetes`` finalizer, and
the Namespace goes. An object held by finalizers of its own is only marked by that delete and waited
for: the namespace is looked at again every `RECHECK_SECONDS` until nothing is left. Deleting the
templates is all it takes for the members: the detector deletes their Bindings, whose finalizers
remove the copies.

Single-active (lease ``namespace-controller``); level-triggered: a pass over a namespace deletes what
is left and is safe to repeat, so a new leader simply goes over every Terminating namespace again.
"""

from __future__ import annotations

import contextlib
import logging
import time
from collections.abc import Callable, Hashable
from dataclasses import dataclass, field
from typing import Any

from drods.errors import AlreadyExists, Conflict, NotFound
from drods.machinery.controller import Controller
from drods.machinery.informer import Informer, subscribed, wait_synced
from drods.machinery.manager import Manager
from drods.model.kinds import CUSTOM_RESOURCE_DEFINITION, Kind
from drods.model.namespaces import (
    FINALIZE,
    FINALIZER,
    NAMESPACE,
    SYSTEM,
    deletion_conditions,
    spec_finalizers,
    terminating,
    without_finalizer,
)
from drods.model.timefmt import now_rfc3339
from drods.registry.catalog import KindCatalog
from drods.registry.objects import Obj, ObjectRegistry, decode_stored

log = logging.getLogger(__name__)

LEASE = "namespace-controller"
RECHECK_SECONDS = 1.0  # while objects held by their own finalizers remain (their controllers are at work)
# How long a namespace is Terminating before its objects are deleted: ``kubectl delete -f`` of a file that
# starts with its Namespace deletes the objects after it one by one, and each must still be found (on
# kube-apiserver the namespace controller's discovery pass leaves that time; here a pass is at once).
CONTENT_GRACE_SECONDS = 2.0


class NamespaceController:
    """Empties a Terminating namespace, then lets it go (see the module docstring)."""

    def __init__(self, registry: ObjectRegistry, *, namespaces: Informer, definitions: Informer,
                 catalog: KindCatalog, workers: int = 2, grace_seconds: float = CONTENT_GRACE_SECONDS,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.registry = registry
        self.grace_seconds = grace_seconds
        self.clock = clock
        self._terminating_since: dict[str, float] = {}  # when this process first saw each one Terminating
        self.namespaces = namespaces
        self.definitions = definitions  # the catalog learns custom kinds from it: synced before a pass
        self.catalog = catalog
        self.controller = Controller(LEASE, self.reconcile, workers=workers)

    @staticmethod
    def informers(manager: Manager) -> dict[str, Any]:
        """The shared informers it reads, as keyword arguments of its constructor."""
        return {"namespaces": manager.informer(NAMESPACE.key_prefix(), decode_stored),
                "definitions": manager.informer(CUSTOM_RESOURCE_DEFINITION.key_prefix(), decode_stored)}

    async def run(self) -> None:
        with subscribed((self.namespaces, self._on_namespace)):
            await wait_synced(self.namespaces, self.definitions)
            await self.ensure_system()
            for key, obj in list(self.namespaces.cache.items()):
                self._on_namespace(key, None, obj)
            await self.controller.run()

    def _on_namespace(self, key: str, old: Any, new: Any) -> None:
        if isinstance(new, dict) and terminating(new) and FINALIZER in spec_finalizers(new):
            self.controller.queue.add(key.rsplit("/", 1)[-1])

    async def ensure_system(self) -> None:
        """Create the `SYSTEM` namespaces not stored yet, as kube-apiserver does at its start: a
        Kubernetes user expects ``kubectl get ns default`` to answer from the first start on."""
        for name in SYSTEM:
            if NAMESPACE.key(name) in self.namespaces.cache:
                continue
            with contextlib.suppress(AlreadyExists):
                await self.registry.create(NAMESPACE, {"apiVersion": "v1", "kind": "Namespace",
                                                       "metadata": {"name": name}})
                log.info("created the system namespace %s", name)

    def kinds(self) -> list[Kind]:
        """Every namespaced kind, once per storage (kinds sharing one and a custom kind's versions)."""
        by_prefix: dict[str, Kind] = {}
        for kind in self.catalog.kinds():
            if kind.namespaced:
                by_prefix.setdefault(kind.key_prefix(), kind)
        return list(by_prefix.values())

    async def reconcile(self, key: Hashable) -> float | None:
        name = str(key)
        ns = self.namespaces.cache.get(NAMESPACE.key(name))
        if not isinstance(ns, dict) or not terminating(ns) or FINALIZER not in spec_finalizers(ns):
            self._terminating_since.pop(name, None)
            return None
        waited = self.clock() - self._terminating_since.setdefault(name, self.clock())
        if waited < self.grace_seconds:
            return self.grace_seconds - waited
        left = await self.delete_contents(name)
        if left:
            await self.report(name, left)
            return RECHECK_SECONDS
        try:
            current = await self.registry.get(NAMESPACE, name)
            if FINALIZER in spec_finalizers(current):
                await self.registry.update(NAMESPACE, without_finalizer(current), subresource=FINALIZE)
                log.info("namespace %s is empty: deleted", name)
            self._terminating_since.pop(name, None)
        except NotFound:
            self._terminating_since.pop(name, None)
            return None
        except Conflict:
            return RECHECK_SECONDS  # changed meanwhile: look again
        return None

    async def delete_contents(self, namespace: str) -> Remaining:
        """Delete every object stored in ``namespace``; what is still there (held by finalizers)."""
        left = Remaining()
        for kind in self.kinds():
            items, _ = await self.registry.list(kind, namespace)
            for obj in items:
                if not obj["metadata"].get("deletionTimestamp"):
                    try:
                        obj, gone = await self.registry.delete(kind, obj["metadata"]["name"], namespace)
                    except NotFound:
                        continue
                    if gone:
                        continue
                left.add(kind, obj)
        return left

    async def report(self, name: str, left: Remaining) -> None:
        """Say on the namespace what holds it, in the conditions kube's namespace controller keeps
        (``kubectl describe ns`` shows them); written only when they change."""
        try:
            current = await self.registry.get(NAMESPACE, name)
        except NotFound:
            return
        status = dict(current.get("status") or {})
        before = [c for c in status.get("conditions") or [] if isinstance(c, dict)]
        conditions = deletion_conditions(left.resources, left.finalizers, before, now_rfc3339())
        if [{k: v for k, v in c.items() if k != "lastTransitionTime"} for c in conditions] == \
                [{k: v for k, v in c.items() if k != "lastTransitionTime"} for c in before]:
            return
        with contextlib.suppress(Conflict, NotFound):  # changed meanwhile: the next pass says it again
            await self.registry.update_status(NAMESPACE, name, {**status, "conditions": conditions},
                                              resource_version=int(current["metadata"]["resourceVersion"]))


@dataclass(slots=True)
class Remaining:
    """What a pass left in a namespace: objects per ``<plural>.<group>`` and per finalizer holding them."""

    resources: dict[str, int] = field(default_factory=dict)
    finalizers: dict[str, int] = field(default_factory=dict)

    def add(self, kind: Kind, obj: Obj) -> None:
        resource = f"{kind.plural}.{kind.group}"
        self.resources[resource] = self.resources.get(resource, 0) + 1
        for finalizer in obj["metadata"].get("finalizers") or []:
            self.finalizers[str(finalizer)] = self.finalizers.get(str(finalizer), 0) + 1

    def __bool__(self) -> bool:
        return bool(self.resources)
