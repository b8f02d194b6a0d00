"""The WorkloadRebalancer controller against a real registry (sqlite) and an injectable clock: each
listed workload's Binding is asked for a fresh decision once, a workload without a Binding is
Failed / ReferencedBindingNotFound, results survive a spec change, and the object is deleted
``ttlSecondsAfterFinished`` after it finished."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from drods.controllers.rebalancer import WorkloadRebalancerController
from drods.errors import NotFound
from drods.machinery.informer import Informer
from drods.model.kinds import BINDING, WORKLOAD_REBALANCER
from drods.registry.objects import ObjectRegistry, decode_stored
from drods.registry.secrets import SecretBox, load_or_create_key
from drods.store.sqlite import SqliteStore


def ref(name: str, namespace: str = "shop") -> dict[str, str]:
    return {"apiVersion": "apps/v1", "kind": "Deployment", "namespace": namespace, "name": name}


async def test_rebalancer_reschedules_reports_and_expires(tmp_path: Path) -> None:
    store = SqliteStore(str(tmp_path / "db"))
    registry = ObjectRegistry(store, SecretBox(load_or_create_key(tmp_path / "k")))
    now = [1_000_000.0]
    ctl = WorkloadRebalancerController(registry, Informer(store, WORKLOAD_REBALANCER.key_prefix(), decode_stored),
                                       clock=lambda: now[0])
    for name in ("web", "api"):
        await registry.create(BINDING, {"apiVersion": "multicluster.io/v1alpha1", "kind": "Binding",
                                        "metadata": {"name": f"deployment-shop-{name}"},
                                        "spec": {"resource": ref(name), "replicas": 2}})
    await registry.create(WORKLOAD_REBALANCER, {
        "apiVersion": "apps.karmada.io/v1alpha1", "kind": "WorkloadRebalancer", "metadata": {"name": "demo"},
        "spec": {"workloads": [ref("web"), ref("gone")], "ttlSecondsAfterFinished": 60}})

    async def reconciled() -> dict[str, Any]:
        await ctl.reconcile(await registry.get(WORKLOAD_REBALANCER, "demo"))
        return await registry.get(WORKLOAD_REBALANCER, "demo")

    rb = await reconciled()
    assert rb["status"]["observedWorkloads"] == [
        {"workload": ref("web"), "result": "Successful"},
        {"workload": ref("gone"), "result": "Failed", "reason": "ReferencedBindingNotFound"}]
    assert rb["status"]["observedGeneration"] == 1 and rb["status"]["finishTime"] == "1970-01-12T13:46:40Z"
    web = await registry.get(BINDING, "deployment-shop-web")
    assert web["spec"]["rescheduleTriggeredAt"] == "1970-01-12T13:46:40.000Z"
    assert web["metadata"]["annotations"]["multicluster.io/reschedule-reason"] == "WorkloadRebalancer demo"
    assert "rescheduleTriggeredAt" not in (await registry.get(BINDING, "deployment-shop-api"))["spec"]

    # a workload added later is rebalanced once; the first keeps its result and is not asked again
    now[0] += 10
    rb["spec"]["workloads"] = [ref("web"), ref("gone"), ref("api")]
    await registry.update(WORKLOAD_REBALANCER, rb)
    rb = await reconciled()
    assert [(w["workload"]["name"], w["result"]) for w in rb["status"]["observedWorkloads"]] == \
        [("web", "Successful"), ("gone", "Failed"), ("api", "Successful")]
    assert rb["status"]["observedGeneration"] == 2 and rb["status"]["finishTime"] == "1970-01-12T13:46:50Z"
    assert (await registry.get(BINDING, "deployment-shop-web"))["spec"]["rescheduleTriggeredAt"] == \
        "1970-01-12T13:46:40.000Z"
    assert (await registry.get(BINDING, "deployment-shop-api"))["spec"]["rescheduleTriggeredAt"] == \
        "1970-01-12T13:46:50.000Z"

    now[0] += 59
    await reconciled()  # still there a second before its TTL
    now[0] += 1
    await ctl.reconcile(await registry.get(WORKLOAD_REBALANCER, "demo"))
    with pytest.raises(NotFound):
        await registry.get(WORKLOAD_REBALANCER, "demo")
    await store.close()


async def test_a_binding_of_another_workload_is_not_taken_for_it(tmp_path: Path) -> None:
    store = SqliteStore(str(tmp_path / "db"))
    registry = ObjectRegistry(store, SecretBox(load_or_create_key(tmp_path / "k")))
    ctl = WorkloadRebalancerController(registry, Informer(store, WORKLOAD_REBALANCER.key_prefix(), decode_stored))
    await registry.create(BINDING, {"apiVersion": "multicluster.io/v1alpha1", "kind": "Binding",
                                    "metadata": {"name": "deployment-shop-web"},
                                    "spec": {"resource": {**ref("web"), "apiVersion": "example.io/v1"}}})
    rb = await registry.create(WORKLOAD_REBALANCER, {
        "apiVersion": "apps.karmada.io/v1alpha1", "kind": "WorkloadRebalancer", "metadata": {"name": "x"},
        "spec": {"workloads": [ref("web")]}})
    await ctl.reconcile(rb)
    rb = await registry.get(WORKLOAD_REBALANCER, "x")
    assert rb["status"]["observedWorkloads"][0]["reason"] == "ReferencedBindingNotFound"
    assert "rescheduleTriggeredAt" not in (await registry.get(BINDING, "deployment-shop-web"))["spec"]
    await ctl.reconcile(rb)  # finished, no TTL: it stays
    await registry.get(WORKLOAD_REBALANCER, "x")
    await store.close()


async def test_a_cluster_scoped_workload_is_found_by_its_detector_made_binding(tmp_path: Path) -> None:
    """Karmada's rebalancer guide lists a ClusterRole (no namespace): its Binding's reference carried
    namespace "default", so the rebalancer said ReferencedBindingNotFound."""
    from drods.model.detection import PolicyMatch, desired_binding
    from drods.model.kinds import PROPAGATION_POLICY, by_kind

    store = SqliteStore(str(tmp_path / "db"))
    registry = ObjectRegistry(store, SecretBox(load_or_create_key(tmp_path / "k")))
    ctl = WorkloadRebalancerController(registry, Informer(store, WORKLOAD_REBALANCER.key_prefix(), decode_stored))
    role_kind = by_kind("rbac.authorization.k8s.io/v1", "ClusterRole")
    assert role_kind is not None and not role_kind.namespaced
    role = {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole", "metadata": {"name": "demo-role"},
            "rules": []}
    made = desired_binding(role_kind, role, PolicyMatch(1, 3, 0, 1, "p", PROPAGATION_POLICY, {}, (), ()))
    assert "namespace" not in made["spec"]["resource"] and made["metadata"]["name"] == "clusterrole--demo-role"
    await registry.create(BINDING, made)
    workload = {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole", "name": "demo-role"}
    await registry.create(WORKLOAD_REBALANCER, {
        "apiVersion": "apps.karmada.io/v1alpha1", "kind": "WorkloadRebalancer", "metadata": {"name": "roles"},
        "spec": {"workloads": [workload]}})
    await ctl.reconcile(await registry.get(WORKLOAD_REBALANCER, "roles"))
    rb = await registry.get(WORKLOAD_REBALANCER, "roles")
    assert rb["status"]["observedWorkloads"] == [{"workload": workload, "result": "Successful"}], rb["status"]
    await store.close()
