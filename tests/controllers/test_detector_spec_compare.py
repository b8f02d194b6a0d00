"""The detector's comparison of a stored Binding spec with the one it wants: equal as they are without
normalising, normalised only when they differ, the fields others write never counted."""

from __future__ import annotations

from unittest import mock

from drods.controllers import detector
from drods.controllers.detector import same_spec


def test_equal_specs_are_the_same_without_normalising_and_fields_others_write_do_not_count() -> None:
    stored = {"replicas": 2, "resources": {"cpu": 0.5}, "rescheduleTriggeredAt": "2026-12-03T00:00:00Z",
              "gracefulEvictionTasks": [{"fromCluster": "a"}]}
    with mock.patch.object(detector, "normal_spec", side_effect=AssertionError("normalised")):
        assert same_spec(stored, {"replicas": 2, "resources": {"cpu": 0.5}})


def test_specs_that_differ_are_normalised_and_a_real_difference_counts() -> None:
    assert not same_spec({"replicas": 2}, {"replicas": 3})
    assert not same_spec({"replicas": 2, "priority": 5}, {"replicas": 2})
    calls: list[object] = []
    real = detector.normal_spec

    def counting(spec: object) -> object:
        calls.append(spec)
        return real(spec)  # type: ignore[arg-type]

    with mock.patch.object(detector, "normal_spec", side_effect=counting):
        assert not same_spec({"replicas": 2, "regions": ["eu"]}, {"replicas": 2, "regions": ["us"]})
    assert len(calls) == 2
