"""A member's network traffic, measured from its kubelets' stats summaries (S5).

Each node's kubelet reports cumulative ``node.network.rxBytes`` / ``txBytes`` at
``/api/v1/nodes/{node}/proxy/stats/summary`` (through the API server's node proxy). `TrafficMeter`
keeps the last sample per node and turns two samples into bytes per second; a node seen for the
first time, or whose counter went backwards (a kubelet restart), gives no rate. With no rate from
any node the traffic is unknown — ``None``, never 0.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from drods.model.timefmt import parse_rfc3339

Sample = tuple[float, float, float]  # (time, rxBytes, txBytes)


def node_sample(summary: Mapping[str, object], fallback_time: float) -> Sample | None:
    """(time, rx, tx) from a stats summary document; None when it carries no network counters."""
    node = summary.get("node")
    net = node.get("network") if isinstance(node, Mapping) else None
    if not isinstance(net, Mapping):
        return None
    rx, tx = net.get("rxBytes"), net.get("txBytes")
    if not isinstance(rx, int | float) or not isinstance(tx, int | float):
        return None
    at = parse_rfc3339(net.get("time")) if isinstance(net.get("time"), str) else None
    return (at if at is not None else fallback_time, float(rx), float(tx))


@dataclass
class TrafficMeter:
    """Bytes per second received and sent by a cluster's nodes, from successive counter samples."""

    last: dict[str, Sample] = field(default_factory=dict)

    def rates(self, samples: Mapping[str, Sample]) -> tuple[float, float] | None:
        """(rx, tx) bytes per second summed over the nodes with two samples; None when none has."""
        rx = tx = 0.0
        known = False
        for node, (t, r, x) in samples.items():
            prev = self.last.get(node)
            self.last[node] = (t, r, x)
            if prev is None or t <= prev[0] or r < prev[1] or x < prev[2]:
                continue
            rx += (r - prev[1]) / (t - prev[0])
            tx += (x - prev[2]) / (t - prev[0])
            known = True
        for gone in self.last.keys() - samples.keys():
            del self.last[gone]
        return (rx, tx) if known else None
