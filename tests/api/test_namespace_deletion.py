"""Deleting a Namespace as Kubernetes does: it turns Terminating, the namespace controller deletes
everything stored in it (built-in, Karmada and custom kinds; an object held by a finalizer is waited
for), then the Namespace goes. Nothing new may be created in it meanwhile, and ``default`` and
``kube-system`` may not be deleted at all."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest

from drods.api.auth import Role
from drods.assembly import Component
from drods.server import ServerConfig, build_app
from drods.store import Store
from tests.api.conftest import Api, served

NS = "/api/v1/namespaces"
CRDS = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions"
HOLD = "example.com/hold"


@pytest.fixture
async def api(store_factory: Callable[[], Store], tmp_path: Path) -> AsyncIterator[Api]:
    """The API server with the component that runs the namespace controller (the detector's)."""
    store = store_factory()
    await store.delete_prefix("/")  # the etcd of the session is shared between tests
    app = build_app(ServerConfig(store_url="unused://", data_dir=tmp_path / "data",
                                 components=frozenset({Component.API, Component.DETECTOR})), store=store)
    tokens = {"admin": app.state.ctx.tokens.issue(Role.ADMIN, subject="test-admin")}
    async with served(app, tokens) as api_:
        yield api_


def contents(ns: str) -> dict[str, dict[str, Any]]:
    """A path in ``ns`` → an object to create there."""
    deploy = {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "d3"},
              "spec": {"replicas": 2, "selector": {"matchLabels": {"app": "d3"}},
                       "template": {"metadata": {"labels": {"app": "d3"}},
                                    "spec": {"containers": [{"name": "c", "image": "nginx"}]}}}}
    policy = {"apiVersion": "policy.karmada.io/v1alpha1", "kind": "PropagationPolicy", "metadata": {"name": "pp3"},
              "spec": {"resourceSelectors": [{"apiVersion": "apps/v1", "kind": "Deployment", "name": "d3"}],
                       "placement": {"clusterAffinity": {"clusterNames": ["member1"]}}}}
    return {
        f"/apis/apps/v1/namespaces/{ns}/deployments": deploy,
        f"/api/v1/namespaces/{ns}/configmaps": {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "cm"},
                                                "data": {"k": "v"}},
        f"/api/v1/namespaces/{ns}/secrets": {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "s"},
                                             "stringData": {"password": "p"}},
        f"/apis/policy.karmada.io/v1alpha1/namespaces/{ns}/propagationpolicies": policy,
        f"/apis/toys.example.com/v1/namespaces/{ns}/gadgets": {
            "apiVersion": "toys.example.com/v1", "kind": "Gadget", "metadata": {"name": "g"}, "spec": {"size": 1}},
    }


def gadgets_definition() -> dict[str, Any]:
    schema = {"type": "object", "properties": {"spec": {"type": "object", "properties": {"size": {"type": "integer"}}}}}
    return {"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
            "metadata": {"name": "gadgets.toys.example.com"},
            "spec": {"group": "toys.example.com", "scope": "Namespaced",
                     "names": {"plural": "gadgets", "singular": "gadget", "kind": "Gadget"},
                     "versions": [{"name": "v1", "served": True, "storage": True,
                                   "schema": {"openAPIV3Schema": schema}}]}}


async def until_gone(api: Api, path: str, seconds: float = 15) -> None:
    """Wait, with a deadline, until ``path`` answers 404."""
    async with asyncio.timeout(seconds):
        while (r := await api.call("GET", path)).status_code != 404:
            assert r.status_code == 200, r.text
            await asyncio.sleep(0.05)


