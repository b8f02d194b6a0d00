"""Karmada's Remedy: which clusters it acts on and when (any decision match; none: always)."""

from __future__ import annotations

from drods.model.remedy import RemedySpec, remedy_actions, traffic_controlled

READY = [{"type": "Ready", "status": "True"}]
NOT_READY = [{"type": "Ready", "status": "False"}]


def test_a_remedy_acts_on_its_clusters_when_any_match_holds() -> None:
    dns = RemedySpec.model_validate({
        "clusterAffinity": {"clusterNames": ["a", "b"]},
        "decisionMatches": [
            {"clusterConditionMatch": {"conditionType": "ServiceDomainNameResolutionReady", "operator": "Equal",
                                       "conditionStatus": "False"}},
            {"clusterConditionMatch": {"conditionType": "Ready", "operator": "NotEqual", "conditionStatus": "True"}}],
        "actions": ["TrafficControl"]})
    assert remedy_actions("a", NOT_READY, [dns]) == ["TrafficControl"]  # the second match
    assert remedy_actions("a", READY, [dns]) == []
    dns_down = [*READY, {"type": "ServiceDomainNameResolutionReady", "status": "False"}]
    assert remedy_actions("b", dns_down, [dns]) == ["TrafficControl"]  # the first match
    assert remedy_actions("c", NOT_READY, [dns]) == []  # not one of its clusters
    # a condition the cluster does not report: Equal fails, NotEqual holds
    assert remedy_actions("a", [], [dns]) == ["TrafficControl"]


def test_an_unconditional_remedy_and_the_status_it_leaves() -> None:
    upgrade = RemedySpec.model_validate({"clusterAffinity": {"clusterNames": ["a"]}, "actions": ["TrafficControl"]})
    everywhere = RemedySpec.model_validate({"actions": ["TrafficControl"]})
    assert remedy_actions("a", READY, [upgrade, everywhere]) == ["TrafficControl"]
    assert remedy_actions("z", READY, [upgrade]) == [] and remedy_actions("z", READY, [everywhere]) == [
        "TrafficControl"]
    assert traffic_controlled({"status": {"remedyActions": ["TrafficControl"]}})
    assert not traffic_controlled({"status": {}}) and not traffic_controlled(None)
