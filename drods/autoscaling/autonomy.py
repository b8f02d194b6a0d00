"""Regional autonomy, the control plane's side (SPEC M2; issue "controllers that act", part 2).

A pull-mode agent cut off from the control plane scales its cluster's share of a workload within
the bounds of the workload's FederatedHPA (`drods.members.autonomy`). This module is what the
control plane does for it:

* `cluster_autoscalers` — what the agent caches while it can: for each workload placed on its
  cluster that a FederatedHPA owns, the bounds in effect, the metric targets, the behaviour, the
  desired total and the cluster's share of it;
* `adopt` — when the agent is back, its decisions (each with its time, local counts and the total
  they imply). The last one per workload becomes the autoscaler's ``status.desiredReplicas`` — the
  new desired total, clamped to the bounds in effect now — the Binding's placement records the
  agent's local count (so the scheduler, which keeps existing replicas, divides the new total from
  what really runs rather than moving the agent's replicas away), and ``status.autonomy`` records the
  adoption; the controller then holds that count for ``adopt_hold_s`` (no fight) before its own
  decisions resume. Every decision and the adoption go to the autoscaling journal, keyed so a
  report sent twice is recorded once and adopted once (no duplicate). A decision about a workload
  or autoscaler deleted meanwhile is dropped (``deleted``): the delete wins, and the agent prunes
  the copy when its Works relist (no lost delete). So is one about a workload no longer placed on
  the agent's cluster (``moved``): an agent scales only its own cluster's share.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from drods.errors import AlreadyExists, Conflict, NotFound
from drods.machinery.journal import Journal
from drods.model.autoscaling import owner, scaled_workload
from drods.model.detection import binding_is_for, binding_name
from drods.model.kinds import BINDING, FEDERATED_HPA, by_kind
from drods.model.timefmt import parse_rfc3339, rfc3339_ms
from drods.registry.objects import ObjectRegistry
from drods.store.cas import read_modify_write

Workload = tuple[str, str, str, str]  # apiVersion, kind, namespace, name
REASON_LOCAL = "agent decision (control plane unreachable)"
REASON_ADOPTED = "adopted from agent"


def workload_id(w: Workload) -> str:
    """``KIND/NAMESPACE/NAME``, the journal's workload key."""
    return f"{w[1]}/{w[2]}/{w[3]}"


@dataclass(frozen=True, slots=True)
class Decision:
    """One local decision of an agent: its cluster's replicas went ``local_from`` → ``local_to``,
    making the workload's total ``total``."""

    workload: Workload
    autoscaler: str  # the FederatedHPA's name (same namespace as the workload)
    uid: str  # its uid when the agent cached it: a recreated autoscaler is another one
    at: float
    local_from: int
    local_to: int
    total: int
    utilisation: Mapping[str, float] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class Result:
    workload: str
    outcome: str  # adopted | duplicate | deleted | moved
    desired: int | None
    message: str

    def to_dict(self) -> dict[str, Any]:
        return {"workload": self.workload, "outcome": self.outcome, "desiredReplicas": self.desired,
                "message": self.message}


def _int(v: Any) -> int | None:
    return v if isinstance(v, int) and not isinstance(v, bool) else None


def bounds(hpa: Mapping[str, Any]) -> tuple[int, int]:
    """(min, max) in effect: the status's (a cron rule may move them), else the spec's."""
    spec, status = hpa.get("spec") or {}, hpa.get("status") or {}
    lo = _int(status.get("minReplicas"))
    hi = _int(status.get("maxReplicas"))
    lo = lo if lo is not None else int(spec.get("minReplicas") or 1)
    hi = hi if hi is not None else int(spec.get("maxReplicas") or lo)
    return min(lo, hi), hi


