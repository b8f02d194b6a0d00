"""Flow affinity (SPEC C7; RFC 10053's "flow affinity"): a flow keeps its instance while that
instance stays reachable and within the SLA, until its affinity timeout.

A consumer resolves ``(service, client site, flow id)`` to an instance at
``GET /api/v1/steering/services/{serviceId}/resolve?clientSite=…&flow=…``. The first resolution picks
from the published route by weight (a hash of the flow id, so a balanced set spreads flows by its
weights and the same flow asks the same way), and pins it at ``/steering/flows/<serviceId>/<flow>``
under a store lease of the service's ``flowAffinity.timeoutSeconds``; each later resolution renews
the lease and keeps the pinned instance as long as the route's ``eligible`` list still holds it: an
instance the route used within the affinity timeout that meets the SLA now — so a flow stays put
when damping moves the route itself, and leaves once its instance breaks the SLA.
An idle flow's pin expires with its lease.
"""

from __future__ import annotations

import hashlib
import json
import math
from dataclasses import dataclass
from typing import Any

from drods.model import jsondoc
from drods.model.keys import flow_key
from drods.store import LeaseNotFound, Store


@dataclass(frozen=True, slots=True)
class Resolution:
    cluster: str
    pinned: bool  # True: the flow kept the instance it had
    reason: str


def pick(instances: list[dict[str, Any]], flow: str) -> str:
    """The instance a new flow gets: by weight, from a hash of its id."""
    u = int.from_bytes(hashlib.sha256(flow.encode()).digest()[:8], "big") / 2.0**64
    acc = 0.0
    for inst in instances:
        acc += float(inst.get("weight") or 0.0)
        if u < acc:
            return str(inst["cluster"])
    return str(instances[-1]["cluster"])


async def resolve(store: Store, service_id: str, route: dict[str, Any], flow: str,
                  timeout_s: float) -> Resolution | None:
    """``route``: the client site's published route; None when it has no instance."""
    instances = route.get("instances") or []
    if not instances:
        return None
    eligible = set(route.get("eligible") or [])
    key = flow_key(service_id, flow)
    kv = await store.get(key)
    if kv is not None:
        doc = json.loads(kv.value)
        if doc.get("cluster") in eligible and doc.get("clientSite") == route.get("clientSite"):
            try:
                await store.keep_alive(int(doc["lease"]))
                return Resolution(str(doc["cluster"]), True, "the flow keeps its instance (within the SLA)")
            except LeaseNotFound:  # expired meanwhile: pin again below
                pass
        why = f"{doc.get('cluster')} no longer meets the SLA for {route.get('clientSite')}"
    else:
        why = "a new flow"
    cluster = pick(instances, flow)
    lease = await store.grant_lease(max(1, math.ceil(timeout_s)))
    body = {"cluster": cluster, "clientSite": route.get("clientSite"), "lease": lease.id}
    await store.put(key, jsondoc.dumps(body), lease=lease.id)
    return Resolution(cluster, False, f"{why}: pinned to {cluster} from the route")