async def fill(api: Api, ns: str) -> dict[str, dict[str, Any]]:
    assert (await api.call("POST", CRDS, json=gadgets_definition())).status_code == 201
    r = await api.call("POST", NS, json={"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}})
    assert r.status_code == 201, r.text
    assert r.json()["spec"]["finalizers"] == ["kubernetes"] and r.json()["status"]["phase"] == "Active"
    objs = contents(ns)
    for path, obj in objs.items():
        assert (r := await api.call("POST", path, json=obj)).status_code == 201, (path, r.text)
    return objs


async def test_deleting_a_namespace_deletes_everything_in_it_then_the_namespace(api: Api) -> None:
    objs = await fill(api, "ns3")
    r = await api.call("DELETE", f"{NS}/ns3")
    assert r.status_code == 200, r.text
    ns = r.json()
    assert ns["kind"] == "Namespace" and ns["metadata"]["deletionTimestamp"]
    assert ns["status"]["phase"] == "Terminating" and ns["spec"]["finalizers"] == ["kubernetes"]
    await until_gone(api, f"{NS}/ns3")
    for path, obj in objs.items():
        assert (await api.call("GET", f"{path}/{obj['metadata']['name']}")).status_code == 404, path
        assert (await api.call("GET", path)).json()["items"] == [], path


async def test_an_object_held_by_a_finalizer_keeps_its_namespace_terminating_until_it_goes(api: Api) -> None:
    await fill(api, "held")
    held = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "held", "finalizers": [HOLD]}}
    assert (await api.call("POST", f"{NS}/held/configmaps", json=held)).status_code == 201
    assert (await api.call("DELETE", f"{NS}/held")).status_code == 200
    await until_gone(api, "/apis/apps/v1/namespaces/held/deployments/d3")  # the rest is deleted
    async with asyncio.timeout(15):  # the held one is marked, and waited for: wait on it with a deadline
        for _ in iter(int, 1):
            if (await api.call("GET", f"{NS}/held/configmaps/held")).json()["metadata"].get("deletionTimestamp"):
                break
            await asyncio.sleep(0.05)
    assert (await api.call("GET", f"{NS}/held")).json()["status"]["phase"] == "Terminating"
    # what holds it is said on it, in the conditions and words of kube's namespace controller
    left = "Some resources are remaining: configmaps. has 1 resource instances"
    conditions: dict[str, Any] = {}
    async with asyncio.timeout(15):  # the first pass may still count what other finalizers held a moment
        while True:
            ns = (await api.call("GET", f"{NS}/held")).json()
            conditions = {c["type"]: c for c in ns["status"].get("conditions") or []}
            if conditions.get("NamespaceContentRemaining", {}).get("message") == left:
                break
            await asyncio.sleep(0.05)
    remaining, held_by = conditions["NamespaceContentRemaining"], conditions["NamespaceFinalizersRemaining"]
    assert (remaining["status"], remaining["reason"]) == ("True", "SomeResourcesRemain"), conditions
    assert (held_by["status"], held_by["reason"]) == ("True", "SomeFinalizersRemain"), conditions
    assert held_by["message"] == f"Some content in the namespace has finalizers remaining: {HOLD} in 1 resource " \
        "instances"
    assert conditions["NamespaceDeletionContentFailure"]["status"] == "False" and remaining["lastTransitionTime"]
    r = await api.call("PATCH", f"{NS}/held/configmaps/held", json={"metadata": {"finalizers": None}},
                       headers={"content-type": "application/merge-patch+json"})
    assert r.status_code == 200, r.text
    await until_gone(api, f"{NS}/held/configmaps/held")
    await until_gone(api, f"{NS}/held")


