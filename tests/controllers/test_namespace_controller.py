"""The namespace controller goes over every namespaced kind once per storage, custom kinds included,
and leaves a namespace alone unless it is Terminating with the ``kubernetes`` finalizer."""

from __future__ import annotations

import contextlib
from types import SimpleNamespace
from typing import Any

from drods.controllers.namespaces import NamespaceController
from drods.model.kinds import ALL_KINDS
from drods.model.namespaces import NAMESPACE
from drods.registry.catalog import KindCatalog

GADGETS = {"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
           "metadata": {"name": "gadgets.toys.example.com"},
           "spec": {"group": "toys.example.com", "scope": "Namespaced",
                    "names": {"plural": "gadgets", "singular": "gadget", "kind": "Gadget"},
                    "versions": [{"name": v, "served": True, "storage": v == "v1",
                                  "schema": {"openAPIV3Schema": {"type": "object"}}} for v in ("v1", "v2")]}}


class Registry:
    """Records what the controller would read or write: nothing, for a namespace it must leave alone."""

    def __init__(self) -> None:
        self.calls: list[str] = []

    def __getattr__(self, name: str) -> Any:
        async def call(*args: Any, **kw: Any) -> Any:
            self.calls.append(name)
            return [], 0

        return call


def controller(namespaces: dict[str, Any], catalog: KindCatalog | None = None) -> tuple[NamespaceController, Registry]:
    registry = Registry()
    return NamespaceController(registry, namespaces=SimpleNamespace(cache=namespaces),  # type: ignore[arg-type]
                               definitions=SimpleNamespace(cache={}),  # type: ignore[arg-type]
                               catalog=catalog or KindCatalog(ALL_KINDS)), registry


def test_every_namespaced_kind_once_per_storage_custom_kinds_included() -> None:
    catalog = KindCatalog(ALL_KINDS)
    catalog.learn_object(GADGETS)
    kinds = controller({}, catalog)[0].kinds()
    prefixes = [k.key_prefix() for k in kinds]
    assert len(prefixes) == len(set(prefixes)) and all(k.namespaced for k in kinds)
    assert {"Deployment", "ConfigMap", "Secret", "PropagationPolicy", "FederatedHPA"} <= {k.kind for k in kinds}
    assert [k.version for k in kinds if k.kind == "Gadget"] == ["v1"]  # two served versions, one storage
    assert [k.group for k in kinds if k.kind == "FederatedHPA"] == ["multicluster.io"]  # Karmada's shares it


async def test_a_namespace_not_terminating_is_left_alone() -> None:
    active = {"metadata": {"name": "a"}, "spec": {"finalizers": ["kubernetes"]}, "status": {"phase": "Active"}}
    finalized = {"metadata": {"name": "f", "deletionTimestamp": "2026-01-01T00:00:00Z"}, "spec": {"finalizers": []}}
    ctl, registry = controller({NAMESPACE.key("a"): active, NAMESPACE.key("f"): finalized})
    for name in ("a", "f", "missing"):
        assert await ctl.reconcile(name) is None
    assert registry.calls == []


async def test_a_terminating_namespace_is_emptied_only_after_its_grace() -> None:
    """``kubectl delete -f`` of a file that starts with its Namespace deletes the objects after it one by one:
    each must still be there to be deleted (it failed NotFound when the contents went at once)."""
    now = [100.0]
    gone = {"metadata": {"name": "g", "deletionTimestamp": "2026-01-01T00:00:00Z"},
            "spec": {"finalizers": ["kubernetes"]}, "status": {"phase": "Terminating"}}
    ctl, registry = controller({NAMESPACE.key("g"): gone})
    ctl.clock = lambda: now[0]
    assert await ctl.reconcile("g") == ctl.grace_seconds  # first seen: wait, delete nothing
    now[0] += ctl.grace_seconds / 2
    assert await ctl.reconcile("g") == ctl.grace_seconds / 2
    assert registry.calls == []
    now[0] += ctl.grace_seconds / 2
    with contextlib.suppress(AttributeError):  # the recording fake answers its final get in a list's shape
        await ctl.reconcile("g")
    assert "list" in registry.calls  # the grace is over: its contents are gone through
