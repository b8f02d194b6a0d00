"""Binding names are ``<kind>-<namespace>-<name>``: Secret ``team-a/s1`` and Secret ``team/a-s1`` are both
``secret-team-a-s1``. A tenant of ``team`` made ``a-s1`` and a policy; the detector rewrote the victim's
Binding for it (``spec.resource`` → team/a-s1), the victim's Secret was removed from the member, and when
``a-s1`` was deleted the detector deleted the victim's Binding (walkthrough AN, item 1).

The first owner keeps the name: the late-comer gets no Binding and a Warning Event naming the other object;
nothing of the other's changes, whichever order they come in, and whatever becomes of the late-comer."""

from __future__ import annotations

import copy
import json
from types import SimpleNamespace
from typing import Any

import pytest

from drods.controllers.detector import ResourceDetector
from drods.errors import Conflict
from drods.model.detection import binding_is_for, decode_policy
from drods.model.kinds import BINDING, KARMADA_PROPAGATION_POLICY, SECRET

VICTIM = SECRET.key("s1", "team-a")
LATE = SECRET.key("a-s1", "team")
NAME = "secret-team-a-s1"


def secret(namespace: str, name: str, uid: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": name, "namespace": namespace, "uid": uid,
                                                               "resourceVersion": "1"},
            "data": {"k": "dg=="}}


def policy(namespace: str) -> tuple[str, Any]:
    """A tenant's own Karmada PropagationPolicy: its namespace's Secrets onto member s1."""
    doc = {"apiVersion": "policy.karmada.io/v1alpha1", "kind": "PropagationPolicy",
           "metadata": {"name": "secrets", "namespace": namespace},
           "spec": {"resourceSelectors": [{"apiVersion": "v1", "kind": "Secret"}],
                    "placement": {"clusterAffinity": {"clusterNames": ["s1"]}}}}
    return (KARMADA_PROPAGATION_POLICY.key("secrets", namespace),
            decode_policy(KARMADA_PROPAGATION_POLICY)(SimpleNamespace(value=json.dumps(doc).encode())))


class Registry:
    """The Bindings as the detector writes them, kept where its informer would show them (and a delete
    with a resourceVersion precondition, as the store's)."""

    store: Any = None

    def __init__(self, bindings: SimpleNamespace) -> None:
        self.bindings = bindings
        self.rev = 10
        self.writes: list[str] = []

    async def create(self, _kind: Any, obj: dict[str, Any]) -> dict[str, Any]:
        self.rev += 1
        stored = copy.deepcopy(obj)
        stored["metadata"]["resourceVersion"] = str(self.rev)
        self.bindings.cache[BINDING.key(stored["metadata"]["name"])] = stored
        self.writes.append(stored["metadata"]["name"])
        return copy.deepcopy(stored)

    update = create

    async def delete(self, _kind: Any, name: str, *_a: Any, resource_version: str | None = None,
                     **_kw: Any) -> None:
        held = self.bindings.cache[BINDING.key(name)]
        if resource_version is not None and held["metadata"]["resourceVersion"] != resource_version:
            raise Conflict("changed")
        del self.bindings.cache[BINDING.key(name)]
        self.writes.append(f"delete {name}")


class Told:
    def __init__(self) -> None:
        self.events: list[tuple[dict[str, Any], str, str, str]] = []

    def tell(self, involved: dict[str, Any], type_: str, reason: str, message: str) -> None:
        self.events.append((involved, type_, reason, message))


class Queue:
    def __init__(self) -> None:
        self.added: list[str] = []

    def add(self, key: str, *_: Any) -> None:
        self.added.append(key)


def detector() -> tuple[ResourceDetector, SimpleNamespace, SimpleNamespace, Registry, Told]:
    workloads = SimpleNamespace(cache={})
    bindings = SimpleNamespace(cache={})
    registry = Registry(bindings)
    det = ResourceDetector(registry, workloads=[workloads],  # type: ignore[arg-type, list-item]
                           policies=[SimpleNamespace(cache=dict([policy("team-a"), policy("team")]))],  # type: ignore[list-item]
                           bindings=bindings)  # type: ignore[arg-type]
    told = Told()
    det.events = told  # type: ignore[assignment]
    det.controller.queue = Queue()  # type: ignore[assignment]
    return det, workloads, bindings, registry, told


async def settle(det: ResourceDetector, key: str) -> float | None:
    det._wrote.clear()  # the informer has brought the detector's own writes (its copies are the store's here)
    return await det.reconcile(key)