async def test_nothing_new_is_created_in_a_terminating_namespace(api: Api) -> None:
    await fill(api, "closing")
    held = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "held", "finalizers": [HOLD]}}
    assert (await api.call("POST", f"{NS}/closing/configmaps", json=held)).status_code == 201
    assert (await api.call("DELETE", f"{NS}/closing")).status_code == 200
    late = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "late"}}
    r = await api.call("POST", f"{NS}/closing/configmaps", json=late)
    assert r.status_code == 403, r.text
    assert r.json()["reason"] == "Forbidden"
    assert "unable to create new content in namespace closing because it is being terminated" in r.json()["message"]
    # server-side apply creates too: refused the same way
    r = await api.call("PATCH", f"{NS}/closing/configmaps/late", params={"fieldManager": "t"}, json=late,
                       headers={"content-type": "application/apply-patch+yaml"})
    assert r.status_code == 403, r.text
    # a second delete answers the Terminating namespace again
    r = await api.call("DELETE", f"{NS}/closing")
    assert r.status_code == 200 and r.json()["status"]["phase"] == "Terminating"
    # once it is gone, creating there is allowed again (objects may precede their namespace)
    await api.call("PATCH", f"{NS}/closing/configmaps/held", json={"metadata": {"finalizers": None}},
                   headers={"content-type": "application/merge-patch+json"})
    await until_gone(api, f"{NS}/closing")
    assert (await api.call("POST", f"{NS}/closing/configmaps", json=late)).status_code == 201


