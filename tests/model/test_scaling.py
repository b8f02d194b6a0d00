"""The autoscaler's arithmetic with hand-computed values."""

from __future__ import annotations

import calendar
import datetime

import pytest
from pydantic import ValidationError

from drods.autoscaling import cron
from drods.model import scaling as a
from drods.model.autoscaling import (
    Behavior,
    CronFederatedHPASpec,
    CronRule,
    FederatedHPASpec,
    ScalingPolicy,
    ScalingRules,
    owned_replicas,
    owner,
)


def test_weighted_utilisation_weights_by_replicas_and_skips_unmeasured() -> None:
    # (9 × 90 + 1 × 10) / 10 = 82; "c" has no measurement, "d" no replicas.
    assert a.weighted_utilisation({"a": 9, "b": 1, "c": 5, "d": 0}, {"a": 90.0, "b": 10.0, "d": 50.0}) == 82.0
    assert a.weighted_utilisation({"c": 3}, {"a": 1.0}) is None


def test_recommend_is_the_hpa_rule_with_tolerance_and_max_over_metrics() -> None:
    assert a.recommend(4, [(90.0, 60.0)]) == 6  # ceil(4 × 1.5)
    assert a.recommend(4, [(65.0, 60.0)]) == 4  # ratio 1.083 within ±10 %
    assert a.recommend(10, [(30.0, 60.0)]) == 5  # ceil(10 × 0.5)
    assert a.recommend(4, [(30.0, 60.0), (120.0, 60.0)]) == 8  # the larger wins
    assert a.recommend(4, []) == 4


def _rules(window: int, *policies: tuple[str, int, int], select: str = "Max") -> ScalingRules:
    return ScalingRules(stabilizationWindowSeconds=window, selectPolicy=select,  # type: ignore[arg-type]
                        policies=[ScalingPolicy(type=t, value=v, periodSeconds=p)  # type: ignore[arg-type]
                                  for t, v, p in policies])


def test_scale_down_waits_for_the_stabilisation_window() -> None:
    b = Behavior(scaleDown=_rules(60, ("Percent", 100, 15)))
    w = a.Window()
    out, w = a.behave(10, 10, w, b, now=0.0, lo=1, hi=20)
    assert out.desired == 10
    out, w = a.behave(10, 4, w, b, now=30.0, lo=1, hi=20)
    assert (out.desired, out.reason) == (10, "stabilisation window")  # 10 was recommended 30 s ago
    out, w = a.behave(10, 4, w, b, now=61.0, lo=1, hi=20)
    assert out.desired == 4  # the 10 left the window; 4s remain
    assert w.events == [(61.0, -6)]


def test_scale_up_rate_policies_from_the_period_start() -> None:
    # Pods 2 per 60 s or Percent 50 per 60 s, Max: from 4 → max(6, 6) = 6; then within the same
    # period the start is still 4, so nothing more until it ends.
    b = Behavior(scaleUp=_rules(0, ("Pods", 2, 60), ("Percent", 50, 60)))
    w = a.Window()
    out, w = a.behave(4, 12, w, b, now=0.0, lo=1, hi=20)
    assert (out.desired, out.reason) == (6, "scale-up rate limit")
    out, w = a.behave(6, 12, w, b, now=30.0, lo=1, hi=20)
    assert out.desired == 6  # period start 4: at most 6
    out, w = a.behave(6, 12, w, b, now=61.0, lo=1, hi=20)
    assert out.desired == 9  # start 6: max(6 + 2, ceil(6 × 1.5)) = 9
    min_b = Behavior(scaleUp=_rules(0, ("Pods", 2, 60), ("Percent", 100, 60), select="Min"))
    assert a.behave(4, 12, a.Window(), min_b, now=0.0, lo=1, hi=20)[0].desired == 6  # min(6, 8)
    off = Behavior(scaleUp=_rules(0, ("Pods", 2, 60), select="Disabled"))
    assert a.behave(4, 12, a.Window(), off, now=0.0, lo=1, hi=20)[0].desired == 4


def test_defaults_are_kubernetes_and_bounds_clamp() -> None:
    out, _ = a.behave(2, 50, a.Window(), None, now=0.0, lo=1, hi=10)
    assert out.desired == 6  # max(100 % → 4, 4 pods → 6), below the max 10
    out, _ = a.behave(8, 50, a.Window(), None, now=0.0, lo=1, hi=10)
    assert (out.desired, out.reason) == (10, "maxReplicas")
    out, _ = a.behave(2, 1, a.Window(), None, now=0.0, lo=3, hi=10)
    assert out.desired == 3


def test_cron_rule_in_effect_is_the_last_fired_since_creation() -> None:
    t9 = calendar.timegm(datetime.datetime(2026, 1, 5, 9, 0).timetuple())
    up = CronRule(name="up", schedule="0 9 * * *", targetReplicas=10)
    down = CronRule(name="down", schedule="0 18 * * *", targetReplicas=2)
    assert cron.in_effect([up, down], t9 + 60, since=t9 - 3600).rule.name == "up"  # type: ignore[union-attr]
    assert cron.in_effect([up, down], t9 + 9 * 3600, since=0).rule.name == "down"  # type: ignore[union-attr]
    assert cron.in_effect([up, down], t9 + 60, since=t9 + 30) is None  # nothing fired since creation
    assert cron.next_fire(up, t9) == t9 + 86400
    assert cron.in_effect([up], t9 + 60, since=t9 - 60).at == t9  # type: ignore[union-attr]


