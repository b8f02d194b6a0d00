"""A push member's workload status reaches its Work through a watch, not at the next list: with the
lists a minute apart, a copy's readiness and its deletion behind DRO-DS's back are seen in seconds."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path

import pytest
from kubernetes import client as k8s
from kubernetes import config as k8s_config

from drods.model.annotations import ANN_HASH
from drods.sim.harness import SimProcess
from tests.members_e2e.conftest import FAST, SIMS, Env, Member, deploy_path, deployment, wait_for
from tests.server_process import ServerProcess

WORKS = "/apis/multicluster.io/v1alpha1/works"
LISTS_A_MINUTE_APART = FAST.replace("statusPollSeconds: 0.5", "statusPollSeconds: 60\nstatusResyncSeconds: 60")


@pytest.fixture(scope="module")
def slow_lists(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Env]:
    root = tmp_path_factory.mktemp("status-watch")
    name = "aws-dfw"
    sim = SimProcess(name, root / "sims", SIMS[name]).start()
    data = root / "server"
    data.mkdir()
    (data / "members.yaml").write_text(LISTS_A_MINUTE_APART)
    server = ServerProcess(data)
    try:
        server.start()
        sim.wait_ready(60)
        done = server.run_cli("cluster", "join", name, "--kubeconfig", str(sim.kubeconfig),
                              "--server", server.url, "--token", server.token("admin"))
        assert done.returncode == 0, done.stderr
        member = Member(name, sim, k8s_config.new_client_from_config(str(sim.kubeconfig), persist_config=False))
        with server.client(timeout=10) as http:
            env = Env(server, http, {name: member})
            wait_for(lambda: env.ready(name) == "True", 20, "the member Ready")
            yield env
    finally:
        server.stop(check=False)
        with contextlib.suppress(Exception):
            sim.stop()


def test_status_and_a_deletion_behind_our_back_arrive_through_the_watch(slow_lists: Env, tmp_path: Path) -> None:
    env = slow_lists
    assert "statusPollSeconds: 60" in LISTS_A_MINUTE_APART
    env.create(deploy_path(), deployment("watched", 2))
    env.placed_binding("watched", "watched", {"aws-dfw": 2})

    def running() -> dict[str, object] | None:
        b = env.binding("watched")
        entries = (b or {}).get("status", {}).get("clusters") or []
        return b if b and b["status"].get("phase") == "Running" and \
            [e.get("readyReplicas") for e in entries] == [2] else None

    # the first list ran when the member got its first Work; the copy's readiness came after it
    wait_for(running, 15, "the member's ready replicas on the Binding, long before the next list",
             what_else=lambda: (env.binding("watched") or {}).get("status"))
    k8s.AppsV1Api(env.members["aws-dfw"].api).delete_namespaced_deployment("watched", "default")
    wait_for(lambda: env.members["aws-dfw"].deployment("watched") is not None, 15,
             "the copy deleted behind DRO-DS's back applied again, long before the next list")
    wait_for(running, 15, "Running again")


def test_a_copy_written_over_with_another_manifest_is_applied_again(slow_lists: Env) -> None:
    """A member copy that carries another manifest than its Work's — a deposed leader's apply that was
    already on its way, or a hand — is applied again, not recorded as held."""
    env = slow_lists
    env.create(deploy_path(), deployment("overwritten", 1))
    env.placed_binding("overwritten", "overwritten", {"aws-dfw": 1})
    apps = k8s.AppsV1Api(env.members["aws-dfw"].api)

    def copy() -> k8s.V1Deployment:
        return apps.read_namespaced_deployment("overwritten", "default")

    wait_for(lambda: env.members["aws-dfw"].deployment("overwritten") is not None, 15, "the copy applied")
    right = copy().metadata.annotations[ANN_HASH]
    apps.patch_namespaced_deployment("overwritten", "default", {  # as an older manifest would land
        "metadata": {"annotations": {ANN_HASH: "0123456789abcdef"}},
        "spec": {"template": {"spec": {"containers": [{"name": "app", "image": "stale:1"}]}}}})
    wait_for(lambda: copy().metadata.annotations.get(ANN_HASH) == right, 15,
             "the copy applied again with its Work's manifest, long before the next list",
             what_else=lambda: [w["status"] for w in env.http.get(WORKS).json()["items"]
                                if "overwritten" in w["metadata"]["name"]])
    assert all(c.image != "stale:1" for c in copy().spec.template.spec.containers)


def test_a_copy_changed_in_the_member_is_put_back(slow_lists: Env) -> None:
    """``kubectl scale`` or ``set image`` in the member, on a copy that still carries its Work's manifest
    (its hash annotation untouched): the generation rose past the one applied, so the Work is applied
    again, as Karmada's work-status controller puts a changed copy back — long before the next list."""
    env = slow_lists
    env.create(deploy_path(), deployment("drifted", 2, image="nginx:1.25"))
    env.placed_binding("drifted", "drifted", {"aws-dfw": 2})
    apps = k8s.AppsV1Api(env.members["aws-dfw"].api)
    wait_for(lambda: env.members["aws-dfw"].deployment("drifted") is not None, 15, "the copy applied")

    def works() -> list[object]:
        return [w["status"] for w in env.http.get(WORKS).json()["items"] if "drifted" in w["metadata"]["name"]]

    wait_for(lambda: all(s.get("applied") and s.get("manifests") for s in works()), 15, "its Work applied",
             what_else=works)
    before = apps.read_namespaced_deployment("drifted", "default").metadata.generation
    apps.patch_namespaced_deployment_scale("drifted", "default", {"spec": {"replicas": 7}})
    apps.patch_namespaced_deployment("drifted", "default", {"spec": {"template": {"spec": {"containers": [
        {"name": "app", "image": "evil:1"}]}}}})
    assert apps.read_namespaced_deployment("drifted", "default").metadata.generation > before

    def put_back() -> bool:
        d = apps.read_namespaced_deployment("drifted", "default")
        return d.spec.replicas == 2 and [c.image for c in d.spec.template.spec.containers] == ["nginx:1.25"]

    wait_for(put_back, 15, "the member's copy put back as its Work says, long before the next list",
             what_else=lambda: (apps.read_namespaced_deployment("drifted", "default").spec, works()))
    gen = apps.read_namespaced_deployment("drifted", "default").metadata.generation
    wait_for(lambda: all(s.get("applied") for s in works()), 15, "its Work applied again", what_else=works)
    assert apps.read_namespaced_deployment("drifted", "default").metadata.generation == gen  # no fight: settled
