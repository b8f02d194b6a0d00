"""A plan's estimate, recorded when it starts (SPEC F3, C2): the bytes its data step moves and the
copy time they take, with where each figure comes from — or that it is unknown.

* **Bytes** — each per-replica claim of the workload's ``volumeClaimTemplates`` at its requested
  ``storage``, times the replicas on the source: the claims' capacity, an upper bound of what they
  hold. A claim the pod template names directly lives in the member with a size the template does
  not state: it is listed as unknown, and the bytes then count only what is known.
* **Bandwidth** — the pair's bandwidth in C2's network status (either direction, measured or
  reported), else the narrower of the two clusters' declared ``spec.network.bandwidthMbps``.
* **Copy time** — bytes × 8 ÷ bandwidth; absent (never a made-up figure) when either is unknown.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

from drods.model.quantity import quantity
from drods.model.volume_claims import Claims

Obj = dict[str, Any]
ReadPair = Callable[[str, str], Awaitable[Mapping[str, Any] | None]]


def template_bytes(workload: Mapping[str, Any] | None) -> dict[str, int | None]:
    """Per ``volumeClaimTemplates`` name, its requested storage in bytes (None: not stated or unreadable)."""
    out: dict[str, int | None] = {}
    for t in ((workload or {}).get("spec") or {}).get("volumeClaimTemplates") or []:
        if not isinstance(t, dict) or not (t.get("metadata") or {}).get("name"):
            continue
        asked = (((t.get("spec") or {}).get("resources") or {}).get("requests") or {}).get("storage")
        try:
            out[str(t["metadata"]["name"])] = int(quantity(asked)) if asked else None
        except (ValueError, ArithmeticError):
            out[str(t["metadata"]["name"])] = None
    return out


def _mbps(doc: Mapping[str, Any] | None) -> float | None:
    value = (doc or {}).get("bandwidthMbps")
    return float(value) if isinstance(value, int | float) and value > 0 else None


async def bandwidth(source: str, target: str, clusters: Mapping[str, Mapping[str, Any]],
                    read_pair: ReadPair) -> tuple[float | None, str]:
    """(Mbps, where it comes from) between two clusters; (None, why) when unknown."""
    for a, b in ((source, target), (target, source)):
        pair = await read_pair(a, b)
        got = _mbps(pair) or _mbps((pair or {}).get("reported"))  # a probe measures no bandwidth
        if got is not None:
            return got, f"network status {a} → {b}"
    declared = [_mbps((clusters.get(c) or {}).get("network")) for c in (source, target)]
    known = [d for d in declared if d is not None]
    if len(known) == 2:
        return min(known), "the narrower of the clusters' declared spec.network.bandwidthMbps"
    return None, f"no bandwidth known between {source} and {target} (network status or spec.network.bandwidthMbps)"


def estimate(workload: Mapping[str, Any] | None, claims: Claims, replicas: int, mbps: float | None,
             mbps_from: str) -> Obj | None:
    """``status.estimate`` of a plan whose workload keeps data in claims; None when it keeps none."""
    if not claims:
        return None
    name = str(((workload or {}).get("metadata") or {}).get("name") or "")
    sizes = template_bytes(workload)
    known = 0
    unknown: list[str] = []
    for i in range(max(replicas, 1)):
        for t in claims.templates:
            size = sizes.get(t)
            if size is None:
                unknown.append(f"{t}-{name}-{i}")
            else:
                known += size
    unknown += sorted(set(claims.shared.values()))
    out: Obj = {"bytes": known if known or not unknown else None,
                "bytesFrom": "the claims' requested storage (their capacity: an upper bound)"}
    if unknown:
        out["unknownClaims"] = unknown
    out["bandwidthMbps"], out["bandwidthFrom"] = mbps, mbps_from
    if out["bytes"] is not None and mbps is not None:
        out["copySeconds"] = round(out["bytes"] * 8 / (mbps * 1e6), 1)
    parts = [f"{out['bytes']} bytes" if out["bytes"] is not None else "size unknown"]
    if unknown:
        parts.append(f"{len(unknown)} claim(s) of unknown size")
    parts.append(f"~{out['copySeconds']:g} s at {mbps:g} Mbps" if "copySeconds" in out else mbps_from)
    out["message"] = "; ".join(parts)
    return out


def decode_pair(raw: bytes | None) -> Mapping[str, Any] | None:
    """A stored network status pair (``/status/network/<from>/<to>``)."""
    if raw is None:
        return None
    try:
        doc = json.loads(raw)
    except ValueError:
        return None
    return doc if isinstance(doc, dict) else None
