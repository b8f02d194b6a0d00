"""CronFederatedHPA rules in time (SPEC F5): which rule is in effect now, and when the next fires.

A rule fires at each time its five-field cron ``schedule`` matches, read in the rule's ``timeZone``
(an IANA name; UTC when unset, as Karmada); the rule that fired last,
at or after the autoscaler was created, is in effect until another fires. Schedules are read with
``croniter``; the clock is the caller's (tests move it).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from zoneinfo import ZoneInfo

from croniter import CroniterBadDateError, croniter

from drods.model.autoscaling import CronRule


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


def in_effect(rules: Sequence[CronRule], now: float, since: float) -> Fired | None:
    """The rule in effect at ``now``: the last to fire in ``[since, now]`` (ties: the later rule)."""
    best: Fired | None = None
    for rule in rules:
        if rule.suspend:
            continue
        t = last_fire(rule, now)
        if t >= since and (best is None or t >= best.at):
            best = Fired(rule, t)
    return best
