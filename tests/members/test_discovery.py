"""A member's discovery: only the group-versions asked about are read, once; a kind missing from one is
read again (a CRD installed since); a group-version the member lacks is a `KindNotServed`."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pytest

from drods.members.discovery import KindNotServed, MemberDiscovery, ServedResource

APPS = {"resources": [
    {"name": "deployments", "kind": "Deployment", "namespaced": True},
    {"name": "deployments/status", "kind": "Deployment", "namespaced": True},
    {"name": "deployments/scale", "kind": "Scale", "namespaced": True},
    {"name": "statefulsets", "kind": "StatefulSet", "namespaced": True}]}
CORE = {"resources": [{"name": "namespaces", "kind": "Namespace", "namespaced": False},
                      {"name": "configmaps", "kind": "ConfigMap", "namespaced": True}]}


class Member:
    def __init__(self) -> None:
        self.docs: dict[str, Mapping[str, Any]] = {"/apis/apps/v1": APPS, "/api/v1": CORE}
        self.reads: list[str] = []

    def read(self, path: str) -> Mapping[str, Any] | None:
        self.reads.append(path)
        return self.docs.get(path)


def test_a_group_version_is_read_once_and_subresources_are_not_kinds() -> None:
    member = Member()
    discovery = MemberDiscovery(member.read)
    deploy = discovery.resource("apps/v1", "Deployment")
    assert deploy == ServedResource("apps/v1", "Deployment", "deployments", namespaced=True)
    assert discovery.resource("apps/v1", "StatefulSet").plural == "statefulsets"
    assert discovery.resource("apps/v1", "Deployment") is deploy
    with pytest.raises(KindNotServed):  # only a subresource carries this kind
        discovery.resource("apps/v1", "Scale")
    assert member.reads == ["/apis/apps/v1", "/apis/apps/v1"]  # the miss read it again, nothing else


def test_paths_follow_the_scope() -> None:
    discovery = MemberDiscovery(Member().read)
    ns = discovery.resource("v1", "Namespace")
    cm = discovery.resource("v1", "ConfigMap")
    assert ns.item("team-a", "ignored") == "/api/v1/namespaces/team-a"
    assert cm.item("c", "team-a") == "/api/v1/namespaces/team-a/configmaps/c"
    assert cm.collection(None) == cm.path == "/api/v1/configmaps"
    deploy = discovery.resource("apps/v1", "Deployment")
    assert deploy.collection("x") == "/apis/apps/v1/namespaces/x/deployments"


def test_a_kind_installed_since_the_first_read_is_found() -> None:
    member = Member()
    discovery = MemberDiscovery(member.read)
    with pytest.raises(KindNotServed, match="example.io/v1 is not served"):
        discovery.resource("example.io/v1", "Widget")
    member.docs["/apis/example.io/v1"] = {"resources": [{"name": "widgets", "kind": "Widget", "namespaced": True}]}
    assert discovery.resource("example.io/v1", "Widget").path == "/apis/example.io/v1/widgets"


def test_a_forgotten_group_version_is_read_again() -> None:
    member = Member()
    discovery = MemberDiscovery(member.read)
    discovery.resource("apps/v1", "Deployment")
    del member.docs["/apis/apps/v1"]  # the member stopped serving it
    assert discovery.resource("apps/v1", "Deployment").plural == "deployments"  # still cached
    discovery.forget("apps/v1")
    with pytest.raises(KindNotServed):
        discovery.resource("apps/v1", "Deployment")
