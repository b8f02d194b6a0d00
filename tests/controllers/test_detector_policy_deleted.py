"""A deleted Karmada PropagationPolicy keeps what it placed, as Karmada does (karmada#601): the Binding
and the members' copies stay until another policy claims the workload or the workload is deleted.
A DRO-DS policy deleted, or a Karmada one that no longer selects the workload, lets the Binding go."""

from __future__ import annotations

import copy
import json
from types import SimpleNamespace
from typing import Any

from drods.controllers.detector import ResourceDetector
from drods.model.detection import decode_policy
from drods.model.kinds import BINDING, KARMADA_PROPAGATION_POLICY, PROPAGATION_POLICY, by_kind

DEPLOYMENT = by_kind("apps/v1", "Deployment")
assert DEPLOYMENT is not None
WEB = DEPLOYMENT.key("web", "shop")
KARMADA = {"apiVersion": "policy.karmada.io/v1alpha1", "kind": "PropagationPolicy",
           "metadata": {"name": "web", "namespace": "shop"},
           "spec": {"resourceSelectors": [{"apiVersion": "apps/v1", "kind": "Deployment", "name": "web"}],
                    "placement": {"clusterAffinity": {"clusterNames": ["a", "b"]}}}}
OWN = {"apiVersion": "multicluster.io/v1alpha1", "kind": "PropagationPolicy", "metadata": {"name": "own"},
       "spec": {"resourceSelectors": [{"apiVersion": "apps/v1", "kind": "Deployment", "namespace": "shop"}],
                "placement": {"replicaScheduling": {"replicaSchedulingType": "Divided"}}}}


def deployment(replicas: int = 2, labels: dict[str, str] | None = None) -> dict[str, Any]:
    return {"apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": "web", "namespace": "shop", "uid": "u1", "resourceVersion": "1",
                         "labels": labels or {}},
            "spec": {"replicas": replicas, "template": {"spec": {"containers": [{"name": "c", "image": "x"}]}}}}


class Registry:
    """The Bindings as the detector writes them, kept where its informer would show them."""

    store: Any = None  # no Event is written through it here

    def __init__(self, bindings: SimpleNamespace) -> None:
        self.bindings = bindings
        self.rev = 10

    async def create(self, _kind: Any, obj: dict[str, Any]) -> dict[str, Any]:
        self.rev += 1
        stored = copy.deepcopy(obj)
        stored["metadata"]["resourceVersion"] = str(self.rev)
        self.bindings.cache[BINDING.key(stored["metadata"]["name"])] = stored
        return copy.deepcopy(stored)

    update = create

    async def delete(self, _kind: Any, name: str, *_a: Any, **_kw: Any) -> None:
        self.bindings.cache.pop(BINDING.key(name), None)


def detector(policies: dict[str, Any], workload: dict[str, Any]) -> tuple[ResourceDetector, SimpleNamespace]:
    bindings = SimpleNamespace(cache={})
    det = ResourceDetector(Registry(bindings), workloads=[SimpleNamespace(cache={WEB: workload})],  # type: ignore[arg-type, list-item]
                           policies=[SimpleNamespace(cache=policies)],  # type: ignore[list-item]
                           bindings=bindings)  # type: ignore[arg-type]
    return det, bindings


def decoded(kind: Any, doc: dict[str, Any]) -> Any:
    return decode_policy(kind)(SimpleNamespace(value=json.dumps(doc).encode()))


KARMADA_KEY = KARMADA_PROPAGATION_POLICY.key("web", "shop")


async def test_a_deleted_karmada_policy_keeps_its_binding_until_the_workload_goes() -> None:
    policies = {KARMADA_KEY: decoded(KARMADA_PROPAGATION_POLICY, KARMADA)}
    det, bindings = detector(policies, deployment())
    await det.reconcile(WEB)
    (key, made), = bindings.cache.items()
    assert made["spec"]["policyRef"]["apiVersion"] == "policy.karmada.io/v1alpha1"
    det._wrote.clear()  # the informer has brought the detector's own write

    del policies[KARMADA_KEY]  # kubectl delete pp web -n shop
    assert await det.reconcile(WEB) is None
    assert bindings.cache.get(key) == made, "the Binding of a deleted Karmada policy was not kept as it was"

    policies["own"] = decoded(PROPAGATION_POLICY, OWN)  # another policy claims the workload
    await det.reconcile(WEB)
    assert bindings.cache[key]["spec"]["policyRef"]["name"] == "own"
    det._wrote.clear()
    del policies["own"]  # DRO-DS's own policy deleted: its Binding goes
    await det.reconcile(WEB)
    assert key not in bindings.cache


async def test_the_workload_deleted_or_a_karmada_policy_that_no_longer_selects_it_lets_the_binding_go() -> None:
    policies = {KARMADA_KEY: decoded(KARMADA_PROPAGATION_POLICY, KARMADA)}
    det, bindings = detector(policies, deployment())
    await det.reconcile(WEB)
    (key, _), = bindings.cache.items()
    det._wrote.clear()
    del det.workloads[0].cache[WEB]  # the workload deleted, its policy gone too
    del policies[KARMADA_KEY]
    await det.reconcile(WEB)
    assert key not in bindings.cache

    det.workloads[0].cache[WEB] = deployment()
    policies[KARMADA_KEY] = decoded(KARMADA_PROPAGATION_POLICY, KARMADA)
    await det.reconcile(WEB)
    assert key in bindings.cache
    det._wrote.clear()
    other = copy.deepcopy(KARMADA)
    other["spec"]["resourceSelectors"][0]["name"] = "api"  # the policy still exists, selecting another
    policies[KARMADA_KEY] = decoded(KARMADA_PROPAGATION_POLICY, other)
    await det.reconcile(WEB)
    assert key not in bindings.cache