def test_a_rule_fires_in_its_time_zone_daylight_saving_included() -> None:
    utc = datetime.UTC
    rule = CronRule(name="up", schedule="0 9 * * *", targetReplicas=10, timeZone="Europe/Berlin")
    winter = datetime.datetime(2026, 1, 5, 0, 0, tzinfo=utc).timestamp()
    summer = datetime.datetime(2026, 7, 5, 0, 0, tzinfo=utc).timestamp()
    assert cron.next_fire(rule, winter) == datetime.datetime(2026, 1, 5, 8, 0, tzinfo=utc).timestamp()  # UTC+1
    assert cron.next_fire(rule, summer) == datetime.datetime(2026, 7, 5, 7, 0, tzinfo=utc).timestamp()  # UTC+2
    assert cron.last_fire(rule, summer) == datetime.datetime(2026, 7, 4, 7, 0, tzinfo=utc).timestamp()


def test_specs_refuse_what_they_cannot_honour() -> None:
    ref = {"apiVersion": "apps/v1", "kind": "Deployment", "name": "web"}
    with pytest.raises(ValidationError, match="minReplicas must not exceed"):
        FederatedHPASpec.model_validate({"scaleTargetRef": ref, "minReplicas": 5, "maxReplicas": 2,
                                         "metrics": []})
    with pytest.raises(ValidationError):  # a Pods metric names its metric and target
        FederatedHPASpec.model_validate({"scaleTargetRef": ref, "maxReplicas": 5, "metrics": [
            {"type": "Pods", "pods": {}}]})
    with pytest.raises(ValidationError, match="not an IANA time zone"):
        CronRule(name="x", schedule="0 9 * * *", targetReplicas=1, timeZone="Mars/Olympus")
    with pytest.raises(ValidationError, match="not a cron expression"):
        CronRule(name="x", schedule="every day", targetReplicas=1)
    with pytest.raises(ValidationError, match="never fires"):
        CronRule(name="x", schedule="0 0 31 2 *", targetReplicas=1)
    with pytest.raises(ValidationError, match="takes targetReplicas"):
        CronFederatedHPASpec.model_validate({"scaleTargetRef": ref, "rules": [
            {"name": "x", "schedule": "0 9 * * *", "targetMaxReplicas": 3}]})


def test_a_federated_hpa_without_metrics_scales_on_80_percent_cpu_as_karmadas() -> None:
    spec = FederatedHPASpec.model_validate({"scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment",
                                                               "name": "web"}, "maxReplicas": 4})
    stored = spec.model_dump(mode="json", exclude_unset=True)  # what the registry keeps, as Karmada's webhook
    assert stored["minReplicas"] == 1 and stored["metrics"] == [
        {"type": "Resource", "resource": {"name": "cpu", "target": {"type": "Utilization", "averageUtilization": 80}}}]
    assert [m.model_dump(exclude_none=True) for m in spec.metrics] == [
        {"type": "Resource", "resource": {"name": "cpu", "target": {"type": "Utilization", "averageUtilization": 80}}}]


def test_owner_is_the_oldest_autoscaler_of_the_workload() -> None:
    def obj(kind: str, name: str, created: str, target_kind: str, desired: int | None) -> dict:  # type: ignore[type-arg]
        return {"kind": kind, "metadata": {"name": name, "namespace": "ns", "creationTimestamp": created},
                "spec": {"scaleTargetRef": {"apiVersion": "apps/v1", "kind": target_kind, "name": "web"}},
                "status": {} if desired is None else {"desiredReplicas": desired}}

    first = obj("FederatedHPA", "b", "2026-01-01T00:00:00Z", "Deployment", 7)
    second = obj("CronFederatedHPA", "a", "2026-01-02T00:00:00Z", "Deployment", 3)
    driver = obj("CronFederatedHPA", "c", "2025-01-01T00:00:00Z", "FederatedHPA", None)
    wl = ("apps/v1", "Deployment", "ns", "web")
    assert owner([second, driver, first], wl) is first
    assert owned_replicas([second, driver, first], wl) == 7
    assert owned_replicas([driver], wl) is None


def test_a_count_clamped_where_min_and_max_meet_is_limited_by_the_side_it_came_from() -> None:
    """A cron rule capped max at 2 under a min of 3 (bounds 2..2): a 7 → 2 scale-down said minReplicas."""
    from drods.model.scaling import Window, behave

    out, _ = behave(7, 7, Window(), None, 1000.0, 2, 2)
    assert (out.desired, out.reason) == (2, "maxReplicas")
    out, _ = behave(1, 1, Window(), None, 1000.0, 2, 2)
    assert (out.desired, out.reason) == (2, "minReplicas")
