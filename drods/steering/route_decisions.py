"""A route change as a decision record (X1, `drods.model.decision`): per client site whose instances
changed, the instances chosen now (with the metric that chose each and its reason) and the ones
they replaced; with a latency lookup, the measured delay from the site to each of them
(``inputs.latencies``) and the runner-up — the replaced instance — with its delay against the new one's."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from drods.model.decision import ROUTE


def _by_site(spec: Mapping[str, Any] | None) -> dict[str, list[dict[str, Any]]]:
    return {str(r.get("clientSite")): list(r.get("instances") or []) for r in (spec or {}).get("routes") or []}


def _clusters(instances: list[dict[str, Any]]) -> list[str]:
    return sorted(str(i.get("cluster")) for i in instances)


Latency = Callable[[str, str], float | None]  # (client site, cluster) → measured delay in ms, None: unmeasured


def _runner_up(options: list[dict[str, Any]]) -> dict[str, Any] | None:
    """The first replaced instance against the instance of its site now chosen, on measured delay."""
    for o in options:
        if o["chosen"] or o.get("latencyMs") is None:
            continue
        site = o["name"].split(" → ")[0]
        new = next((c for c in options if c["chosen"] and c["name"].split(" → ")[0] == site
                    and c.get("latencyMs") is not None), None)
        if new is None:
            continue
        diff = round(float(o["latencyMs"]) - float(new["latencyMs"]), 3)  # > 0: the replaced one is slower
        why = (f"{o['name']} measured {o['latencyMs']:g} ms against {new['latencyMs']:g} ms for {new['name']}; "
               f"chosen by {new.get('reason')}")
        return {"name": o["name"], "against": new["name"], "lostBy": diff, "differences": {"latencyMs": diff},
                "why": why}
    return None


def route_decision(old: Mapping[str, Any] | None, new: Mapping[str, Any],
                   latency: Latency | None = None) -> dict[str, Any] | None:
    """The decision a newly published ServiceRoute spec took against the previous one; None when no
    client site's set of instances changed (a metric refresh is not a decision)."""
    before, after = _by_site(old), _by_site(new)
    changed = [s for s in sorted(after) if _clusters(after[s]) != _clusters(before.get(s, []))]
    if not changed:
        return None
    options: list[dict[str, Any]] = []
    moves: list[str] = []
    for site in changed:
        now_used = {str(i.get("cluster")) for i in after[site]}
        for i in after[site]:
            options.append({"name": f"{site} → {i.get('cluster')}", "chosen": True, "feasible": True,
                            "metric": i.get("metric"), "weight": i.get("weight"), "reason": i.get("reason")})
        why = str(after[site][0].get("reason")) if after[site] else "no instance"
        for i in before.get(site, []):
            if str(i.get("cluster")) not in now_used:
                options.append({"name": f"{site} → {i.get('cluster')}", "chosen": False, "feasible": True,
                                "metric": i.get("metric"), "reason": f"replaced: {why}"})
        moves.append(f"{site}: {', '.join(_clusters(before.get(site, []))) or 'none'} → "
                     f"{', '.join(_clusters(after[site])) or 'none'}")
    latencies: dict[str, float | None] = {}
    if latency is not None:
        for o in options:
            site, _, cluster = o["name"].partition(" → ")
            o["latencyMs"] = latencies[o["name"]] = latency(site, cluster)
    reg = new.get("registration") or {}
    return {"type": ROUTE,
            "subject": {"kind": str(reg.get("kind") or "ServiceRegistration"),
                        "namespace": str(reg.get("namespace") or "default"), "name": str(reg.get("name") or "")},
            "trigger": {"reason": "RouteChanged" if old else "FirstRoutes", "sites": changed},
            "inputs": {"steering": {"serviceId": new.get("serviceId"), "strategy": new.get("strategy"),
                                    "evaluation": new.get("evaluation"), "changes": new.get("changes")},
                       **({"latencies": latencies} if latency is not None else {})},
            "options": options, "optionsTopK": None, "optionsOmitted": 0,
            "outcome": {"routes": [r for r in new.get("routes") or [] if str(r.get("clientSite")) in changed]},
            "summary": "; ".join(moves), "runnerUp": _runner_up(options),
            "source": {"journal": "decisions", "serviceRoute": new.get("serviceId")}}
