"""Flow affinity (SPEC C7; RFC 10053's "flow affinity"): a flow keeps its instance while that
instance stays reachable and within the SLA, until its affinity timeout.

A consumer resolves ``(service, client site, flow id)`` to an instance at
``GET /api/v1/steering/services/{serviceId}/resolve?clientSite=…&flow=…``. The first resolution picks
from the published route by weight (a hash of the flow id, so a balanced set spreads flows by its
weights and the same flow asks the same way), and pins it at ``/steering/flows/<serviceId>/<flow>``
under a store lease of the service's ``flowAffinity.timeoutSeconds``; each later resolution renews
the lease and keeps the pinned instance as long as the route's ``eligible`` list still holds it: an
instance the route used within the affinity timeout that meets the SLA now — so a flow stays put
when damping moves the route itself, and leaves once its instance breaks the SLA. Where no instance
meets the SLA (``MAX``), a flow keeps its instance while the route still names it.
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
                  timeout_s: float, *, pin: bool = True) -> Resolution | None:
    """``route``: the client site's published route; None when it has no instance. ``pin`` False: only
    look (``?dryRun=All``) — the answer the flow would get, its pin neither written nor renewed.

    A flow keeps its instance (``pinned: true``) while the route's ``eligible`` list holds it — or,
    where no instance meets the SLA (the route is ``MAX``, ``eligible`` empty), while the route still
    names it: moving would gain nothing, and re-pinning on each call said ``pinned: false`` every time.
    Otherwise it is pinned afresh, the reason naming why: a new flow, an expired pin, an instance no
    longer eligible, or a flow id pinned from another client site."""
    instances = route.get("instances") or []
    if not instances:
        return None
    site = route.get("clientSite")
    eligible = set(route.get("eligible") or [])
    offered = {str(i.get("cluster")) for i in instances}
    key = flow_key(service_id, flow)
    kv = await store.get(key)
    if kv is None:
        why = "a new flow"
    else:
        doc = json.loads(kv.value)
        had = doc.get("cluster")
        if doc.get("clientSite") != site:
            why = f"flow id {flow!r} was pinned to {had} from client site {doc.get('clientSite')}, not {site}"
        elif had in eligible or (not eligible and had in offered):
            try:
                if pin:
                    await store.keep_alive(int(doc["lease"]))
            except LeaseNotFound:  # expired, its key not yet swept
                why = f"the flow's pin to {had} expired"
            else:
                kept = "within the SLA" if had in eligible else \
                    f"no instance meets the SLA for {site}; the route still names it"
                return Resolution(str(had), True, f"the flow keeps its instance ({kept})")
        elif eligible:
            why = f"{had} is no longer eligible for {site} (it does not meet the SLA now, or the route " \
                "has not used it within the affinity timeout)"
        else:
            why = f"{had} is no longer eligible for {site} (no instance meets the SLA, and the route no " \
                "longer names it)"
    cluster = pick(instances, flow)
    if not pin:
        return Resolution(cluster, False, f"{why}: would be pinned to {cluster} from the route (dry run: not pinned)")
    lease = await store.grant_lease(max(1, math.ceil(timeout_s)))
    body = {"cluster": cluster, "clientSite": site, "lease": lease.id}
    await store.put(key, jsondoc.dumps(body), lease=lease.id)
    return Resolution(cluster, False, f"{why}: pinned to {cluster} from the route")
