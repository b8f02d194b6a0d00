"""Karmada's MultiClusterIngress (``networking.karmada.io/v1alpha1``): an Ingress for the fleet, routed
by the service directory (`drods.steering.directory`) to the clusters that run its backends.

For each MultiClusterIngress, the backend Services its spec names (rules' paths and the default
backend) are looked up as the directory sees them: the clusters where the workloads a Service selects
are placed, each healthy when the cluster is Ready and the workload has ready replicas there. The
MultiClusterIngress's spec is delivered, as a ``networking.k8s.io/v1`` Ingress of the same name and
namespace, to every cluster where a backend is healthy (a Binding ``mci-<ns>-<name>``, Duplicated,
``targetClusters``): each member's own ingress controller serves it, and a cluster whose backends
stop being healthy stops receiving it. ``status.loadBalancer.ingress`` is every address the members'
ingress controllers report on their copies. An Ingress of that name the user wrote is left alone (the
MultiClusterIngress is then not delivered).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from dataclasses import dataclass
from typing import Any

from pydantic import ValidationError

from drods.errors import ApiError
from drods.machinery.informer import Informer, subscribed, wait_synced
from drods.machinery.manager import Manager
from drods.machinery.periodic import Periodic
from drods.model.annotations import MANAGED_BY
from drods.model.kinds import BINDING, MULTI_CLUSTER_INGRESS, TEMPLATE_KINDS, WORK
from drods.model.networking import IngressSpec
from drods.model.work import Ref, member_status, work_name
from drods.registry.objects import ObjectRegistry, decode_stored
from drods.steering.delivery import duplicated_binding, load_balancer
from drods.steering.directory import DirectoryInformers

log = logging.getLogger(__name__)
Obj = dict[str, Any]
LEASE = "multicluster-ingresses"
MCI_MANAGER = "multicluster-ingress"
MCI_LABEL = "multiclusteringress.karmada.io/name"
INGRESS = next(k for k in TEMPLATE_KINDS if k.kind == "Ingress")
STATUS_RESYNC_SECONDS = 2.0  # how often the members' load-balancer addresses are read from the Works


def routed_clusters(backends: list[str], entries: list[Obj]) -> list[str]:
    """The clusters where at least one of ``backends`` is healthy (`directory_entries` rows)."""
    wanted = set(backends)
    return sorted({row["cluster"] for e in entries if e["name"] in wanted
                   for row in e.get("clusters") or [] if row.get("healthy")})


def ingress_for(mci: Obj) -> Obj:
    """The member Ingress a MultiClusterIngress is delivered as: its spec, its name and namespace."""
    meta = mci["metadata"]
    return {"apiVersion": INGRESS.api_version, "kind": INGRESS.kind,
            "metadata": {"name": meta["name"], "namespace": meta.get("namespace") or "default",
                         "labels": {MANAGED_BY: MCI_MANAGER, MCI_LABEL: meta["name"]}},
            "spec": dict(mci.get("spec") or {})}


def binding_for(ingress: Obj, clusters: list[str]) -> Obj:
    meta = ingress["metadata"]
    return duplicated_binding(f"mci-{meta['namespace']}-{meta['name']}", ingress, clusters,
                              {MANAGED_BY: MCI_MANAGER, MCI_LABEL: meta["name"]})


@dataclass(frozen=True, slots=True)
class MciInformers:
    ingresses: Informer  # the MultiClusterIngresses
    directory: DirectoryInformers

    @classmethod
    def of(cls, manager: Manager) -> MciInformers:
        return cls(manager.informer(MULTI_CLUSTER_INGRESS.key_prefix(), decode_stored), DirectoryInformers.of(manager))


class MultiClusterIngressController:
    """Single-active (``/leases/multicluster-ingresses``): a pass when a MultiClusterIngress, a Service,
    a Binding, a Cluster or a workload changes, and every few seconds for the members' status."""

    def __init__(self, registry: ObjectRegistry, informers: MciInformers, coalesce_seconds: float = 0.05) -> None:
        self.registry = registry
        self.inf = informers
        self.coalesce = coalesce_seconds
        self._wake = asyncio.Event()
        self._written: dict[str, tuple[Obj, Obj | None]] = {}

    async def run(self) -> None:
        d = self.inf.directory
        watched = (self.inf.ingresses, d.services, d.bindings, d.clusters, *d.workloads)
        with subscribed(*((inf, self._wake_on_change) for inf in watched)):
            await wait_synced(self.inf.ingresses, *d.all())
            self._wake.set()
            await Periodic(LEASE, self.reconcile, STATUS_RESYNC_SECONDS, wake=self._wake, coalesce_s=self.coalesce,
                           restart_on_failure=True).run()

    def _wake_on_change(self, _key: str, _old: Any, _new: Any) -> None:
        self._wake.set()

    async def reconcile(self) -> None:
        mcis = [o for o in self.inf.ingresses.cache.values() if o and not o["metadata"].get("deletionTimestamp")]
        backends: dict[str, list[str]] = {}
        for mci in mcis:
            try:
                spec = IngressSpec.model_validate(mci.get("spec") or {})
            except ValidationError:
                continue
            backends[_ident(mci)] = spec.backend_services()
        pseudo = [{"metadata": {"name": b, "namespace": ns}} for ident, names in backends.items()
                  for ns in [ident.partition("/")[0]] for b in names]
        entries = self.inf.directory.entries_for(pseudo)
        for mci in mcis:
            ident = _ident(mci)
            if ident in backends:
                ns = ident.partition("/")[0]
                clusters = routed_clusters(backends[ident], [e for e in entries if e["namespace"] == ns])
                await self._deliver(mci, clusters)
        for ident in [i for i in self._written if i not in backends]:
            await self._withdraw(ident)

    async def _deliver(self, mci: Obj, clusters: list[str]) -> None:
        ident, ingress = _ident(mci), ingress_for(mci)
        meta = ingress["metadata"]
        current = await self.registry.try_get(INGRESS, meta["name"], meta["namespace"])
        if current is not None and ((current["metadata"].get("labels") or {}).get(MANAGED_BY) != MCI_MANAGER):
            log.warning("the Ingress %s is the user's own: MultiClusterIngress %s not delivered", ident, ident)
            return
        binding = binding_for(ingress, clusters) if clusters else None
        if self._written.get(ident) != (ingress, binding):
            await self.registry.batch_upsert([(INGRESS, ingress)] + ([(BINDING, binding)] if binding else []))
            if binding is None:
                with contextlib.suppress(ApiError):
                    await self.registry.delete(BINDING, f"mci-{meta['namespace']}-{meta['name']}")
            self._written[ident] = (ingress, binding)
        statuses = []
        for c in clusters:
            work = await self.registry.try_get(WORK, work_name(f"mci-{meta['namespace']}-{meta['name']}", c))
            st = member_status(work, Ref(INGRESS.api_version, INGRESS.kind, meta["namespace"], meta["name"]))
            if st is not None:
                statuses.append(st)
        status = {**(mci.get("status") or {}), "loadBalancer": load_balancer(statuses)}
        if status != (mci.get("status") or {}):
            with contextlib.suppress(ApiError):  # changed meanwhile: the next pass writes it
                await self.registry.update_status(MULTI_CLUSTER_INGRESS, mci["metadata"]["name"], status,
                                                  meta["namespace"],
                                                  resource_version=int(mci["metadata"]["resourceVersion"]))

    async def _withdraw(self, ident: str) -> None:
        ns, _, name = ident.partition("/")
        with contextlib.suppress(ApiError):
            await self.registry.delete(BINDING, f"mci-{ns}-{name}")
        with contextlib.suppress(ApiError):
            await self.registry.delete(INGRESS, name, ns)
        self._written.pop(ident, None)


def _ident(mci: Obj) -> str:
    return f"{mci['metadata'].get('namespace') or 'default'}/{mci['metadata']['name']}"
