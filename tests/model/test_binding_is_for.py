"""`binding_is_for`: a Binding found under a workload's computed name places that workload only if its
``spec.resource`` names it (names collide across namespaces: ``secret-team-a-s1`` is both Secret
``team-a/s1`` and Secret ``team/a-s1``)."""

from __future__ import annotations

from typing import Any

from drods.model.detection import binding_is_for, binding_name


def held(**ref: Any) -> dict[str, Any]:
    return {"metadata": {"name": "secret-team-a-s1"}, "spec": {"resource": {"apiVersion": "v1", **ref}}}


def test_names_collide_and_the_resource_tells_them_apart() -> None:
    assert binding_name("Secret", "team-a", "s1") == binding_name("Secret", "team", "a-s1")
    b = held(kind="Secret", namespace="team-a", name="s1", uid="u1")
    assert binding_is_for(b, "Secret", "team-a", "s1")
    assert binding_is_for(b, "Secret", "team-a", "s1", api_version="v1", uid="u1")
    assert not binding_is_for(b, "Secret", "team", "a-s1")
    assert not binding_is_for(b, "ConfigMap", "team-a", "s1")
    assert not binding_is_for(b, "Secret", "team-a", "s1", uid="u2")  # recorded: compared
    assert binding_is_for(held(kind="Secret", namespace="team-a", name="s1"), "Secret", "team-a", "s1", uid="u2")
    assert not binding_is_for(b, "Secret", "team-a", "s1", api_version="example.io/v1")  # another API group
    assert binding_is_for(held(kind="ClusterRole", name="r"), "ClusterRole", "", "r")
    assert not binding_is_for(None, "Secret", "team-a", "s1")
    assert not binding_is_for({"spec": {}}, "Secret", "team-a", "s1")
