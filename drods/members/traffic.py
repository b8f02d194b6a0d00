"""A member's network traffic, measured from its kubelets' stats summaries (S5).

Each node's kubelet reports cumulative ``node.network.rxBytes`` / ``txBytes`` at
``/api/v1/nodes/{node}/proxy/stats/summary`` (through the API server's node proxy). `TrafficMeter`
keeps the last sample per node and turns two samples into bytes per second; a node seen for the
first time, or whose counter went backwards (a kubelet restart), gives no rate. With no rate from
any node the traffic is unknown — ``None``, never 0.

A summary reads at most ``per_summary`` nodes' counters, in turn (`TrafficMeter.due`): each read is
a request through the member's API server, and a 50-node member read whole every summary made
100 members cost the control plane and the members more than everything else they did. A node's
rate is kept until its next turn; the cluster's traffic is the sum over the nodes that have one.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
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

    per_summary: int = 0  # nodes read per summary (0: every node)
    last: dict[str, Sample] = field(default_factory=dict)
    rate: dict[str, tuple[float, float]] = field(default_factory=dict)  # node → its last (rx, tx) rate
    _turn: int = 0

    def due(self, names: list[str]) -> list[str]:
        """The nodes whose counters this summary reads: the next ``per_summary`` in turn."""
        nodes = sorted(names)
        if not self.per_summary or len(nodes) <= self.per_summary:
            return nodes
        start = self._turn % len(nodes)
        self._turn = start + self.per_summary
        return (nodes[start:] + nodes[:start])[:self.per_summary]

    def rates(self, samples: Mapping[str, Sample], nodes: Collection[str] | None = None) -> tuple[float, float] | None:
        """(rx, tx) bytes per second summed over the nodes with a rate; None when none has one.
        ``nodes``: the cluster's nodes now (default: the sampled ones) — the others are forgotten."""
        for node, (t, r, x) in samples.items():
            prev = self.last.get(node)
            self.last[node] = (t, r, x)
            if prev is None or t <= prev[0] or r < prev[1] or x < prev[2]:
                self.rate.pop(node, None)
                continue
            self.rate[node] = ((r - prev[1]) / (t - prev[0]), (x - prev[2]) / (t - prev[0]))
        keep = set(samples) if nodes is None else set(nodes)
        for gone in self.last.keys() - keep:
            del self.last[gone]
        for gone in self.rate.keys() - keep:
            del self.rate[gone]
        if not self.rate:
            return None
        return sum(r for r, _ in self.rate.values()), sum(x for _, x in self.rate.values())
