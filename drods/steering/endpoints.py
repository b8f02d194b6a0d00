"""Endpoint addresses of exported Services, collected from the member clusters that provide them (F8).

For each (provider cluster, exported Service) the service directory names, `EndpointCollector` asks
the member — through its official Kubernetes client (`drods.members.client`) — for the Service's
EndpointSlices (label ``kubernetes.io/service-name``), or its v1 ``Endpoints`` where the cluster
serves no EndpointSlices, every ``endpointPollSeconds``. What it found is one document per pair at
``/status/endpoints/<cluster>/<namespace>/<name>`` (`ClusterEndpoints.json`), written only when it
changed, so the directory API reads it and the directory controller derives the consumers'
EndpointSlices from it; pairs no longer provided are deleted. A member that cannot be reached
keeps its last document (stamped ``reachable: false``): the directory marks its endpoints not ready.
Pull-mode members are not reachable from the control plane: their endpoints are not collected.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from collections.abc import Awaitable, Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from drods.machinery.periodic import Periodic
from drods.members.client import MemberError, MemberUnavailable
from drods.members.clients import MemberClients
from drods.model import jsondoc
from drods.model.keys import ENDPOINTS_PREFIX, endpoints_key
from drods.model.timefmt import rfc3339_ms
from drods.store import Delete, Put, Store

log = logging.getLogger(__name__)
Obj = dict[str, Any]
SERVICE_NAME = "kubernetes.io/service-name"
SLICE_MANAGED_BY = "endpointslice.kubernetes.io/managed-by"
# The manager of the slices a MultiClusterService imports into a consumer: never collected back as
# that cluster's own endpoints (a cluster both providing and consuming would re-export the others').
IMPORTED_SLICE_MANAGER = "multicluster-service.multicluster.io"


@dataclass(frozen=True, slots=True)
class Target:
    """One exported Service on one provider cluster."""

    cluster: str
    namespace: str
    name: str

    @property
    def key(self) -> str:
        return endpoints_key(self.cluster, self.namespace, self.name)


def target_of(key: str) -> Target | None:
    cluster, _, rest = key[len(ENDPOINTS_PREFIX):].partition("/")
    ns, _, name = rest.partition("/")
    return Target(cluster, ns, name) if key.startswith(ENDPOINTS_PREFIX) and cluster and ns and name else None


def _add_ports(into: dict[tuple[str, int, str], Obj], ports: Iterable[Obj]) -> None:
    for p in ports:
        if isinstance(p, dict) and isinstance(p.get("port"), int):
            name, number, protocol = str(p.get("name") or ""), int(p["port"]), str(p.get("protocol") or "TCP")
            into[(name, number, protocol)] = {"name": name, "port": number, "protocol": protocol}


def from_slices(slices: Iterable[Obj]) -> tuple[list[Obj], list[Obj]]:
    """(endpoints, ports) of a Service's EndpointSlices: one entry per address set, ``ready`` as the
    slice says (unset = ready, as Kubernetes reads it)."""
    endpoints: list[Obj] = []
    ports: dict[tuple[str, int, str], Obj] = {}
    for sl in slices:
        if sl.get("addressType", sl.get("address_type", "IPv4")) not in ("IPv4", "IPv6"):
            continue
        for ep in sl.get("endpoints") or []:
            addresses = [str(a) for a in ep.get("addresses") or []]
            if not addresses:
                continue
            cond = ep.get("conditions") or {}
            row: Obj = {"addresses": addresses, "ready": cond.get("ready") is not False}
            node = ep.get("nodeName") or ep.get("node_name")
            if node:
                row["nodeName"] = str(node)
            ref = ep.get("targetRef") or ep.get("target_ref") or {}
            if ref.get("name"):
                row["pod"] = str(ref["name"])
            endpoints.append(row)
        _add_ports(ports, sl.get("ports") or [])
    endpoints.sort(key=lambda e: (e["addresses"], e.get("pod", "")))
    return endpoints, sorted(ports.values(), key=lambda p: (p["name"], p["port"], p["protocol"]))


def from_endpoints(obj: Obj | None) -> tuple[list[Obj], list[Obj]]:
    """The same from a v1 Endpoints object (ready and not-ready addresses)."""
    endpoints: list[Obj] = []
    ports: dict[tuple[str, int, str], Obj] = {}
    for subset in (obj or {}).get("subsets") or []:
        for field, ready in (("addresses", True), ("notReadyAddresses", False), ("not_ready_addresses", False)):
            for a in subset.get(field) or []:
                if a.get("ip"):
                    row: Obj = {"addresses": [str(a["ip"])], "ready": ready}
                    node = a.get("nodeName") or a.get("node_name")
                    if node:
                        row["nodeName"] = str(node)
                    endpoints.append(row)
        _add_ports(ports, subset.get("ports") or [])
    endpoints.sort(key=lambda e: e["addresses"])
    return endpoints, sorted(ports.values(), key=lambda p: (p["name"], p["port"], p["protocol"]))


class EndpointCollector:
    """Polls the provider clusters of exported Services for their endpoints (see the module doc).

    ``targets`` says what to collect now (the directory's providers); ``changed`` is called after a
    pass that wrote something. The documents it wrote are in `docs` as well as in the store."""

    def __init__(self, store: Store, clients: MemberClients, targets: Callable[[], set[Target]],
                 changed: Callable[[], None], poll_seconds: float = 2.0,
                 clock: Callable[[], float] = time.time) -> None:
        self.store = store
        self.clients = clients
        self.targets = targets
        self.changed = changed
        self.poll_seconds = poll_seconds
        self.clock = clock
        self.docs: dict[str, Obj] = {}
        self._compare: dict[str, Obj] = {}  # per key: the document without its timestamps

    async def load(self) -> None:
        """Resume from the stored documents (a new leader does not start from nothing)."""
        kvs, _rev = await self.store.range(ENDPOINTS_PREFIX)
        for kv in kvs:
            doc = json.loads(kv.value)
            self.docs[kv.key] = doc
            self._compare[kv.key] = _content(doc)

    async def run(self) -> None:
        await self.load()
        # A failed pass is logged and counted; the next one comes a period later.
        await Periodic("endpoint-collector", self.poll_once, self.poll_seconds, first_at_start=True).run()

    async def poll_once(self) -> int:
        """One pass over every target; returns how many documents were written or deleted."""
        wanted = {t.key: t for t in self.targets()}
        by_cluster: dict[str, list[Target]] = {}
        for t in wanted.values():
            by_cluster.setdefault(t.cluster, []).append(t)
        found: dict[str, Obj | None] = {}
        results = await asyncio.gather(*(self._cluster(c, ts) for c, ts in by_cluster.items()))
        for part in results:
            found.update(part)
        ops: list[Put | Delete] = []
        for key, doc in found.items():
            if doc is None:
                continue
            if self._compare.get(key) != _content(doc):
                ops.append(Put(key, jsondoc.dumps(doc)))
                self.docs[key] = doc
                self._compare[key] = _content(doc)
        for key in [k for k in self.docs if k not in wanted]:
            ops.append(Delete(key))
            self.docs.pop(key, None)
            self._compare.pop(key, None)
        step = max(1, self.store.max_txn_ops)
        for start in range(0, len(ops), step):
            await self.store.txn([], ops[start:start + step])
        if ops:
            self.changed()
        return len(ops)

    async def _cluster(self, cluster: str, targets: list[Target]) -> dict[str, Obj | None]:
        """What one cluster holds for its targets; unreachable: the last documents, marked so."""
        client, _why = await self.clients.get(cluster)
        out: dict[str, Obj | None] = {}
        if client is None:  # pull mode or no credentials: nothing to collect from here
            return {t.key: None for t in targets}
        for t in targets:
            try:
                endpoints, ports, source = await _collect(client.list_objects, client.get, t)
            except (MemberUnavailable, MemberError) as e:
                if isinstance(e, MemberError) and e.status not in (0, 401, 403) and e.status < 500:
                    log.warning("endpoints of %s/%s on %s: %s", t.namespace, t.name, cluster, e)
                old = self.docs.get(t.key)
                out[t.key] = {**old, "reachable": False} if old is not None else None
                continue
            out[t.key] = {"cluster": cluster, "namespace": t.namespace, "name": t.name, "source": source,
                          "reachable": True, "endpoints": endpoints, "ports": ports,
                          "observedAt": rfc3339_ms(self.clock())}
        return out


async def _collect(list_objects: Callable[..., Awaitable[list[Obj]]], get: Callable[..., Awaitable[Obj | None]],
                   t: Target) -> tuple[list[Obj], list[Obj], str]:
    try:
        slices = await list_objects("discovery.k8s.io/v1", "EndpointSlice", t.namespace,
                                    label_selector=f"{SERVICE_NAME}={t.name}")
        own = [sl for sl in slices
               if ((sl.get("metadata") or {}).get("labels") or {}).get(SLICE_MANAGED_BY) != IMPORTED_SLICE_MANAGER]
        endpoints, ports = from_slices(own)
        return endpoints, ports, "EndpointSlice"
    except MemberError as e:
        if e.status != 404:
            raise
    try:
        endpoints, ports = from_endpoints(await get("v1", "Endpoints", t.name, t.namespace))
    except MemberError as e:
        if e.status != 404:
            raise
        return [], [], "none"  # the cluster serves neither kind
    return endpoints, ports, "Endpoints"


def _content(doc: Mapping[str, Any]) -> Obj:
    return {k: v for k, v in doc.items() if k != "observedAt"}
