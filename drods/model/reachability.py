"""Whether a pull member's agent can reach its member's API, as the agent says (A3, M2).

A pull member is judged by its agent's reports; an agent that cannot read its member sends none, and
silence alone takes ``pullGraceSeconds`` (180 s) to turn the cluster NotReady. So the agent says so at
once, as Karmada's agent reports ``ClusterNotReachable``: a domain event (``POST
/api/v1/metrics/events``, its ``cluster-agent`` token's own cluster) of type ``ClusterNotReachable``
when its member stops answering, and ``ClusterReachable`` when it answers again. Both land under
``/events/clusters/<cluster>/<nanoseconds>`` (the server's receipt time, the clock the reports' times
come from); the health controller holds each cluster's newest.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from drods.model.keys import CLUSTER_EVENTS_PREFIX

NOT_REACHABLE = "ClusterNotReachable"
REACHABLE = "ClusterReachable"


@dataclass(frozen=True, slots=True)
class Reachability:
    cluster: str
    reachable: bool
    at: float  # when the control plane received it (epoch seconds)
    message: str


def event(cluster: str, reachable: bool, message: str) -> dict[str, str]:
    """The event body an agent posts."""
    return {"cluster": cluster, "type": REACHABLE if reachable else NOT_REACHABLE,
            "severity": "info" if reachable else "critical", "message": message[:4096]}


def read(key: str, value: bytes) -> Reachability | None:
    """An agent's reachability event from its stored key and body; None for any other event."""
    cluster, _, ns = key[len(CLUSTER_EVENTS_PREFIX):].rpartition("/")
    try:
        doc = json.loads(value)
        at = int(ns) / 1e9
    except ValueError:
        return None
    kind = doc.get("type") if isinstance(doc, dict) else None
    if not cluster or kind not in (NOT_REACHABLE, REACHABLE):
        return None
    return Reachability(cluster, kind == REACHABLE, at, str(doc.get("message") or ""))
