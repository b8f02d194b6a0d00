"""Karmada's MultiClusterService (``networking.karmada.io/v1alpha1``): type ``CrossCluster`` makes a
Service's endpoints in its provider clusters reachable in its consumer clusters, on top of the service
directory's endpoint collection (`drods.steering.endpoints`); type ``LoadBalancer`` exposes it outside
through the providers' own load balancers, one address list for the fleet.

For each MultiClusterService named like a Service (same namespace), as Karmada does it:

* the Service itself is propagated to every provider and consumer cluster — a Binding
  ``mcs-<ns>-<name>`` (Duplicated, ``targetClusters``), so propagation delivers it like any object;
* per provider whose endpoints were collected, an EndpointSlice ``imported-<provider>-<name>`` labelled
  ``kubernetes.io/service-name: <name>`` (so the consumer's own proxy serves it as part of the Service),
  ``endpointslice.kubernetes.io/managed-by`` (so the consumer's endpoint controller leaves it alone) and
  ``endpointslice.karmada.io/provision-cluster: <provider>``, with the provider's addresses and the
  exposed ports, is delivered to every consumer but the provider itself (Binding
  ``mcs-<ns>-<name>-eps-<provider>``);
* ``LoadBalancer``: the Service goes to the providers as ``type: LoadBalancer`` — a Karmada
  OverridePolicy ``mcs-<name>-loadbalancer`` (managed, in the Service's namespace) sets it for them
  alone, so consumers keep the Service as written — and ``status.loadBalancer.ingress`` is every
  address the providers' load balancers publish, of the providers whose endpoints are ready and whose
  traffic is not taken away (a Remedy's TrafficControl): a provider failing leaves the list;
* ``status.conditions``: ``ServiceApplied`` (the Service exists and is propagated),
  ``EndpointSliceDispatched`` (how many providers' endpoints reach the consumers) and
  ``LoadBalancerReady`` (which providers' addresses are published).

Which clusters provide is the spec's list (empty: every cluster); the endpoints are collected by the
service directory's collector, which polls `mcs_targets` as well as the exports' providers.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from pydantic import ValidationError

from drods.errors import ApiError
from drods.machinery.informer import Informer, subscribed, wait_synced
from drods.machinery.manager import Manager
from drods.machinery.periodic import Periodic
from drods.machinery.shared import decode_template
from drods.model import jsondoc
from drods.model.annotations import MANAGED_BY
from drods.model.conditions import transition
from drods.model.keys import ENDPOINTS_PREFIX, endpoints_key
from drods.model.kinds import (
    BINDING,
    CLUSTER,
    KARMADA_OVERRIDE_POLICY,
    MULTI_CLUSTER_SERVICE,
    TEMPLATE_KINDS,
    WORK,
    Kind,
)
from drods.model.networking import MultiClusterServiceSpec
from drods.model.remedy import traffic_controlled
from drods.model.timefmt import rfc3339
from drods.model.work import Ref, member_status, work_name
from drods.registry.objects import ObjectRegistry, decode_binding_kept, decode_stored
from drods.steering.delivery import duplicated_binding, load_balancer
from drods.steering.endpoints import IMPORTED_SLICE_MANAGER, SERVICE_NAME, SLICE_MANAGED_BY, Target
from drods.store import KeyValue

Obj = dict[str, Any]
LEASE = "multicluster-services"
MCS_MANAGER = "multicluster-service"
MCS_LABEL = "multiclusterservice.karmada.io/name"
PROVISION_CLUSTER_LABEL = "endpointslice.karmada.io/provision-cluster"
SERVICE = next(k for k in TEMPLATE_KINDS if k.kind == "Service")
ENDPOINT_SLICE = next(k for k in TEMPLATE_KINDS if k.kind == "EndpointSlice")
OWNED_KINDS = {k.kind: k for k in (BINDING, ENDPOINT_SLICE, KARMADA_OVERRIDE_POLICY)}
STATUS_RESYNC_SECONDS = 2.0  # how often the providers' load-balancer addresses are read from the Works


@dataclass(frozen=True, slots=True)
class Exposure:
    """What one MultiClusterService asks for, resolved against the registered clusters."""

    namespace: str
    name: str
    providers: tuple[str, ...]
    consumers: tuple[str, ...]
    ports: tuple[tuple[str | None, int], ...]  # (name, port) exposed; empty: all
    cross_cluster: bool
    unknown: tuple[str, ...]  # clusters the spec names that are not registered
    load_balancer: bool = False

    @property
    def binding(self) -> str:
        return f"mcs-{self.namespace}-{self.name}"

    @property
    def clusters(self) -> list[str]:
        """Where the Service goes: the providers, and the consumers when CrossCluster."""
        return sorted(set(self.providers) | (set(self.consumers) if self.cross_cluster else set()))


def exposure(mcs: Obj, clusters: Iterable[str]) -> Exposure | None:
    """The MultiClusterService's exposure; None when its stored spec does not parse (never written so)."""
    meta = mcs["metadata"]
    try:
        spec = MultiClusterServiceSpec.model_validate(mcs.get("spec") or {})
    except ValidationError:
        return None
    known = sorted(set(clusters))
    named_p, named_c = spec.providers(), spec.consumers()
    return Exposure(str(meta.get("namespace") or "default"), str(meta["name"]),
                    tuple(c for c in known if not named_p or c in named_p),
                    tuple(c for c in known if not named_c or c in named_c),
                    tuple((p.name, p.port) for p in spec.ports), "CrossCluster" in spec.types,
                    tuple(sorted((named_p | named_c) - set(known))), "LoadBalancer" in spec.types)