async def cluster_autoscalers(registry: ObjectRegistry, cluster: str) -> list[dict[str, Any]]:
    """For each workload with replicas on ``cluster`` and a FederatedHPA owning its total: what the
    cluster's agent needs to scale its share alone."""
    hpas, _ = await registry.list(FEDERATED_HPA)
    if not hpas:
        return []
    out: list[dict[str, Any]] = []
    for b in await registry.scan(BINDING):
        placement = {p.get("cluster"): _int(p.get("replicas")) for p in (b.get("status") or {}).get("placement") or []
                     if isinstance(p, dict)}
        local = placement.get(cluster)
        res = (b.get("spec") or {}).get("resource") or {}
        if local is None or not isinstance(res, dict):
            continue
        w: Workload = (str(res.get("apiVersion")), str(res.get("kind")), str(res.get("namespace") or "default"),
                       str(res.get("name")))
        hpa = owner(hpas, w)
        if hpa is None or hpa.get("kind") != FEDERATED_HPA.kind:
            continue
        spec, meta = hpa.get("spec") or {}, hpa.get("metadata") or {}
        lo, hi = bounds(hpa)
        out.append({"workload": {"apiVersion": w[0], "kind": w[1], "namespace": w[2], "name": w[3]},
                    "autoscaler": {"name": meta.get("name"), "uid": meta.get("uid")},
                    "minReplicas": lo, "maxReplicas": hi, "metrics": spec.get("metrics") or [],
                    "behavior": spec.get("behavior"), "total": int((b.get("spec") or {}).get("replicas") or 0),
                    "local": local})
    return out


async def _place_local(registry: ObjectRegistry, binding: Mapping[str, Any], cluster: str, local: int,
                       total: int) -> bool:
    """Record on the Binding's placement what the agent runs (its local count, within the adopted
    total less the other clusters'), so the scheduler, keeping existing replicas, divides the new
    total from what really runs instead of moving the agent's replicas elsewhere. False on a conflict."""
    status = dict(binding.get("status") or {})
    rows = [dict(p) for p in status.get("placement") or [] if isinstance(p, dict)]
    others = sum(int(p.get("replicas") or 0) for p in rows if p.get("cluster") != cluster)
    want = max(min(local, total - others), 0)
    if all(p.get("replicas") == want for p in rows if p.get("cluster") == cluster):
        return True
    for p in rows:
        if p.get("cluster") == cluster:
            p["replicas"] = want
    status["placement"] = rows
    try:
        await registry.update_status(BINDING, binding["metadata"]["name"], status,
                                     resource_version=int(binding["metadata"]["resourceVersion"]))
    except (NotFound, Conflict, AlreadyExists):
        return False
    return True


def _gone(hpa: Mapping[str, Any] | None, d: Decision) -> str | None:
    if hpa is None:
        return f"FederatedHPA {d.autoscaler} no longer exists"
    meta = hpa.get("metadata") or {}
    if meta.get("deletionTimestamp"):
        return f"FederatedHPA {d.autoscaler} is being deleted"
    if d.uid and meta.get("uid") != d.uid:
        return f"FederatedHPA {d.autoscaler} was recreated since the agent cached it"
    if scaled_workload(hpa) != d.workload:
        return f"FederatedHPA {d.autoscaler} no longer targets {workload_id(d.workload)}"
    return None


async def adopt(registry: ObjectRegistry, journal: Journal, cluster: str, decisions: Iterable[Decision],
                now: float) -> list[Result]:
    """Adopt ``cluster``'s agent's decisions (see the module docstring); one result per workload."""
    groups: dict[tuple[Workload, str], list[Decision]] = {}
    for d in decisions:
        groups.setdefault((d.workload, d.autoscaler), []).append(d)
    results: list[Result] = []
    for (w, name), group in sorted(groups.items()):
        group.sort(key=lambda d: d.at)
        results.append(await _adopt_one(registry, journal, cluster, w, name, group, now))
    return results


