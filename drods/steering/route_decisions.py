"""A route change as a decision record (X1, `drods.model.decision`): per client site whose route changed
— its instances, or whether it meets the SLA (a route turning ``MAX`` and back) —, the instances
chosen now (with the metric that chose each and its reason) and the ones they replaced, each replaced
one as it evaluates NOW (``Evaluated``): whether it still meets the SLA, its metric, and its own
reason (the threshold it breaks, or how much it lost by in the metric the service is evaluated on).
With a latency lookup, the measured delay from the site to each of them (``inputs.latencies``). The
runner-up is the first replaced instance against the instance now chosen for its site, compared on the
strategy's key — the evaluation function's metric (e.g. the end-to-end delay, network + processing)
for ``experienceFirst``, the cost for ``costFirst``, the load for ``resourceFirst``."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from drods.model.decision import ROUTE


def _by_site(spec: Mapping[str, Any] | None) -> dict[str, list[dict[str, Any]]]:
    return {str(r.get("clientSite")): list(r.get("instances") or []) for r in (spec or {}).get("routes") or []}


def _clusters(instances: list[dict[str, Any]]) -> list[str]:
    return sorted(str(i.get("cluster")) for i in instances)


def _is_max(instances: list[dict[str, Any]]) -> bool:
    return any(i.get("metric") == "MAX" for i in instances)


Latency = Callable[[str, str], float | None]  # (client site, cluster) → measured delay in ms, None: unmeasured
# (client site, cluster) → the pair as evaluated now: {"feasible", "metric" (a number or "MAX"), "key" (the
# strategy's ranking value), "delayMs", "networkMs", "processingMs", "broken" (the SLA threshold it
# breaks, as text)}, or {"feasible": False, "reason"} when the cluster is no longer an instance; None: unknown.
PairFacts = Callable[[str, str], Mapping[str, Any] | None]


@dataclass(frozen=True, slots=True)
class Evaluated:
    """What the recomputation that published the route saw."""

    pair: PairFacts
    unrouted: Mapping[str, str] = field(default_factory=dict)  # client site → why it has no instance


def _unit(strategy: str, evaluation: str) -> tuple[str, str]:
    """The strategy's key as (unit, what it is) for a sentence."""
    if strategy == "costFirst":
        return "/h", "in cost"
    if strategy == "resourceFirst":
        return " % load", "in load"
    if evaluation == "e2eDelay":
        return " ms", "end to end"
    if evaluation == "weightedDelay":
        return " ms", "in weighted delay"
    return " points", f"in {evaluation}"


def _shown(value: float, unit: str) -> str:
    return f"{value:.2f}{unit}" if unit == "/h" else f"{value:.1f}{unit}"


def _key_value(strategy: str, facts: Mapping[str, Any]) -> float | None:
    key = facts.get("key")
    if not isinstance(key, int | float):
        return None
    return float(key) * 100.0 if strategy == "resourceFirst" else float(key)


def _parts(facts: Mapping[str, Any]) -> str:
    d, n, p = (facts.get(k) for k in ("delayMs", "networkMs", "processingMs"))
    if not all(isinstance(x, int | float) for x in (d, n, p)):
        return ""
    return f"delay {d:.1f} ms = network {n:.1f} + processing {p:.1f}"


def _replaced_reason(facts: Mapping[str, Any] | None, winner: Mapping[str, Any] | None, against: str | None,
                     strategy: str, evaluation: str) -> tuple[str, float | None]:
    """A replaced instance's own reason as it evaluates now, and how much it lost by (None: it is not
    comparable — it breaks the SLA, is no longer an instance, or is not known)."""
    if facts is None:
        return "replaced; not evaluated now (no status for it)", None
    if not facts.get("feasible"):
        if facts.get("reason"):
            return str(facts["reason"]), None
        parts = _parts(facts)
        return f"breaks the SLA: {facts.get('broken') or 'unreachable'}" + (f" ({parts})" if parts else ""), None
    unit, what = _unit(strategy, evaluation)
    mine = _key_value(strategy, facts)
    theirs = _key_value(strategy, winner) if winner is not None else None
    parts = _parts(facts)
    if mine is None or theirs is None or against is None:
        return "meets the SLA; replaced" + (f" ({parts})" if parts else ""), None
    lost = round(mine - theirs, 3)
    text = (f"lost by {_shown(lost, unit)} {what}: {_shown(mine, unit)} against {_shown(theirs, unit)} "
            f"for {against}" if lost > 0 else
            f"meets the SLA, {_shown(-lost, unit)} better {what} than {against} "
            f"({_shown(mine, unit)} against {_shown(theirs, unit)}), but not chosen")
    return text + (f"; {parts}" if parts else ""), lost