def mcs_targets(services: Iterable[Obj], clusters: Iterable[str]) -> set[Target]:
    """What the endpoint collector polls for MultiClusterServices: each provider of each one."""
    out: set[Target] = set()
    for mcs in services:
        e = exposure(mcs, clusters)
        if e is not None:  # CrossCluster dispatches the endpoints; LoadBalancer publishes the healthy providers
            out |= {Target(c, e.namespace, e.name) for c in e.providers}
    return out


def _exposed_ports(e: Exposure, ports: list[Obj]) -> list[Obj]:
    if not e.ports:
        return ports
    return [p for p in ports if any(p.get("port") == n or (name and p.get("name") == name) for name, n in e.ports)]


def imported_slices(e: Exposure, docs: Mapping[str, Obj], fenced: frozenset[str] = frozenset()) -> list[Obj]:
    """Per provider whose endpoints were collected, the EndpointSlice its consumers receive; a ``fenced``
    provider's (a Remedy's TrafficControl) endpoints are there, none of them ready."""
    out: list[Obj] = []
    for provider in e.providers:
        doc = docs.get(endpoints_key(provider, e.namespace, e.name))
        if doc is None:
            continue
        live = doc.get("reachable") is not False and provider not in fenced
        eps = [{"addresses": list(ep["addresses"]),
                "conditions": {"ready": bool(ep.get("ready")) and live, "serving": bool(ep.get("ready")) and live,
                               "terminating": False}} for ep in doc.get("endpoints") or []]
        v6 = any(":" in a for ep in eps for a in ep["addresses"])
        out.append({"apiVersion": ENDPOINT_SLICE.api_version, "kind": ENDPOINT_SLICE.kind,
                    "metadata": {"name": f"imported-{provider}-{e.name}", "namespace": e.namespace,
                                 "labels": {SERVICE_NAME: e.name, PROVISION_CLUSTER_LABEL: provider,
                                            SLICE_MANAGED_BY: IMPORTED_SLICE_MANAGER, MCS_LABEL: e.name,
                                            MANAGED_BY: MCS_MANAGER}},
                    "addressType": "IPv6" if v6 else "IPv4", "endpoints": eps,
                    "ports": _exposed_ports(e, list(doc.get("ports") or []))})
    return out