def taken(told: Told, key: str) -> list[tuple[dict[str, Any], str, str, str]]:
    ns, name = key.rsplit("/", 2)[-2:]
    return [e for e in told.events if e[2] == "BindingNameTaken" and (e[0]["namespace"], e[0]["name"]) == (ns, name)]


async def test_the_first_owner_keeps_its_binding_and_the_late_comer_is_told() -> None:
    det, workloads, bindings, registry, told = detector()
    workloads.cache[VICTIM] = secret("team-a", "s1", "victim-uid")
    await settle(det, VICTIM)
    victims = copy.deepcopy(bindings.cache[BINDING.key(NAME)])
    assert binding_is_for(victims, "Secret", "team-a", "s1")

    workloads.cache[LATE] = secret("team", "a-s1", "late-uid")  # the tenant of "team" applies a-s1
    assert await settle(det, LATE) is None
    assert bindings.cache[BINDING.key(NAME)] == victims, "the victim's Binding was rewritten for another object"
    assert registry.writes == [NAME]
    (involved, type_, _, message), = taken(told, LATE)
    assert (involved["kind"], type_) == ("Secret", "Warning")
    assert "Secret team-a/s1" in message and NAME in message and "rename" in message
    assert not taken(told, VICTIM)

    await settle(det, VICTIM)  # every workload again (a policy changed): nothing moves
    assert bindings.cache[BINDING.key(NAME)] == victims and registry.writes == [NAME]

    del workloads.cache[LATE]  # the tenant deletes a-s1: the victim's Binding is not its to delete
    assert await settle(det, LATE) is None
    assert bindings.cache[BINDING.key(NAME)] == victims and registry.writes == [NAME]
    await settle(det, VICTIM)
    assert bindings.cache[BINDING.key(NAME)] == victims and registry.writes == [NAME]


async def test_whoever_comes_first_keeps_it_and_the_other_is_placed_once_the_name_is_free() -> None:
    det, workloads, bindings, registry, told = detector()
    workloads.cache[LATE] = secret("team", "a-s1", "late-uid")
    workloads.cache[VICTIM] = secret("team-a", "s1", "victim-uid")
    await settle(det, LATE)
    first = copy.deepcopy(bindings.cache[BINDING.key(NAME)])
    assert binding_is_for(first, "Secret", "team", "a-s1")
    await settle(det, VICTIM)
    assert bindings.cache[BINDING.key(NAME)] == first and registry.writes == [NAME]
    assert "Secret team/a-s1" in taken(told, VICTIM)[0][3]

    del workloads.cache[LATE]  # the holder goes: its own Binding goes with it …
    await settle(det, LATE)
    assert BINDING.key(NAME) not in bindings.cache
    queue = det.controller.queue
    det._binding_changed(BINDING.key(NAME), first, None)  # … the informer tells; the one refused is queued
    assert VICTIM in queue.added  # type: ignore[attr-defined]
    await settle(det, VICTIM)
    assert binding_is_for(bindings.cache[BINDING.key(NAME)], "Secret", "team-a", "s1")


async def test_a_delete_holds_only_while_the_binding_is_the_copy_read() -> None:
    """The informer's copy says the Binding is the workload's; the store's was rewritten since: no delete."""
    det, workloads, bindings, registry, _ = detector()
    workloads.cache[VICTIM] = secret("team-a", "s1", "victim-uid")
    await settle(det, VICTIM)
    stale = copy.deepcopy(bindings.cache[BINDING.key(NAME)])
    bindings.cache[BINDING.key(NAME)]["metadata"]["resourceVersion"] = "99"
    del workloads.cache[VICTIM]
    det.bindings = SimpleNamespace(cache={BINDING.key(NAME): stale})  # type: ignore[assignment]
    assert await settle(det, VICTIM) == pytest.approx(0.05)
    assert BINDING.key(NAME) in bindings.cache


async def test_a_late_comer_deleted_does_not_take_the_holders_binding_with_it() -> None:
    """The deletion path alone ("deleted binding … (workload or policy gone)"): a workload gone whose
    computed name is another object's Binding leaves that Binding alone."""
    det, workloads, bindings, registry, told = detector()
    workloads.cache[VICTIM] = secret("team-a", "s1", "victim-uid")
    await settle(det, VICTIM)
    victims = copy.deepcopy(bindings.cache[BINDING.key(NAME)])
    assert await settle(det, LATE) is None  # a-s1 made and deleted before the detector saw it
    assert bindings.cache[BINDING.key(NAME)] == victims and registry.writes == [NAME] and not told.events
