"""One decision record (X1) for every decision the control plane takes, whichever component took it.

The components keep their own journals — the scheduler's ``/history/schedules/`` (placements,
reschedules, fleet-change moves), the autoscaler's ``/history/autoscaling/`` (FederatedHPA, cron,
feedback, an agent's local M2 decisions), the descheduler's ``/history/operations/`` (evacuations,
pre-allocations, restores, traffic rebalances; monitoring's events there are not decisions) and
``/history/decisions/`` (route changes, migrations, cache plans, written in this shape) — and this
module reads each entry as one record::

    {"time", "type": Placement | Reschedule | Eviction | Rebalance | Scaling | Route | Migration | CachePlan,
     "subject": {"kind", "namespace", "name"},      # what the decision is about
     "trigger": {"reason", ...},                     # what started it
     "inputs": {section: {...}},                     # what it saw, one named section each
     "options": [{"name", "chosen", "feasible", "total"?, "scores"?: {plugin: score}, "replicas"?,
                  "room"?, "reason"?}],              # what it weighed
     "optionsTopK", "optionsOmitted",                # unchosen feasible options named / not named
     "outcome": {...}, "summary",                    # what was chosen, in one sentence
     "runnerUp": {"name", "lostBy", "differences": {plugin: points}, "why"} | null,
     "source": {"journal", ...}}

``inputs`` is an open map of named sections so that a component can add what it saw (users, measured
latencies, per-cluster usage, prices) without changing the record. The differences that decided a
runner-up's loss are each plugin's weighted contribution to the totals (weight × score difference /
sum of weights), largest first; they add up to ``lostBy``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from drods.model.keys import AUTOSCALING_PREFIX, DECISIONS_PREFIX, OPERATIONS_PREFIX, SCHEDULES_PREFIX

PLACEMENT = "Placement"
RESCHEDULE = "Reschedule"
EVICTION = "Eviction"
REBALANCE = "Rebalance"
SCALING = "Scaling"
ROUTE = "Route"
MIGRATION = "Migration"
CACHE_PLAN = "CachePlan"
TYPES = (PLACEMENT, RESCHEDULE, EVICTION, REBALANCE, SCALING, ROUTE, MIGRATION, CACHE_PLAN)

Record = dict[str, Any]

# A placement names the chosen clusters and this many of the best unchosen feasible ones (by total
# score), each with its per-plugin scores; the other feasible clusters are counted (``optionsOmitted``).
OPTIONS_TOP_K = 10

# scheduleType (``drods.schedulerd.records``) → decision type
_SCHEDULE_TYPES = {"RescheduleTriggered": RESCHEDULE, "FleetChanged": REBALANCE, "Migration": MIGRATION}


@dataclass(frozen=True, slots=True)
class Subject:
    """The object a decision is about."""

    kind: str
    namespace: str
    name: str

    def as_json(self) -> dict[str, str]:
        return {"kind": self.kind, "namespace": self.namespace, "name": self.name}

    def matches(self, kind: str | None, namespace: str | None, name: str | None) -> bool:
        """Kind is compared case-insensitively (``deployment`` as ``kubectl`` accepts it)."""
        return ((kind is None or kind.lower() == self.kind.lower())
                and (namespace is None or namespace == self.namespace)
                and (name is None or name == self.name))


def subject_of(record: Mapping[str, Any]) -> Subject:
    s = record.get("subject") or {}
    return Subject(str(s.get("kind") or ""), str(s.get("namespace") or ""), str(s.get("name") or ""))


def runner_up(options: list[dict[str, Any]], weights: Mapping[str, float],
              held_back: str | None = None, kept_shares: Mapping[str, float] | None = None,
              selection: str | None = None) -> dict[str, Any] | None:
    """Why the best unchosen feasible option lost to the weakest chosen one (``None``: nothing to compare);
    ``held_back``: the decision's users' division held its nearest clusters back (``nearCeiling``);
    ``kept_shares``: the decision kept a placement it did not make afresh (D2), and what each cluster's
    static weight would give it of the total; ``selection``: what chose the clusters other than their
    total score (`selection_rule`)."""
    chosen = [o for o in options if o.get("chosen") and o.get("total") is not None]
    rest = [o for o in options if not o.get("chosen") and o.get("feasible", True) and o.get("total") is not None]
    if not chosen or not rest:
        return None
    best = max(rest, key=lambda o: float(o["total"]))
    weakest = min(chosen, key=lambda o: float(o["total"]))
    a_scores, b_scores = weakest.get("scores") or {}, best.get("scores") or {}
    scored = {p: max(float(w), 0.0) for p, w in weights.items() if p in a_scores and p in b_scores}
    wsum = sum(scored.values()) or 1.0  # the total is the weighted mean over the plugins that scored
    diffs = {p: round(w * (float(a_scores[p]) - float(b_scores[p])) / wsum, 3) for p, w in scored.items() if w > 0}
    ordered = dict(sorted(diffs.items(), key=lambda kv: -abs(kv[1])))
    lost_by = round(float(weakest["total"]) - float(best["total"]), 3)
    return {"name": best["name"], "against": weakest["name"], "lostBy": lost_by, "differences": ordered,
            "why": why_not(best, weakest, lost_by, ordered, held_back, kept_shares, selection)}


COST_FIRST_RULE = "placement.costFirst fills the cheapest clusters first"


def selection_rule(entry: Mapping[str, Any]) -> str | None:
    """What chose a decision's clusters other than their total score, in words (None: the scores did): the
    cost-first division, or the affinity concentration's tier (`drods.scheduler.concentrate`)."""
    if entry.get("division") == "CostFirst":
        return COST_FIRST_RULE
    conc = (entry.get("analysis") or {}).get("concentration")
    if isinstance(conc, Mapping) and conc.get("plugins"):
        plugins = ", ".join(str(p) for p in conc["plugins"])
        return (f"the affinity concentration kept the {conc.get('kept')} of {conc.get('of')} candidates whose "
                f"{plugins} score is within the best tier (from {conc.get('tierFrom')})")
    return None


