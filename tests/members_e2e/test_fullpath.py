"""The whole path: workload + policy → resource detector → scheduler → propagation → members,
and back: status, failover (S11), cordon/drain."""

from __future__ import annotations

import time
from typing import Any

from tests.members_e2e.conftest import Env, deploy_path, deployment, wait_for

RPP = "/apis/multicluster.io/v1alpha1/resourceplacementpolicies"
MERGE = {"Content-Type": "application/merge-patch+json"}


def policy(name: str, workload: str, clusters: list[str] | None = None, **placement: Any) -> dict[str, Any]:
    spec: dict[str, Any] = {"resourceSelector": {"apiVersion": "apps/v1", "kind": "Deployment", "name": workload,
                                                 "namespace": "default"},
                            "placement": {"replicaScheduling": {"replicaSchedulingType": "Divided",
                                                                "weightPreference": {"dynamicWeight": "WaterLevel"}},
                                          **placement}}
    if clusters:
        spec["targetClusters"] = [{"selectorType": "name", "values": clusters}]
    return {"apiVersion": "multicluster.io/v1alpha1", "kind": "ResourcePlacementPolicy", "metadata": {"name": name},
            "spec": spec}


def binding_of(workload: str) -> str:
    return f"deployment-default-{workload}"


def running(env: Env, workload: str) -> dict[str, Any] | None:
    b = env.binding(binding_of(workload))
    return b if b and (b.get("status") or {}).get("phase") == "Running" else None


def placement(b: dict[str, Any]) -> dict[str, int]:
    return {t["cluster"]: t["replicas"] for t in b["status"].get("placement") or []}


def cleanup(env: Env, workload: str) -> None:
    env.delete(f"{RPP}/{workload}")
    env.delete(deploy_path(name=workload))
    wait_for(lambda: env.binding(binding_of(workload)) is None, 15, f"binding of {workload} deleted")
    wait_for(lambda: env.copies(workload) == {}, 15, f"copies of {workload} deleted")


def test_divide_by_water_level_propagate_scale_and_aggregate(env: Env) -> None:
    # what the division below is judged by: azure-lhr (preloaded) the fullest in the scheduler's view,
    # once the load another test left on the others has gone from it
    wait_for(lambda: (lv := env.scheduler_levels()) and all(lv[c] < lv["azure-lhr"] for c in ("aws-dfw", "gcp-sin")),
             60, "the scheduler's view with azure-lhr the fullest", what_else=env.scheduler_levels)
    env.create(RPP, policy("web", "web"))
    env.create(deploy_path(), deployment("web", 6))
    b = wait_for(lambda: running(env, "web"), 20, "web Running")
    where = placement(b)
    assert sum(where.values()) == 6
    copies = env.copies("web")
    assert copies == {c: n for c, n in where.items() if n}
    # azure-lhr is half full (preloaded): it gets fewer replicas than each emptier cluster
    assert all(copies.get("azure-lhr", 0) < copies[c] for c in ("aws-dfw", "gcp-sin")), copies
    wait_for(lambda: (t := env.http.get(deploy_path(name="web")).json())["status"].get("readyReplicas") == 6
                 and t, 10, "aggregated status")
    cities = {"aws-dfw": "DFW", "azure-lhr": "LHR", "gcp-sin": "SIN"}
    rows = (env.binding(binding_of("web")) or {})["status"]["clusters"]  # where each copy runs (M1)
    assert {c["cluster"]: c["city"] for c in rows} == {c: cities[c] for c in copies}
    # scale up and down through the template: the detector, the scheduler and propagation follow
    env.http.patch(deploy_path(name="web"), json={"spec": {"replicas": 9}}, headers=MERGE)
    wait_for(lambda: sum(env.copies("web").values()) == 9, 20, "scaled to 9")
    env.http.patch(deploy_path(name="web"), json={"spec": {"replicas": 3}}, headers=MERGE)
    wait_for(lambda: sum(env.copies("web").values()) == 3, 20, "scaled to 3",
             what_else=lambda: (env.copies("web"), (env.binding(binding_of("web")) or {}).get("spec"),
                                (env.binding(binding_of("web")) or {}).get("metadata"),
                                env.http.get(deploy_path(name="web")).json()))
    wait_for(lambda: env.http.get(deploy_path(name="web")).json()["status"].get("readyReplicas") == 3,
             15, "template shows 3 ready")
    cleanup(env, "web")