def _binding(name: str, resource: Obj, clusters: Iterable[str], mcs: str) -> Obj:
    return duplicated_binding(name, resource, sorted(clusters), {MANAGED_BY: MCS_MANAGER, MCS_LABEL: mcs})


@dataclass(frozen=True, slots=True)
class Plan:
    """Everything one MultiClusterService's pass writes: templates with their Bindings, and its status."""

    writes: list[tuple[Kind, Obj]]
    conditions: list[tuple[str, bool, str, str]]


def load_balancer_override(e: Exposure) -> Obj:
    """The OverridePolicy that makes the providers' copies of the Service ``type: LoadBalancer``."""
    return {"apiVersion": KARMADA_OVERRIDE_POLICY.api_version, "kind": KARMADA_OVERRIDE_POLICY.kind,
            "metadata": {"name": f"mcs-{e.name}-loadbalancer", "namespace": e.namespace,
                         "labels": {MANAGED_BY: MCS_MANAGER, MCS_LABEL: e.name}},
            "spec": {"resourceSelectors": [{"apiVersion": "v1", "kind": "Service", "name": e.name}],
                     "overrideRules": [{"targetCluster": {"clusterNames": list(e.providers)},
                                        "overriders": {"plaintext": [{"path": "/spec/type", "operator": "add",
                                                                      "value": "LoadBalancer"}]}}]}}


def serving_providers(e: Exposure, docs: Mapping[str, Obj], fenced: frozenset[str]) -> list[str]:
    """The providers a load balancer may send traffic to: reachable, with a ready endpoint, not fenced."""
    out = []
    for provider in e.providers:
        doc = docs.get(endpoints_key(provider, e.namespace, e.name))
        if doc is not None and doc.get("reachable") is not False and provider not in fenced \
                and any(ep.get("ready") for ep in doc.get("endpoints") or []):
            out.append(provider)
    return out


def plan(e: Exposure, service: Obj | None, docs: Mapping[str, Obj], fenced: frozenset[str] = frozenset()) -> Plan:
    """What the control plane holds for one exposure (pure)."""
    where = f"{e.namespace}/{e.name}"
    unknown = f"; not registered: {', '.join(e.unknown)}" if e.unknown else ""
    if service is None:
        return Plan([], [("ServiceApplied", False, "ServiceNotFound", f"no Service {where} to expose")])
    clusters = e.clusters
    if not clusters:
        return Plan([], [("ServiceApplied", False, "NoClusters",
                          f"no registered cluster provides or consumes it{unknown}")])
    writes: list[tuple[Kind, Obj]] = [(BINDING, _binding(e.binding, service, clusters, e.name))]
    if e.load_balancer and e.providers:
        writes.insert(0, (KARMADA_OVERRIDE_POLICY, load_balancer_override(e)))
    conditions = [("ServiceApplied", True, "ServiceAppliedSucceed",
                   f"the Service goes to {', '.join(clusters)}{unknown}")]
    if e.cross_cluster:
        writes, dispatched = _dispatched_slices(e, docs, fenced, writes)
        waiting = [p for p in e.providers if p not in dispatched and any(c != p for c in e.consumers)]
        conditions.append(("EndpointSliceDispatched", not waiting,
                           "EndpointSliceDispatchedSucceed" if not waiting else "Collecting",
                           f"endpoints of {len(dispatched)} provider(s) dispatched to the consumers"
                           + (f"; not yet collected from {', '.join(waiting)}" if waiting else "")))
    return Plan(writes, conditions)


def _dispatched_slices(e: Exposure, docs: Mapping[str, Obj], fenced: frozenset[str],
                       writes: list[tuple[Kind, Obj]]) -> tuple[list[tuple[Kind, Obj]], list[str]]:
    out, dispatched = list(writes), []
    for sl in imported_slices(e, docs, fenced):
        provider = sl["metadata"]["labels"][PROVISION_CLUSTER_LABEL]
        to = [c for c in e.consumers if c != provider]
        if not to:
            continue
        out += [(ENDPOINT_SLICE, sl), (BINDING, _binding(f"{e.binding}-eps-{provider}", sl, to, e.name))]
        dispatched.append(provider)
    return out, dispatched


