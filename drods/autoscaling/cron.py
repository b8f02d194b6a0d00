"""CronFederatedHPA rules in time (SPEC F5): which rule is in effect now, and when the next fires.

A rule fires at each time its five-field cron ``schedule`` matches, read in the rule's ``timeZone``
(an IANA name; UTC when unset, as Karmada); the rule that fired last,
at or after the autoscaler was created, is in effect until another fires. A suspended rule fires no
more (Karmada's ``suspend``): its last recorded fire (``frozen``, from the autoscaler's status) stays
in effect until another rule fires. Schedules are read with ``croniter``; the clock is the caller's
(tests move it).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any
from zoneinfo import ZoneInfo

from croniter import CroniterBadDateError, croniter

from drods.model.autoscaling import CronRule
from drods.model.timefmt import parse_rfc3339


@dataclass(frozen=True, slots=True)
class Fired:
    rule: CronRule
    at: float  # when it last fired


def _schedule(rule: CronRule, at: float) -> croniter:
    """The rule's schedule iterated from ``at``, in its time zone (daylight saving included)."""
    return croniter(rule.schedule, datetime.fromtimestamp(at, ZoneInfo(rule.timeZone or "UTC")))


def last_fire(rule: CronRule, now: float) -> float:
    """The latest time ``rule`` fired at or before ``now`` (a fire exactly at ``now`` counts)."""
    try:
        nxt = float(_schedule(rule, now - 1e-3).get_next(float))
        return nxt if nxt <= now else float(_schedule(rule, now).get_prev(float))
    except CroniterBadDateError:
        return float("-inf")


def next_fire(rule: CronRule, now: float) -> float | None:
    try:
        return float(_schedule(rule, now).get_next(float))
    except CroniterBadDateError:
        return None


def recorded_fires(status: Mapping[str, Any] | None) -> dict[str, float]:
    """Rule name → its last fire as the autoscaler's status recorded it (``executionHistories``)."""
    out: dict[str, float] = {}
    for h in (status or {}).get("executionHistories") or ():
        if isinstance(h, Mapping) and isinstance(h.get("ruleName"), str):
            t = parse_rfc3339(h.get("lastExecutionTime"))
            if t is not None:
                out[h["ruleName"]] = t
    return out


def fired_at(rule: CronRule, now: float, frozen: Mapping[str, float]) -> float | None:
    """When ``rule`` last fired as of ``now``: a suspended one at its recorded fire (None: none)."""
    if rule.suspend:
        return frozen.get(rule.name)
    return last_fire(rule, now)


def in_effect(rules: Sequence[CronRule], now: float, since: float,
              frozen: Mapping[str, float] | None = None) -> Fired | None:
    """The rule in effect at ``now``: the last to fire in ``[since, now]`` (ties: the later rule);
    ``frozen``: the recorded fires of suspended rules (`recorded_fires`)."""
    best: Fired | None = None
    for rule in rules:
        t = fired_at(rule, now, frozen or {})
        if t is None:
            continue
        if t >= since and (best is None or t >= best.at):
            best = Fired(rule, t)
    return best
