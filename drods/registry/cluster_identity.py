"""One Cluster per member: a second registration of the same member under another name is refused
when it is written, naming the first — as ``karmadactl join`` refuses it ("the same cluster has been
registered with name …"). Two registrations would each get a share of a divided workload and report
it running while the member holds one copy.

A member is known by ``spec.id``, which ``drods cluster join`` reads from it (its kube-system
namespace's UID, Karmada's cluster ID); a Cluster written without one is not checked.
"""

from __future__ import annotations

from typing import Any

from drods.errors import Conflict
from drods.model.kinds import CLUSTER, Kind
from drods.registry.objects import ObjectRegistry


async def one_cluster_per_member(registry: ObjectRegistry, kind: Kind, obj: dict[str, Any]) -> None:
    if kind is not CLUSTER:
        return
    ident = (obj.get("spec") or {}).get("id")
    if not ident:
        return
    name = obj["metadata"]["name"]
    clusters, _ = await registry.list(CLUSTER)
    for other in clusters:
        if other["metadata"]["name"] != name and (other.get("spec") or {}).get("id") == ident:
            raise Conflict(f"the same cluster has been registered with name {other['metadata']['name']!r} "
                           f"(cluster ID {ident}); unjoin it first to join it as {name!r}",
                           {"kind": "Cluster", "name": name, "id": ident, "registeredAs": other["metadata"]["name"]},
                           code="CLUSTER_ALREADY_JOINED")