async def _adopt_one(registry: ObjectRegistry, journal: Journal, cluster: str, w: Workload, name: str,
                     group: list[Decision], now: float) -> Result:
    wid = workload_id(w)
    kind = by_kind(w[0], w[1])

    async def attempt(_: int) -> Result:  # compare-and-swap against the controller's own status writes
        hpa = await registry.try_get(FEDERATED_HPA, name, w[2])
        why = _gone(hpa, group[-1])
        if why is None and (kind is None or await registry.try_get(kind, w[3], w[2]) is None):
            why = f"{wid} no longer exists"
        if why is not None or hpa is None:
            return Result(wid, "deleted", None, why or "gone")
        binding = await registry.try_get(BINDING, binding_name(w[1], w[2], w[3]))
        if not binding_is_for(binding, w[1], w[2], w[3], api_version=w[0]):
            binding = None  # another object's Binding under the same name: the workload has none
        placed = {p.get("cluster") for p in ((binding or {}).get("status") or {}).get("placement") or []
                  if isinstance(p, dict)}
        if cluster not in placed:  # moved away meanwhile, or never there: not this agent's to scale
            return Result(wid, "moved", _int((hpa.get("status") or {}).get("desiredReplicas")),
                          f"{wid} is not placed on {cluster}; its decisions are dropped")
        status = dict(hpa.get("status") or {})
        seen = parse_rfc3339((status.get("autonomy") or {}).get("lastDecisionTime"))
        fresh = [d for d in group if seen is None or d.at > seen + 1e-4]
        if not fresh:
            return Result(wid, "duplicate", _int(status.get("desiredReplicas")), "already adopted")
        lo, hi = bounds(hpa)
        last = fresh[-1]
        total = min(max(last.total, lo), hi)
        previous = _int(status.get("desiredReplicas"))
        if binding is not None and not await _place_local(registry, binding, cluster, last.local_to, total):
            raise Conflict(f"the Binding of {wid} changed meanwhile")  # read everything again
        status["desiredReplicas"] = total
        status["lastScaleTime"] = rfc3339_ms(now)
        status["autonomy"] = {"cluster": cluster, "adoptedReplicas": total, "adoptedAt": rfc3339_ms(now),
                              "lastDecisionTime": rfc3339_ms(last.at), "decisions": len(fresh)}
        # The behaviour's windows see the adopted count as a decision of now.
        status["recommendations"] = [*(status.get("recommendations") or []),
                                     {"time": rfc3339_ms(now), "replicas": total}]
        if previous is not None and previous != total:
            status["scaleEvents"] = [*(status.get("scaleEvents") or []),
                                     {"time": rfc3339_ms(now), "change": total - previous}]
        meta = hpa["metadata"]
        try:
            await registry.update_status(FEDERATED_HPA, name, status, w[2],
                                         resource_version=int(meta["resourceVersion"]))
        except NotFound:
            return Result(wid, "deleted", None, f"FederatedHPA {name} no longer exists")
        autoscaler = f"{FEDERATED_HPA.kind}/{w[2]}/{name}"
        uid = str(meta.get("uid"))
        for d in fresh:
            entry = {"autoscaler": autoscaler, "workload": wid, "from": d.total - d.local_to + d.local_from,
                     "to": d.total, "reason": REASON_LOCAL, "cluster": cluster,
                     "local": {"from": d.local_from, "to": d.local_to},
                     "metrics": [{"name": k, "value": round(v, 2)} for k, v in sorted(d.utilisation.items())]}
            await journal.append(entry, ts=d.at, dedup=f"agent-{cluster}-{uid}-{round(d.at * 1000)}")
        await journal.append({"autoscaler": autoscaler, "workload": wid, "from": previous, "to": total,
                              "reason": REASON_ADOPTED, "cluster": cluster, "decisions": len(fresh),
                              "decidedAt": rfc3339_ms(last.at), "bounds": [lo, hi]},
                             ts=now, dedup=f"adopt-{cluster}-{uid}-{round(last.at * 1000)}")
        clamped = "" if total == last.total else f" (clamped to the bounds in effect, [{lo}, {hi}])"
        return Result(wid, "adopted", total, f"desired total {total} from {cluster}'s local decisions{clamped}")

    return await read_modify_write(
        attempt, exhausted=lambda: Conflict(f"the status of FederatedHPA {name} kept changing; report again"))