def why_not(option: Mapping[str, Any], weakest: Mapping[str, Any], lost_by: float,
            differences: Mapping[str, float], held_back: str | None = None,
            kept_shares: Mapping[str, float] | None = None, selection: str | None = None) -> str:
    """One sentence: why a feasible option received nothing."""
    name, other = option["name"], weakest["name"]
    weight = option.get("staticWeight")
    if weight is not None:  # divided by static weights: the weights decided, not the scores
        if weight <= 0:
            return f"{name} has no static weight: no rule of the staticWeightList names it (weight 0)"
        room = option.get("room")
        if room is not None and room <= 0:
            return f"{name} has static weight {weight:g} but had room for no replica"
        share = (kept_shares or {}).get(name, 0.0)
        if share >= 1.0:
            return (f"{name} has static weight {weight:g} (about {share:.1f} replicas of the total) but the "
                    "placement stays where it is: a change of weights or clusters alone moves no replica "
                    "(docs/karmada.md, D2); a scale divides what it adds or removes by them, a reschedule "
                    "divides every replica")
        return (f"{name} has static weight {weight:g} against {other}'s {float(weakest.get('staticWeight') or 0):g}: "
                "the replicas go by weight (ties by name) and were too few for it to get one")
    if selection and selection.startswith(COST_FIRST_RULE):  # the prices chose, whatever the scores
        room = option.get("room")
        if room is not None and room <= 0:
            return f"{name} had room for no replica"
        return f"{name} received nothing: {selection} ({other} is cheaper or the replicas were already placed)"
    # "scored 0.0 points below" read as a loss by the scores
    tie = f"{name} tied with {other} at {float(option['total']):.1f} points; the tie went to {other}"
    if lost_by < 0:  # it scored higher: room or a constraint kept it out, not its score
        room = option.get("room")
        if room is not None and room <= 0:
            return f"{name} scored {-lost_by:.1f} points above {other} but had room for no replica"
        if held_back:
            return f"{name} scored {-lost_by:.1f} points above {other} but the division by users kept it out: " \
                f"{held_back}"
        if selection:
            return f"{name} scored {-lost_by:.1f} points above {other} but {selection}"
        if round(lost_by, 1) == 0:
            return tie
        return (f"{name} scored {-lost_by:.1f} points above {other} but was outside the selection "
                "(spread constraints, affinity tier or the replicas were already placed)")
    if round(lost_by, 1) == 0:
        return tie
    top = [f"{p} {d:+.1f}" for p, d in list(differences.items())[:3] if d]
    detail = f" ({', '.join(top)})" if top else ""
    return f"{name} scored {lost_by:.1f} points below {other}{detail}"


