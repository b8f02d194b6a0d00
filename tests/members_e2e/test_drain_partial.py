"""A drain whose replicas the rest of the fleet cannot all hold: the drained cluster's copy stays
(its Work marked as removing) until the workload's replicas are ready elsewhere, not just the
part the new placement could place; uncordoned, the pending part goes back there."""

from __future__ import annotations

from typing import Any

from tests.members_e2e.conftest import Env, deploy_path, deployment, wait_for

PP = "/apis/multicluster.io/v1alpha1/propagationpolicies"
WORKS = "/apis/multicluster.io/v1alpha1/works"
NAME = "drainfit"
BINDING = f"deployment-default-{NAME}"
BY_WATER_LEVEL = {"replicaSchedulingType": "Divided", "weightPreference": {"dynamicWeight": "WaterLevel"}}


def _placement(env: Env) -> dict[str, int]:
    st = (env.binding(BINDING) or {}).get("status") or {}
    return {str(p["cluster"]): int(p.get("replicas") or 0) for p in st.get("placement") or []}


def _removing_mark(env: Env, cluster: str) -> str | None:
    items = env.http.get(WORKS, params={"labelSelector": f"multicluster.io/binding={BINDING}"}).json()["items"]
    for w in items:
        if w["spec"]["cluster"] == cluster:
            return (w["metadata"].get("annotations") or {}).get("multicluster.io/removing-since")
    return None


def test_a_drain_keeps_the_copy_the_rest_of_the_fleet_cannot_take(env: Env) -> None:
    env.create(PP, {"apiVersion": "multicluster.io/v1alpha1", "kind": "PropagationPolicy",
                    "metadata": {"name": NAME},
                    "spec": {"resourceSelectors": [{"apiVersion": "apps/v1", "kind": "Deployment", "name": NAME}],
                             "placement": {"clusterAffinity": {"clusterNames": ["aws-dfw", "gcp-sin"]},
                                           "replicaScheduling": BY_WATER_LEVEL}}})
    # 7 cores a replica on 24-core members: no member can hold all four (28 cores)
    env.create(deploy_path(), deployment(NAME, 4, cpu="7", memory="1Gi"))
    try:
        wait_for(lambda: _placement(env) == {"aws-dfw": 2, "gcp-sin": 2} and
                 env.copies(NAME) == {"aws-dfw": 2, "gcp-sin": 2}, 30, "two replicas in each member",
                 what_else=lambda: (env.binding(BINDING) or {}).get("status"))
        out = env.server.run_cli("cluster", "drain", "gcp-sin", "--wait", "--timeout", "30",
                                 "--server", env.server.url, "--token", env.server.token("admin"))
        # said as soon as the scheduler's decision shows, not after the timeout
        assert out.returncode == 0, out.stderr
        assert f"left in place: {BINDING}: " in out.stdout and " of 4 replicas placed elsewhere, the copy there " \
            "stays until the rest are" in out.stdout, out.stdout
        wait_for(lambda: "gcp-sin" not in _placement(env) and sum(_placement(env).values()) < 4, 20,
                 "re-placed without gcp-sin, part of it pending", what_else=lambda: _placement(env))
        # the old copy is kept, marked, not emptied: 4 replicas are asked for and fewer are placed
        since = wait_for(lambda: _removing_mark(env, "gcp-sin"), 15, "gcp-sin's Work marked as removing",
                         what_else=lambda: (env.binding(BINDING) or {}).get("status", {}).get("clusters"))
        assert since
        assert env.copies(NAME).get("gcp-sin") == 2

        def entry() -> dict[str, Any] | None:
            clusters = (env.binding(BINDING) or {}).get("status", {}).get("clusters") or []
            return next((e for e in clusters if e["cluster"] == "gcp-sin" and e.get("removing")), None)

        assert wait_for(entry, 10, "the binding shows gcp-sin's copy as removing")["removingSince"]
        assert env.copies(NAME).get("gcp-sin") == 2
        # uncordoned, the pending replicas are placed there again and its copy is wanted once more
        r = env.http.patch("/api/v1/clusters/gcp-sin", json={"unschedulable": False},
                           headers={"Content-Type": "application/merge-patch+json"})
        assert r.status_code == 200, r.text
        wait_for(lambda: sum(_placement(env).values()) == 4 and _placement(env).get("gcp-sin"), 30,
                 "the pending part placed on gcp-sin again", what_else=lambda: _placement(env))
        wait_for(lambda: _removing_mark(env, "gcp-sin") is None, 15, "gcp-sin's Work no longer removing")
        assert sum(env.copies(NAME).values()) == 4
    finally:
        env.http.patch("/api/v1/clusters/gcp-sin", json={"unschedulable": False},
                       headers={"Content-Type": "application/merge-patch+json"})
        env.delete(deploy_path(name=NAME))
        env.delete(f"{PP}/{NAME}")
        wait_for(lambda: env.copies(NAME) == {}, 20, "copies gone")
