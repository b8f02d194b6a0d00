"""A tenant cannot take another namespace's propagation through a name that collides with it (walkthrough AN,
item 1): Binding names are ``<kind>-<namespace>-<name>``, so Secret ``tn-a/s1`` and Secret ``tn/a-s1`` are
both ``secret-tn-a-s1``. A tenant with an operator token limited to ``tn`` made ``a-s1`` and a policy: the
victim's Binding was rewritten for it, the victim's Secret removed from the member, and it did not come back
when ``a-s1`` was deleted. Now the victim keeps its Binding and its copy; the tenant's Secret is not placed,
and a Warning Event on it says why."""

from __future__ import annotations

from typing import Any

import httpx

from drods.transport import transport
from tests.members_e2e.conftest import Env, wait_for

CLUSTER = "aws-dfw"
NAME = "secret-tn-a-s1"


def secret(namespace: str, name: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": name, "namespace": namespace},
            "data": {"owner": "dGVuYW50"}}


def policy(namespace: str) -> dict[str, Any]:
    """A tenant's own policy: its namespace's Secrets onto one member."""
    return {"apiVersion": "policy.karmada.io/v1alpha1", "kind": "PropagationPolicy",
            "metadata": {"name": "secrets", "namespace": namespace},
            "spec": {"resourceSelectors": [{"apiVersion": "v1", "kind": "Secret"}],
                     "placement": {"clusterAffinity": {"clusterNames": [CLUSTER]}}}}


def tenant(env: Env, namespace: str) -> httpx.Client:
    done = env.server.run_cli("token", "create", "--role", "operator", "--namespace", namespace,
                              "--data-dir", str(env.server.data_dir))
    assert done.returncode == 0, done.stderr
    return httpx.Client(base_url=env.server.url, transport=transport(env.server.verify), timeout=10,
                        headers={"Authorization": f"Bearer {done.stdout.strip()}"})


def post(http: httpx.Client, path: str, obj: dict[str, Any]) -> None:
    r = http.post(path, json=obj)
    assert r.status_code == 201, r.text


def test_a_colliding_name_in_another_namespace_takes_nothing_from_the_first(env: Env) -> None:
    member = env.members[CLUSTER]
    for ns in ("tn-a", "tn"):
        env.create("/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}})
    env.create("/api/v1/namespaces/tn-a/secrets", secret("tn-a", "s1"))  # the victim's, placed by its policy
    env.create("/apis/policy.karmada.io/v1alpha1/namespaces/tn-a/propagationpolicies", policy("tn-a"))
    wait_for(lambda: member.get("/api/v1/namespaces/tn-a/secrets/s1"), 20, "the victim's Secret on the member")
    held = env.binding(NAME)
    assert held is not None and held["spec"]["resource"]["namespace"] == "tn-a"

    with tenant(env, "tn") as http:
        post(http, "/api/v1/namespaces/tn/secrets", secret("tn", "a-s1"))
        post(http, "/apis/policy.karmada.io/v1alpha1/namespaces/tn/propagationpolicies", policy("tn"))

        def told() -> dict[str, Any] | None:
            r = http.get("/api/v1/namespaces/tn/events")
            assert r.status_code == 200, r.text
            return next((e for e in r.json()["items"] if e.get("reason") == "BindingNameTaken"
                         and e["involvedObject"].get("name") == "a-s1"), None)

        event = wait_for(told, 20, "a Warning Event on the tenant's Secret")
        assert event["type"] == "Warning" and "Secret tn-a/s1" in event["message"] and "rename" in event["message"]

        # a Secret of the tenant's that collides with nothing is placed: the detector has been through its policy
        post(http, "/api/v1/namespaces/tn/secrets", secret("tn", "marker"))
        wait_for(lambda: member.get("/api/v1/namespaces/tn/secrets/marker"), 20, "the tenant's other Secret placed")
        now = env.binding(NAME)
        assert now is not None and now["metadata"]["uid"] == held["metadata"]["uid"]
        assert now["spec"]["resource"] == held["spec"]["resource"], "the victim's Binding was rewritten"
        assert member.get("/api/v1/namespaces/tn-a/secrets/s1") is not None
        assert member.get("/api/v1/namespaces/tn/secrets/a-s1") is None

        r = http.delete("/api/v1/namespaces/tn/secrets/a-s1")  # the tenant deletes its Secret …
        assert r.status_code == 200, r.text
        r = http.delete("/api/v1/namespaces/tn/secrets/marker")
        assert r.status_code == 200, r.text
        wait_for(lambda: member.get("/api/v1/namespaces/tn/secrets/marker") is None, 20, "the marker gone")
    after = env.binding(NAME)  # … and the victim's Binding and copy stay
    assert after is not None and after["metadata"]["uid"] == held["metadata"]["uid"]
    assert after["spec"]["resource"] == held["spec"]["resource"] and "deletionTimestamp" not in after["metadata"]
    assert member.get("/api/v1/namespaces/tn-a/secrets/s1") is not None
    env.delete("/apis/policy.karmada.io/v1alpha1/namespaces/tn-a/propagationpolicies/secrets")
    env.delete("/apis/policy.karmada.io/v1alpha1/namespaces/tn/propagationpolicies/secrets")