def load_balancer_condition_of(serving: list[str], published: Obj) -> tuple[str, bool, str, str]:
    """``LoadBalancerReady``: which providers' addresses ``status.loadBalancer`` lists, or why none."""
    ok = bool(published.get("ingress"))
    if ok:
        return ("LoadBalancerReady", True, "LoadBalancerReady",
                f"the load balancers of {', '.join(serving)} serve it")
    why = f"waiting for the load balancer address of {', '.join(serving)}" if serving else \
        "no provider has a ready endpoint"
    return ("LoadBalancerReady", False, "Provisioning" if serving else "NoHealthyProvider", why)


def _decode_doc(kv: KeyValue) -> Obj | None:
    doc = jsondoc.loads(kv.value)
    return doc if isinstance(doc, dict) else None


@dataclass(frozen=True, slots=True)
class McsInformers:
    services: Informer  # the MultiClusterServices
    kube_services: Informer
    clusters: Informer
    bindings: Informer
    slices: Informer
    endpoints: Informer
    overrides: Informer  # Karmada OverridePolicies (the LoadBalancer exposure's own)

    @classmethod
    def of(cls, manager: Manager) -> McsInformers:
        return cls(manager.informer(MULTI_CLUSTER_SERVICE.key_prefix(), decode_stored),
                   manager.informer(SERVICE.key_prefix(), decode_template),
                   manager.informer(CLUSTER.key_prefix(), decode_stored),
                   manager.informer(BINDING.key_prefix(), decode_binding_kept),
                   manager.informer(ENDPOINT_SLICE.key_prefix(), decode_template),
                   manager.informer(ENDPOINTS_PREFIX, _decode_doc),
                   manager.informer(KARMADA_OVERRIDE_POLICY.key_prefix(), decode_stored))

    def all(self) -> tuple[Informer, ...]:
        return (self.services, self.kube_services, self.clusters, self.bindings, self.slices, self.endpoints,
                self.overrides)

    def cluster_names(self) -> list[str]:
        return sorted(o["metadata"]["name"] for o in self.clusters.cache.values()
                      if o and not o["metadata"].get("deletionTimestamp"))

    def multicluster_services(self) -> list[Obj]:
        return [o for o in self.services.cache.values() if o and not o["metadata"].get("deletionTimestamp")]