def _schedule_options(entry: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The options a schedule-history entry names: weighed clusters, then the filtered ones."""
    out: list[dict[str, Any]] = []
    for o in entry.get("options") or []:
        out.append({"name": o["cluster"], "chosen": int(o.get("replicas") or 0) > 0, "feasible": True,
                    "total": o.get("total"), "scores": o.get("scores") or {}, "replicas": o.get("replicas", 0),
                    "room": o.get("room"), **({"staticWeight": o["staticWeight"]} if "staticWeight" in o else {})})
    if not out:  # an entry written before options were kept: the chosen clusters' scores only
        scores: Mapping[str, Mapping[str, float]] = entry.get("scores") or {}
        for p in (entry.get("result") or {}).get("placement") or []:
            c = p.get("cluster")
            out.append({"name": c, "chosen": True, "feasible": True, "total": (scores.get("total") or {}).get(c),
                        "scores": {k: v.get(c) for k, v in scores.items() if k != "total" and c in v},
                        "replicas": p.get("replicas")})
    for c, reason in ((entry.get("filters") or {}).get("reasons") or {}).items():
        if not any(o["name"] == c for o in out):
            out.append({"name": c, "chosen": False, "feasible": False, "reason": reason})
    return out


def _schedule_type(entry: Mapping[str, Any]) -> str:
    """A reschedule that moves a workload off a cluster on purpose — failover of a NotReady cluster, a
    drain (`drods.model.annotations.failover_reason` / `drain_reason`), an application failover
    (`drods.controllers.app_failover.failover_message`), a NoExecute taint not tolerated
    (`drods.controllers.failover.taint_reason`), the descheduler's evacuation or pre-allocation
    (`drods.controllers.rescheduler`) — is an eviction; its restore and a traffic rebalance are
    rebalancing."""
    st = str(entry.get("scheduleType") or "")
    words = str((entry.get("trigger") or {}).get("reason") or "").split(" ")
    if st == "RescheduleTriggered":
        if ((len(words) >= 3 and words[0] == "cluster" and words[2] == "NotReady")
                or (len(words) >= 2 and words[0] in ("drain", "evacuate", "preallocate", "taint"))
                or words[:2] == ["application", "failover:"]):
            return EVICTION
        if len(words) >= 2 and (words[0] == "restore" or words[:2] in (["traffic", "rebalance:"], ["peak", "shave"])):
            return REBALANCE
        if (_users_move(entry) or {}).get("pays"):  # replicas moved towards their users (issue 34)
            return REBALANCE
    return _SCHEDULE_TYPES.get(st, PLACEMENT)


def _users_move(entry: Mapping[str, Any]) -> dict[str, Any] | None:
    """The verdict on a move towards a workload's users (`drods.schedulerd.users.MoveVerdict`), if any."""
    move = (entry.get("analysis") or {}).get("usersMove")
    return dict(move) if isinstance(move, Mapping) else None


def _schedule_subject(entry: Mapping[str, Any]) -> Subject:
    w = entry.get("workload") or {}
    if w.get("name"):
        return Subject(str(w.get("kind") or "Binding"), str(w.get("namespace") or "default"), str(w["name"]))
    return Subject("Binding", "default", str(entry.get("binding") or ""))


def from_schedule(entry: Mapping[str, Any]) -> Record:
    """A schedule-history entry (``drods.schedulerd.history``) as a decision record."""
    options, ru = _reasoned_options(entry)
    weights = entry.get("weights") or {}
    result = entry.get("result") or {}
    summary = "; ".join(x for x in (result.get("message") or "", _kept_note(result, _kept_shares(entry, options)))
                        if x)
    trigger = dict(entry.get("trigger") or {})
    trigger.setdefault("reason", entry.get("scheduleType"))
    feasible = (entry.get("candidates") or {}).get("feasible")
    named = sum(1 for o in options if o["feasible"])
    inputs: dict[str, Any] = {
        "division": entry.get("division"),
        "candidates": entry.get("candidates"),
        "adjuster": entry.get("adjuster"),
        "weights": {"used": weights, "profile": entry.get("baseWeights") or {}},
        "filters": {"reasonCounts": (entry.get("filters") or {}).get("reasonCounts") or {}},
        "analysis": entry.get("analysis") or {},
    }
    if entry.get("estimatedHourlyCost") is not None:
        inputs["prices"] = {"estimatedHourlyCost": entry["estimatedHourlyCost"]}
    if entry.get("dataMovedGiBPerHour") is not None:
        inputs["data"] = {"movedGiBPerHour": entry["dataMovedGiBPerHour"]}
    for section in ("users", "latencies", "usage", "migration"):  # sections other components may add
        if entry.get(section) is not None:
            inputs[section] = entry[section]
    if isinstance(users := inputs["analysis"].get("users"), dict):  # the users and each chosen cluster's latency
        inputs.setdefault("users", users)
    return {
        "time": entry.get("time"), "type": _schedule_type(entry), "subject": _schedule_subject(entry).as_json(),
        "trigger": trigger, "inputs": inputs, "options": options,
        "optionsTopK": _top_k(entry), "optionsOmitted": int(entry.get("optionsOmitted")
                                                             or max(0, int(feasible or 0) - named)),
        "outcome": {"phase": result.get("phase"), "placement": result.get("placement") or [],
                    "requested": result.get("requested"), "placed": result.get("placed"),
                    **({"topology": entry["topology"]} if entry.get("topology") else {}),
                    **({"usersMove": move} if (move := _users_move(entry)) is not None else {})},
        "summary": summary, "runnerUp": ru,
        "source": {"journal": "schedules", "binding": entry.get("binding"), "generation": entry.get("generation"),
                   "scheduler": entry.get("scheduler"), "profile": entry.get("profile")},
    }


def _reasoned_options(entry: Mapping[str, Any]) -> tuple[list[dict[str, Any]], dict[str, Any] | None]:
    """A schedule entry's options, each feasible unchosen one with its ``reason``, and the runner-up."""
    options = _schedule_options(entry)
    weights = entry.get("weights") or {}
    users = (entry.get("analysis") or {}).get("users")
    held = str(users["nearCeiling"]) if isinstance(users, dict) and users.get("nearCeiling") else None
    kept = _kept_shares(entry, options)
    rule = selection_rule(entry)
    ru = runner_up(options, weights, held, kept, rule)
    for o in options:
        if o["feasible"] and not o["chosen"] and ru is not None:
            o["reason"] = ru["why"] if o["name"] == ru["name"] else \
                _why_unchosen(o, options, weights, held, kept, rule)
    return options, ru


def with_why_not(entry: Mapping[str, Any]) -> dict[str, Any]:
    """A schedule-history entry with why each feasible cluster it weighed got nothing (``whyNot``: cluster →
    sentence) and its ``runnerUp``, by the rules of the record: the dashboard shows these beside the entry
    and must say what `drods explain` says."""
    options, ru = _reasoned_options(entry)
    return {**entry, "runnerUp": ru,
            "whyNot": {o["name"]: o["reason"] for o in options if o["feasible"] and o.get("reason")}}


def _top_k(entry: Mapping[str, Any]) -> int | None:
    return OPTIONS_TOP_K if entry.get("options") is not None else None


def _kept_note(result: Mapping[str, Any], shares: Mapping[str, float] | None) -> str:
    """A kept static-weight placement (D2) that its weights would divide otherwise, said: every cluster
    may hold replicas, so no why-not says it (a weight edit 1:1 → 3:1 left 2:2, and nothing told why)."""
    if not shares:
        return ""
    placed = {str(p.get("cluster")): int(p.get("replicas") or 0) for p in result.get("placement") or []}
    if all(abs(placed.get(c, 0) - v) < 1 for c, v in shares.items()):
        return ""
    would = ", ".join(f"{c} {v:.3g}" for c, v in sorted(shares.items()))
    return (f"placement kept: the static weights would give {would}; a scale divides what it adds or removes "
            "by them, a reschedule every replica (docs/karmada.md D2)")


def _kept_shares(entry: Mapping[str, Any], options: list[dict[str, Any]]) -> dict[str, float] | None:
    """A static-weight decision that kept a placement (not a first placement, not a reschedule from
    scratch): the replicas each option's weight would give it of the total (None: not such a decision)."""
    if str(entry.get("scheduleType") or "") in ("FirstSchedule", "RescheduleTriggered", ""):
        return None
    total = sum(float(o.get("staticWeight") or 0.0) for o in options if o.get("feasible"))
    requested = (entry.get("result") or {}).get("requested")
    if total <= 0 or not isinstance(requested, int | float):
        return None
    return {o["name"]: float(requested) * float(o.get("staticWeight") or 0.0) / total
            for o in options if o.get("feasible") and o.get("staticWeight") is not None}


def _why_unchosen(option: Mapping[str, Any], options: list[dict[str, Any]], weights: Mapping[str, float],
                  held_back: str | None = None, kept_shares: Mapping[str, float] | None = None,
                  selection: str | None = None) -> str:
    """Why a feasible option other than the runner-up got nothing (against the weakest chosen one)."""
    ru = runner_up([o for o in options if o.get("chosen")] + [dict(option)], weights, held_back, kept_shares,
                   selection)
    return ru["why"] if ru is not None else f"{option['name']} received nothing"


def _scaling_trigger(entry: Mapping[str, Any]) -> dict[str, Any]:
    if entry.get("cronRule"):
        return {"reason": "CronRule", "rule": entry["cronRule"]}
    if entry.get("cluster"):
        return {"reason": "LocalDecision", "cluster": entry["cluster"]}
    if entry.get("clusterWeights"):
        return {"reason": "Feedback"}
    return {"reason": "Metrics"}


def _scaling_subject(entry: Mapping[str, Any]) -> Subject:
    kind, _, rest = str(entry.get("workload") or "").partition("/")
    ns, _, name = rest.partition("/")
    return Subject(kind, ns, name)


def from_scaling(entry: Mapping[str, Any]) -> Record:
    """An autoscaler journal entry (``drods.autoscaling``) as a decision record."""
    inputs = {k: entry[k] for k in ("metrics", "bounds", "recommendation", "feedback", "forecast", "placement",
                                    "clusterWeights", "local") if entry.get(k) is not None}
    before, after = entry.get("from"), entry.get("to")
    options = [{"name": f"{n} replicas", "chosen": n == after, "feasible": True}
               for n in dict.fromkeys(x for x in (after, before, entry.get("recommendation")) if x is not None)]
    summary = f"{before} → {after} replicas: {entry.get('reason') or 'recommendation'}"
    return {"time": entry.get("time"), "type": SCALING, "subject": _scaling_subject(entry).as_json(),
            "trigger": _scaling_trigger(entry), "inputs": inputs, "options": options, "optionsTopK": None,
            "optionsOmitted": 0, "outcome": {"from": before, "to": after, "reason": entry.get("reason")},
            "summary": summary, "runnerUp": _scaling_runner_up(entry),
            "source": {"journal": "autoscaling", "autoscaler": entry.get("autoscaler")}}


def _scaling_runner_up(entry: Mapping[str, Any]) -> dict[str, Any] | None:
    """The count not taken: the recommendation when a bound or the behaviour limited the move, else
    the count as it was; its loss is each metric's distance from its target (value ÷ target − 1)."""
    before, after, rec = entry.get("from"), entry.get("to"), entry.get("recommendation")
    if before is None or after is None or before == after:
        return None
    other = rec if rec is not None and rec not in (before, after) else before
    differences = {str(m.get("name")): round(float(m["value"]) / float(m["target"]) - 1.0, 4)
                   for m in entry.get("metrics") or [] if isinstance(m, Mapping)
                   and isinstance(m.get("value"), int | float) and isinstance(m.get("target"), int | float)
                   and m["target"]}
    if other != before:
        why = f"the recommendation {other} was limited ({entry.get('reason') or 'behaviour'}) to {after}"
    elif differences:
        why = "; ".join(f"{n} {d:+.0%} from its target" for n, d in differences.items())
    else:
        why = str(entry.get("reason") or "the inputs asked for a change")
    return {"name": f"{other} replicas", "lostBy": max((abs(d) for d in differences.values()), default=None),
            "differences": differences, "why": why}


def from_decision_log(entry: Mapping[str, Any]) -> Record:
    """An entry of ``/history/decisions/``: written in this shape; missing keys get their defaults."""
    rec: Record = {"type": "", "subject": {}, "trigger": {}, "inputs": {}, "options": [], "optionsTopK": None,
                   "optionsOmitted": 0, "outcome": {}, "summary": "", "runnerUp": None,
                   "source": {"journal": "decisions"}}
    rec.update(entry)
    return rec


# The descheduler's operations (``drods.monitor.autoops``, ``drods.controllers.traffic_rebalance``):
# moving replicas off a cluster is an eviction, moving them (back) for capacity or traffic a rebalance.
_OPERATION_TYPES = {"Evacuate": EVICTION, "PreAllocate": REBALANCE, "Restore": REBALANCE,
                    "TrafficRebalance": REBALANCE, "Rebalance": REBALANCE}  # fail-back, peak shave


def _operation_type(entry: Mapping[str, Any]) -> str:
    """The decision type of an operations-log entry; "" for monitoring's events (not decisions)."""
    return _OPERATION_TYPES.get(str(entry.get("kind") or ""), "")


def _operation_subject(entry: Mapping[str, Any]) -> Subject:
    """A traffic rebalance is about a workload; the other operations about the cluster they act on."""
    info = entry.get("details") or {}
    w = (info.get("trigger") or {}).get("workload") or {}
    if entry.get("kind") == "TrafficRebalance":
        if w.get("name"):
            return Subject(str(w.get("kind") or "Binding"), str(w.get("namespace") or "default"), str(w["name"]))
        return Subject("Binding", "default", str(entry.get("binding") or ""))
    return Subject("Cluster", "", str(entry.get("cluster") or ""))


def _evacuation_options(info: Mapping[str, Any]) -> tuple[list[dict[str, Any]], int, dict[str, Any] | None]:
    """The bindings on the cluster (most replicas first), those moved chosen; the runner-up is the
    largest one left, which lost on its replica count (an evacuation takes the largest first)."""
    result = info.get("result") or {}
    moved = set(result.get("bindings") or [])
    considered = list(result.get("considered") or [])
    options = [{"name": c["binding"], "chosen": c["binding"] in moved, "feasible": True, "replicas": c["replicas"]}
               for c in considered]
    if not options:
        options = [{"name": b, "chosen": True, "feasible": True} for b in sorted(moved)]
    left = [o for o in options if not o["chosen"]]
    chosen = [o for o in options if o["chosen"] and o.get("replicas") is not None]
    ru = None
    if left and chosen:
        best, weakest = left[0], min(chosen, key=lambda o: int(o["replicas"]))
        lost = int(weakest["replicas"]) - int(best["replicas"])
        why = (f"{best['name']} has {best['replicas']} replica(s) there against {weakest['replicas']} for "
               f"{weakest['name']}: the largest bindings move first, until the fraction is covered")
        ru = {"name": best["name"], "against": weakest["name"], "lostBy": lost, "differences": {"replicas": lost},
              "why": why}
        for o in left:
            o["reason"] = why if o is best else f"{o['name']} has {o['replicas']} replica(s) there; enough had moved"
    return options, int(result.get("omitted") or 0), ru


def _rebalance_options(trig: Mapping[str, Any]) -> tuple[list[dict[str, Any]], dict[str, Any] | None]:
    """Staying against moving nearer the traffic peers: TrafficAffinity scores and the cost of the traffic."""
    before, after = trig.get("trafficAffinityBefore"), trig.get("trafficAffinityAfter")
    placement = ", ".join(f"{p['cluster']} {p['replicas']}" for p in trig.get("placement") or [])
    options = [{"name": f"move to {placement or '?'}", "chosen": bool(trig.get("move")), "feasible": True,
                "total": after, "scores": {"TrafficAffinity": after}, "costPerHour": trig.get("costAfter")},
               {"name": "stay", "chosen": not trig.get("move"), "feasible": True, "total": before,
                "scores": {"TrafficAffinity": before}, "costPerHour": trig.get("costBefore")}]
    if not trig.get("move") or before is None or after is None:
        return options, None
    diff = round(float(after) - float(before), 3)
    why = (f"staying scored {diff:.1f} TrafficAffinity points lower; its traffic costs {trig.get('costBefore')}/h "
           f"against {trig.get('costAfter')}/h after the move")
    options[1]["reason"] = why
    return options, {"name": "stay", "against": options[0]["name"], "lostBy": diff,
                     "differences": {"TrafficAffinity": diff}, "why": why}


def from_operation(entry: Mapping[str, Any]) -> Record:
    """A descheduler operation (``/history/operations/``) as a decision record: evacuations,
    pre-allocations, restores (about a cluster) and traffic rebalances (about a workload)."""
    info = dict(entry.get("details") or {})
    trig = dict(info.get("trigger") or {})
    inputs: dict[str, Any] = {"candidates": {"belowLimit": info.get("candidates")}}
    for section in ("waterLevels", "forecast", "horizonMinutes", "threshold", "calmSince", "value", "limit",
                    "waterLevelBefore", "waterLevelAfter", "achievableLevel", "targets", "moves", "hotSince"):
        if trig.get(section) is not None:
            inputs[section] = trig.pop(section)
    if entry.get("kind") == "TrafficRebalance":
        inputs["traffic"] = {k: trig.get(k) for k in ("peer", "costBefore", "costAfter", "costReduction")}
        options, ru = _rebalance_options(trig)
        omitted = 0
    else:
        options, omitted, ru = _evacuation_options(info)
    if info.get("request"):
        inputs["policy"] = info["request"]
    outcome = {"action": info.get("action"), "outcome": info.get("outcome"), "cluster": entry.get("cluster"),
               **{k: v for k, v in (info.get("result") or {}).items() if k in ("moved", "message", "bindings")}}
    why = info.get("skipReason") or info.get("error") or (info.get("result") or {}).get("message") or ""
    summary = f"{info.get('outcome')}: {entry.get('reason')}" + (f" — {why}" if why else "")
    return {"time": entry.get("time"), "type": _operation_type(entry), "subject": _operation_subject(entry).as_json(),
            "trigger": {"reason": entry.get("kind"), "detail": entry.get("reason")}, "inputs": inputs,
            "options": options, "optionsTopK": OPTIONS_TOP_K if omitted else None, "optionsOmitted": omitted,
            "outcome": outcome, "summary": summary,
            "runnerUp": ru, "source": {"journal": "operations", "kind": entry.get("kind"),
                                       "binding": entry.get("binding")}}


@dataclass(frozen=True, slots=True)
class Source:
    """A journal decisions are read from: its prefix, the subject and type of a raw entry (cheap, for
    filtering) and the full record."""

    name: str
    prefix: str
    subject: Callable[[Mapping[str, Any]], Subject]
    types: Callable[[Mapping[str, Any]], str]
    record: Callable[[Mapping[str, Any]], Record]


SOURCES = (
    Source("schedules", SCHEDULES_PREFIX, _schedule_subject, _schedule_type, from_schedule),
    Source("autoscaling", AUTOSCALING_PREFIX, _scaling_subject, lambda _: SCALING, from_scaling),
    Source("decisions", DECISIONS_PREFIX, subject_of, lambda e: str(e.get("type") or ""), from_decision_log),
    Source("operations", OPERATIONS_PREFIX, _operation_subject, _operation_type, from_operation),
)


def latest_per_type(records: Iterable[Record]) -> dict[str, Record]:
    """The newest record of each type (``records`` newest first)."""
    out: dict[str, Record] = {}
    for r in records:
        out.setdefault(str(r.get("type")), r)
    return out