def _failover(env: Env, workload: str, mode: str) -> None:
    # even static weights: by water level, load another test left on one member (its status shows it for up
    # to 30 s) could draw all 4 small replicas to the other, and there would be nothing to fail over
    even = {"replicaSchedulingType": "Divided", "weightPreference": {"staticWeightList": [
        {"targetCluster": {"clusterNames": [c]}, "weight": 1} for c in ("aws-dfw", "gcp-sin")]}}
    env.create(RPP, policy(workload, workload, ["aws-dfw", "gcp-sin"], replicaScheduling=even))
    env.create(deploy_path(), deployment(workload, 4))
    b = wait_for(lambda: running(env, workload), 20, f"{workload} Running")
    assert set(placement(b)) == {"aws-dfw", "gcp-sin"}, placement(b)
    victim = "aws-dfw"
    before = env.members[victim].deployment(workload)
    assert before is not None
    env.members[victim].fault(mode)
    t0 = time.monotonic()
    wait_for(lambda: env.ready(victim) == "False", 15, f"{victim} NotReady")
    not_ready = time.monotonic() - t0

    def moved() -> dict[str, Any] | None:
        x = env.binding(binding_of(workload))
        # Running on the new placement, and the old copy handed to the cleanup records (entry gone)
        return x if x and victim not in placement(x) and x["status"].get("phase") == "Running" and \
            victim not in {e["cluster"] for e in x["status"]["clusters"]} else None

    b = wait_for(moved, 25, "replicas moved off the failed cluster",
                 what_else=lambda: (env.binding(binding_of(workload)) or {}).get("status"))
    assert placement(b) == {"gcp-sin": 4}
    assert env.members["gcp-sin"].deployment(workload).spec.replicas == 4
    # the member comes back: nothing is duplicated, the old copy is cleaned up
    env.members[victim].fault("up")
    wait_for(lambda: env.ready(victim) == "True", 15, f"{victim} Ready again")
    wait_for(lambda: env.members[victim].deployment(workload) is None, 15, "old copy cleaned up")
    assert env.copies(workload) == {"gcp-sin": 4}
    assert placement(env.binding(binding_of(workload)) or {}) == {"gcp-sin": 4}
    assert not_ready < 10
    cleanup(env, workload)


def test_member_down_fails_over_and_recovers_without_duplicates(fresh: Env) -> None:
    _failover(fresh, "fo", "down")


def test_partition_is_handled_like_down(fresh: Env) -> None:
    _failover(fresh, "pt", "partition")


def _two_by_two(env: Env, name: str, clusters: tuple[str, str]) -> None:
    """``name`` running 2 + 2 on ``clusters`` (even static weights), tolerating NotReady for 3 s."""
    even = {"replicaSchedulingType": "Divided", "weightPreference": {"staticWeightList": [
        {"targetCluster": {"clusterNames": [c]}, "weight": 1} for c in clusters]}}
    tolerate = [{"key": "cluster.multicluster.io/not-ready", "operator": "Exists", "effect": "NoExecute",
                 "tolerationSeconds": 3}]
    env.create(RPP, policy(name, name, list(clusters), replicaScheduling=even, clusterTolerations=tolerate))
    env.create(deploy_path(), deployment(name, 4))
    b = wait_for(lambda: running(env, name), 20, f"{name} Running")
    assert placement(b) == dict.fromkeys(clusters, 2)