class MultiClusterServiceController:
    """Single-active (``/leases/multicluster-services``): MultiClusterServices → the Service's Binding,
    the imported EndpointSlices with theirs, and status; a pass runs when a MultiClusterService, a
    Service, a Cluster or a provider's collected endpoints change. What it made and no longer wants
    (a provider gone, the MultiClusterService deleted) it deletes; propagation then removes the copies."""

    def __init__(self, registry: ObjectRegistry, informers: McsInformers, *, coalesce_seconds: float = 0.05,
                 clock: Callable[[], float] = time.time) -> None:
        self.registry = registry
        self.inf = informers
        self.coalesce = coalesce_seconds
        self.clock = clock
        self._wake = asyncio.Event()
        self._written: dict[str, list[tuple[Kind, Obj]]] = {}
        self._owned: set[tuple[str, str, str]] = set()  # (kind, namespace, name) this controller wrote

    async def run(self) -> None:
        watched = (self.inf.services, self.inf.kube_services, self.inf.clusters, self.inf.endpoints)
        with subscribed(*((inf, self._wake_on_change) for inf in watched)):
            await wait_synced(*self.inf.all())
            self._owned = self._found_owned()
            self._wake.set()
            # the resync reads the providers' load-balancer addresses from their Works
            await Periodic(LEASE, self.reconcile, STATUS_RESYNC_SECONDS, wake=self._wake, coalesce_s=self.coalesce,
                           restart_on_failure=True).run()

    def _wake_on_change(self, _key: str, _old: Any, _new: Any) -> None:
        self._wake.set()

    def _found_owned(self) -> set[tuple[str, str, str]]:
        """What an earlier term wrote (read once per term: the Binding cache is fleet-sized)."""
        out: set[tuple[str, str, str]] = set()
        for inf, kind in ((self.inf.bindings, BINDING), (self.inf.slices, ENDPOINT_SLICE),
                          (self.inf.overrides, KARMADA_OVERRIDE_POLICY)):
            for o in inf.cache.values():
                if o and ((o.get("metadata") or {}).get("labels") or {}).get(MANAGED_BY) == MCS_MANAGER:
                    out.add((kind.kind, str(o["metadata"].get("namespace") or ""), str(o["metadata"]["name"])))
        return out

    async def reconcile(self) -> None:
        if not self.inf.multicluster_services() and not self._owned and not self._written:
            return  # nothing to keep: each cluster's report wakes a pass, and the fleet is large
        clusters = self.inf.cluster_names()
        fenced = frozenset(str(o["metadata"]["name"]) for o in self.inf.clusters.cache.values()
                           if o and traffic_controlled(o))
        docs = {k: v for k, v in self.inf.endpoints.cache.items() if v}
        wanted: set[tuple[str, str, str]] = set()
        now = rfc3339(self.clock())
        for mcs in self.inf.multicluster_services():
            e = exposure(mcs, clusters)
            if e is None:
                continue
            p = plan(e, self.inf.kube_services.cache.get(SERVICE.key(e.name, e.namespace)), docs, fenced)
            wanted |= {(k.kind, str(o["metadata"].get("namespace") or ""), str(o["metadata"]["name"]))
                       for k, o in p.writes}
            ident = f"{e.namespace}/{e.name}"
            if p.writes and self._written.get(ident) != p.writes:
                await self.registry.batch_upsert(p.writes)
                self._written[ident] = p.writes
            published = await self._published(e, docs, fenced) if e.load_balancer else None
            await self._write_status(mcs, p, now, published)
        self._owned |= wanted
        for kind, ns, name in sorted(self._owned - wanted):
            with contextlib.suppress(ApiError):
                await self.registry.delete(OWNED_KINDS[kind], name, ns or None)
            self._owned.discard((kind, ns, name))
        live = {f"{o['metadata'].get('namespace') or 'default'}/{o['metadata']['name']}"
                for o in self.inf.multicluster_services()}
        for ident in [i for i in self._written if i not in live]:
            del self._written[ident]

    async def _published(self, e: Exposure, docs: Mapping[str, Obj],
                         fenced: frozenset[str]) -> tuple[list[str], Obj]:
        """(the providers serving, the load-balancer addresses their copies of the Service publish)."""
        serving = serving_providers(e, docs, fenced)
        statuses = []
        for c in serving:
            work = await self.registry.try_get(WORK, work_name(e.binding, c))
            st = member_status(work, Ref(SERVICE.api_version, SERVICE.kind, e.namespace, e.name))
            if st is not None:
                statuses.append(st)
        return serving, load_balancer(statuses)

    async def _write_status(self, mcs: Obj, p: Plan, now: str, published: tuple[list[str], Obj] | None) -> None:
        previous = dict(mcs.get("status") or {})
        prev_conds = [c for c in previous.get("conditions") or [] if isinstance(c, dict)]
        conditions = list(p.conditions)
        if published is not None and conditions[0][1]:
            conditions.append(load_balancer_condition_of(*published))
        status = {**previous, "conditions": [transition(t, ok, r, m, prev_conds, now) for t, ok, r, m in conditions],
                  "loadBalancer": published[1] if published is not None and conditions[0][1] else {}}
        if status == previous:
            return
        meta = mcs["metadata"]
        with contextlib.suppress(ApiError):  # changed meanwhile: its watch event brings another pass
            await self.registry.update_status(MULTI_CLUSTER_SERVICE, meta["name"], status, meta.get("namespace"),
                                              resource_version=int(meta["resourceVersion"]))
