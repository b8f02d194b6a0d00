"""Which workload a ServiceRegistration steers: one of its own namespace, whether it says so or not."""

from __future__ import annotations

from drods.model.steering import foreign_workload, workload_key


def _registration(own: str, **workload: str) -> dict[str, object]:
    return {"metadata": {"name": "video", "namespace": own},
            "spec": {"workload": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "video", **workload}}}


def test_an_unnamed_namespace_is_the_registrations_own_not_default() -> None:
    """It was read as ``default``: a team-a registration steered default's workload of the same name."""
    assert workload_key(_registration("team-a")) == ("apps/v1", "Deployment", "team-a", "video")
    assert workload_key(_registration("team-a", namespace="team-a")) == ("apps/v1", "Deployment", "team-a", "video")
    assert foreign_workload(_registration("team-a")) is None


def test_another_namespace_is_foreign() -> None:
    why = foreign_workload(_registration("team-a", namespace="default"))
    assert why == "spec.workload.namespace: a ServiceRegistration steers a workload of its own namespace (team-a), " \
        "not of default"
    assert foreign_workload({"spec": {"workload": {"name": "video", "namespace": "default"}}}) is None  # default's own