def test_every_member_gone_moves_nothing_and_their_copies_stay_when_they_return(fresh: Env) -> None:
    """Every member stops answering at once: no failover (nowhere to go, and more likely the control plane's
    loss than theirs) past the binding's toleration; back, the same copies run where they ran."""
    env, name = fresh, "all-gone"
    _two_by_two(env, name, ("aws-dfw", "gcp-sin"))
    uids = {c: env.members[c].deployment(name).metadata.uid for c in ("aws-dfw", "gcp-sin")}
    for m in env.members.values():
        m.fault("partition")
    wait_for(lambda: all(env.ready(c) == "False" for c in env.members), 15, "every member NotReady")
    held_until = time.monotonic() + 6.0  # twice the binding's toleration: held all that time
    while time.monotonic() < held_until:
        b = env.binding(binding_of(name)) or {}
        assert placement(b) == {"aws-dfw": 2, "gcp-sin": 2}, b.get("status")
        assert "multicluster.io/failed-over-from" not in (b["metadata"].get("annotations") or {})
        time.sleep(0.2)
    for c in ("aws-dfw", "gcp-sin", "azure-lhr"):  # the members holding copies first: within the toleration
        env.members[c].fault("up")
    wait_for(lambda: all(env.ready(c) == "True" for c in env.members), 15, "every member Ready again")
    b = wait_for(lambda: running(env, name), 15, f"{name} Running again")
    assert placement(b) == {"aws-dfw": 2, "gcp-sin": 2}
    assert {c: env.members[c].deployment(name).metadata.uid for c in uids} == uids  # not deleted and made anew
    assert env.copies(name) == {"aws-dfw": 2, "gcp-sin": 2}
    cleanup(env, name)


def test_most_members_gone_halts_failover_until_one_returns(fresh: Env) -> None:
    """Two of three members stop answering: more than 55 % of a small fleet, so nothing fails over (the
    few left could not take everyone, and the control plane may be the one cut off); once one is back,
    the other's bindings leave it as their tolerations say."""
    env, name = fresh, "most-gone"
    _two_by_two(env, name, ("aws-dfw", "azure-lhr"))
    for c in ("aws-dfw", "gcp-sin"):
        env.members[c].fault("partition")
    wait_for(lambda: env.ready("aws-dfw") == "False" and env.ready("gcp-sin") == "False", 15, "two NotReady")
    halted_until = time.monotonic() + 6.0  # twice the binding's toleration
    while time.monotonic() < halted_until:
        b = env.binding(binding_of(name)) or {}
        assert placement(b) == {"aws-dfw": 2, "azure-lhr": 2}, b.get("status")
        time.sleep(0.2)
    env.members["gcp-sin"].fault("up")
    b = wait_for(lambda: (x := env.binding(binding_of(name))) and placement(x) == {"azure-lhr": 4} and x, 25,
                 "moved off aws-dfw once gcp-sin was back",
                 what_else=lambda: (env.binding(binding_of(name)) or {}).get("status"))
    assert b["metadata"]["annotations"]["multicluster.io/failed-over-from"] == "aws-dfw"
    env.members["aws-dfw"].fault("up")
    wait_for(lambda: env.ready("aws-dfw") == "True", 15, "aws-dfw Ready again")
    wait_for(lambda: env.copies(name) == {"azure-lhr": 4}, 20, "the old copy cleaned up")
    cleanup(env, name)


def test_cordon_and_drain(env: Env) -> None:
    env.create(RPP, policy("dr", "dr", ["aws-dfw", "gcp-sin"]))
    env.create(deploy_path(), deployment("dr", 4))
    env.create(RPP, policy("pinned", "pinned", ["gcp-sin"]))  # nowhere else to go
    env.create(deploy_path(), deployment("pinned", 1))
    wait_for(lambda: running(env, "dr") and running(env, "pinned"), 20, "dr and pinned Running")
    cli = ["--server", env.server.url, "--token", env.server.token("admin")]
    out = env.server.run_cli("cluster", "cordon", "gcp-sin", *cli)
    assert out.returncode == 0 and "cluster/gcp-sin cordoned" in out.stdout
    assert env.cluster("gcp-sin")["spec"]["unschedulable"] is True
    assert env.members["gcp-sin"].deployment("dr") is not None  # cordon moves nothing
    out = env.server.run_cli("cluster", "drain", "gcp-sin", "--wait", "--timeout", "30", *cli)
    assert out.returncode == 0, out.stderr
    assert "deployment-default-dr" in out.stdout and "drained" in out.stdout
    # the one that cannot move is said at once, not waited for until the timeout
    assert "left in place: deployment-default-pinned: cannot be placed elsewhere" in out.stdout, out.stdout
    assert env.copies("dr") == {"aws-dfw": 4} and env.copies("pinned") == {"gcp-sin": 1}
    out = env.server.run_cli("cluster", "uncordon", "gcp-sin", *cli)
    assert out.returncode == 0 and env.cluster("gcp-sin")["spec"]["unschedulable"] is False
    cleanup(env, "dr")
    cleanup(env, "pinned")