def _differences(facts: Mapping[str, Any], winner: Mapping[str, Any], lost: float | None) -> dict[str, float]:
    out: dict[str, float] = {} if lost is None else {"metric": lost}
    for k in ("delayMs", "networkMs", "processingMs"):
        a, b = facts.get(k), winner.get(k)
        if isinstance(a, int | float) and isinstance(b, int | float):
            out[k] = round(float(a) - float(b), 3)
    return out


def route_decision(old: Mapping[str, Any] | None, new: Mapping[str, Any],
                   latency: Latency | None = None, now: Evaluated | None = None) -> dict[str, Any] | None:
    """The decision a newly published ServiceRoute spec took against the previous one; None when no
    client site's set of instances changed nor whether it meets the SLA (a metric refresh is not a
    decision). ``now``: the pairs as evaluated when it was published (without it, a replaced instance
    is named with what was last published of it)."""
    before, after = _by_site(old), _by_site(new)
    changed = [s for s in sorted(after) if _clusters(after[s]) != _clusters(before.get(s, []))
               or (old is not None and _is_max(after[s]) != _is_max(before.get(s, [])))]
    if not changed:
        return None
    strategy, evaluation = str(new.get("strategy") or ""), str(new.get("evaluation") or "")
    options: list[dict[str, Any]] = []
    moves: list[str] = []
    runner_up: dict[str, Any] | None = None
    unrouted = now.unrouted if now is not None else {}
    for site in changed:
        now_used = {str(i.get("cluster")) for i in after[site]}
        for i in after[site]:
            options.append({"name": f"{site} → {i.get('cluster')}", "chosen": True,
                            "feasible": i.get("metric") != "MAX", "metric": i.get("metric"),
                            "weight": i.get("weight"), "reason": i.get("reason")})
        top = max(after[site], key=lambda i: float(i.get("weight") or 0.0), default=None)
        against = f"{site} → {top.get('cluster')}" if top is not None else None
        winner = now.pair(site, str(top.get("cluster"))) if now is not None and top is not None else None
        for i in before.get(site, []):
            cluster = str(i.get("cluster"))
            if cluster in now_used:
                continue
            name = f"{site} → {cluster}"
            if now is None:
                options.append({"name": name, "chosen": False, "metric": i.get("metric"),
                                "reason": f"replaced (its metric when last published: {i.get('metric')})"})
                continue
            facts = now.pair(site, cluster)
            reason, lost = _replaced_reason(facts, winner, against, strategy, evaluation)
            if top is None:
                reason += f"; the site has no instance now: {unrouted.get(site) or 'none is reachable'}"
            options.append({"name": name, "chosen": False, "feasible": bool(facts and facts.get("feasible")),
                            "metric": (facts or {}).get("metric"), "reason": reason})
            if runner_up is None and against is not None and facts is not None:
                runner_up = {"name": name, "against": against, "lostBy": lost,
                             "differences": _differences(facts, winner or {}, lost),
                             "why": f"{name}: {reason}; {against} chosen: {top.get('reason') if top else ''}"}
        move = (f"{site}: {', '.join(_clusters(before.get(site, []))) or 'none'} → "
                f"{', '.join(_clusters(after[site])) or 'none'}")
        if _is_max(after[site]):
            move += " (MAX: no instance meets the SLA)"
        elif _is_max(before.get(site, [])) and after[site]:
            move += " (meets the SLA again)"
        elif not after[site] and site in unrouted:
            move += f" ({unrouted[site]})"
        moves.append(move)
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
            "summary": "; ".join(moves), "runnerUp": runner_up,
            "source": {"journal": "decisions", "serviceRoute": new.get("serviceId")}}