async def test_default_and_kube_system_may_not_be_deleted(api: Api) -> None:
    for name in ("default", "kube-system"):
        await api.call("POST", NS, json={"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}})
        r = await api.call("DELETE", f"{NS}/{name}")
        assert r.status_code == 403, r.text
        assert r.json()["reason"] == "Forbidden" and "this namespace may not be deleted" in r.json()["message"]
        ns = (await api.call("GET", f"{NS}/{name}")).json()
        assert "deletionTimestamp" not in ns["metadata"] and ns["status"]["phase"] == "Active"


async def test_a_dry_run_delete_answers_the_namespace_as_the_delete_would_leave_it(api: Api) -> None:
    await api.call("POST", NS, json={"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "dry"}})
    r = await api.call("DELETE", f"{NS}/dry", params={"dryRun": "All"})
    assert r.status_code == 200, r.text
    assert r.json()["status"]["phase"] == "Terminating" and r.json()["metadata"].get("deletionTimestamp"), r.text
    ns = (await api.call("GET", f"{NS}/dry")).json()  # and nothing changed
    assert "deletionTimestamp" not in ns["metadata"] and ns["status"]["phase"] == "Active", ns


async def test_the_system_namespaces_are_there_from_the_start(api: Api) -> None:
    """As on a Kubernetes cluster, ``kubectl get ns default`` answers on a fresh control plane: the
    system namespaces are stored objects, Active with the ``kubernetes`` finalizer, and creating one
    again is AlreadyExists."""
    names = ("default", "kube-system", "kube-public", "kube-node-lease")
    async with asyncio.timeout(15):
        while True:
            if {i["metadata"]["name"] for i in (await api.call("GET", NS)).json()["items"]} >= set(names):
                break
            await asyncio.sleep(0.05)
    for name in names:
        ns = (await api.call("GET", f"{NS}/{name}")).json()
        assert ns["kind"] == "Namespace" and ns["status"]["phase"] == "Active", ns
        assert ns["spec"]["finalizers"] == ["kubernetes"], ns
    r = await api.call("POST", NS, json={"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "default"}})
    assert r.status_code == 409 and r.json()["reason"] == "AlreadyExists", r.text


async def test_an_update_keeps_the_finalizer_and_a_namespace_stored_without_one_is_still_emptied(api: Api) -> None:
    """``kubectl replace`` without a spec must not let a delete skip the cleanup, nor may a Namespace
    stored before the finalizer rule (it gets it on delete)."""
    await fill(api, "old")
    r = await api.call("PUT", f"{NS}/old", json={"apiVersion": "v1", "kind": "Namespace",
                                                  "metadata": {"name": "old", "labels": {"x": "y"}}})
    assert r.status_code == 200 and r.json()["spec"]["finalizers"] == ["kubernetes"], r.text
    ctx = api.app.state.ctx  # type: ignore[attr-defined]
    kv = await ctx.store.get("/registry/core/namespaces/old")
    stored = {**json.loads(kv.value), "spec": {}}
    await ctx.store.put("/registry/core/namespaces/old", json.dumps(stored).encode())
    assert (await api.call("DELETE", f"{NS}/old")).status_code == 200
    await until_gone(api, f"{NS}/old")
    assert (await api.call("GET", f"{NS}/old/configmaps")).json()["items"] == []


async def test_a_stuck_namespace_is_let_go_through_its_finalize_subresource(api: Api) -> None:
    """What an operator does with a namespace a finalizer keeps Terminating (kube-apiserver's
    ``PUT …/namespaces/NAME/finalize``, as ``kubectl replace --raw`` sends it)."""
    r = await api.call("POST", NS, json={"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "stuck"}})
    assert r.status_code == 201, r.text
    held = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "held", "finalizers": [HOLD]}}
    assert (await api.call("POST", f"{NS}/stuck/configmaps", json=held)).status_code == 201
    assert (await api.call("DELETE", f"{NS}/stuck")).status_code == 200
    ns = (await api.call("GET", f"{NS}/stuck")).json()
    assert ns["status"]["phase"] == "Terminating" and ns["spec"]["finalizers"] == ["kubernetes"]
    for method in ("GET", "PATCH", "POST"):
        r = await api.call(method, f"{NS}/stuck/finalize", json={})
        assert r.status_code == 405 and r.json()["reason"] == "MethodNotAllowed", (method, r.text)
        assert r.headers["Allow"] == "PUT"
    # only spec.finalizers changes through it: the labels sent along are not taken. The namespace
    # controller may write its conditions after the read: a 409 is re-read and sent again, as a user would.
    deadline = time.monotonic() + 10
    while True:
        let_go = {**ns, "metadata": {**ns["metadata"], "labels": {"sneaked": "in"}}, "spec": {"finalizers": []}}
        r = await api.call("PUT", f"{NS}/stuck/finalize", json=let_go)
        if r.status_code != 409 or time.monotonic() > deadline:
            break
        ns = (await api.call("GET", f"{NS}/stuck")).json()
    assert r.status_code == 200, r.text
    assert "sneaked" not in (r.json()["metadata"].get("labels") or {})
    await until_gone(api, f"{NS}/stuck")
    # a live namespace is not deleted by it, only its finalizers set
    assert (await api.call("POST", NS, json={"apiVersion": "v1", "kind": "Namespace",
                                            "metadata": {"name": "live"}})).status_code == 201
    r = await api.call("PUT", f"{NS}/live/finalize", json={"metadata": {"name": "live"}, "spec": {"finalizers": []}})
    assert r.status_code == 200, r.text
    live = (await api.call("GET", f"{NS}/live")).json()
    assert live["status"]["phase"] == "Active" and live["spec"]["finalizers"] == []


async def test_a_namespace_carries_its_name_label_as_kube_apiserver_keeps_it(api: Api) -> None:
    """`kubectl get ns -l kubernetes.io/metadata.name=shop` found nothing: kube-apiserver (1.21+) labels every
    Namespace with its name, and keeps the label whatever an update or a patch says."""
    r = await api.call("POST", "/api/v1/namespaces", json={"apiVersion": "v1", "kind": "Namespace",
                                                             "metadata": {"name": "shop", "labels": {"team": "a"}}})
    assert r.status_code == 201, r.text
    assert r.json()["metadata"]["labels"] == {"team": "a", "kubernetes.io/metadata.name": "shop"}
    r = await api.call("PATCH", "/api/v1/namespaces/shop", json={"metadata": {"labels": {
        "kubernetes.io/metadata.name": None, "team": "b"}}}, headers={"content-type": "application/merge-patch+json"})
    assert r.status_code == 200, r.text
    assert r.json()["metadata"]["labels"] == {"team": "b", "kubernetes.io/metadata.name": "shop"}
    r = await api.call("GET", "/api/v1/namespaces", params={"labelSelector": "kubernetes.io/metadata.name=shop"})
    assert [n["metadata"]["name"] for n in r.json()["items"]] == ["shop"], r.text
