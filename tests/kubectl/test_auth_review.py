"""``kubectl auth whoami`` and ``kubectl auth can-i [--list]`` with the real kubectl: each token told who it
is and what it may do, and every answer the same as the request itself gets (one set of rules answers
both), for an admin, a namespaced operator, a viewer and a cluster agent."""

from __future__ import annotations

import httpx

from tests.kubectl.conftest import Kubectl
from tests.server_process import ServerProcess

REVIEWS = "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews"


def _token(server: ServerProcess, *args: str) -> str:
    done = server.run_cli("token", "create", "--data-dir", str(server.data_dir), *args)
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


def _can_i(kubectl: Kubectl, token: str | None, *args: str) -> tuple[bool, str]:
    done = kubectl.run("auth", "can-i", *args, *([f"--token={token}"] if token else []), check=False)
    answer = done.stdout.strip()
    assert answer.startswith(("yes", "no")), (args, done.stdout, done.stderr)
    return done.returncode == 0, answer


def _deployment(name: str, ns: str) -> dict[str, object]:
    return {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": name, "namespace": ns},
            "spec": {"replicas": 1, "selector": {"matchLabels": {"app": name}},
                     "template": {"metadata": {"labels": {"app": name}},
                                  "spec": {"containers": [{"name": "c", "image": "nginx"}]}}}}


def test_whoami_names_the_token_its_role_and_its_limits(kubectl: Kubectl) -> None:
    admin = kubectl.run("auth", "whoami", "-o", "json")
    assert '"drods:admin"' in admin.stdout and '"system:authenticated"' in admin.stdout
    team = _token(kubectl.server, "--role", "operator", "--namespace", "team-a", "--subject", "team-lead")
    table = kubectl.run("auth", "whoami", f"--token={team}").stdout
    assert "team-lead" in table and "drods:operator" in table and "[team-a]" in table, table


def test_can_i_answers_as_the_requests_are_answered(kubectl: Kubectl) -> None:
    server = kubectl.server
    team = _token(server, "--role", "operator", "--namespace", "team-a")
    viewer = _token(server, "--role", "viewer")
    agent = server.token("cluster-agent", cluster="m1")

    assert _can_i(kubectl, None, "create", "deployments")[0]
    assert _can_i(kubectl, None, "get", "/api/v1/audit")[0]
    impersonate = _can_i(kubectl, None, "impersonate", "users")
    assert not impersonate[0] and "no role grants 'impersonate'" in impersonate[1]
    assert not _can_i(kubectl, None, "get", "pods", "--subresource=exec")[0]

    allowed, said = _can_i(kubectl, team, "create", "deployments", "-n", "team-b")
    assert not allowed and "only in namespaces team-a" in said
    assert not _can_i(kubectl, team, "get", "clusters")[0]
    everything = _can_i(kubectl, team, "*", "*", "-n", "team-a")  # not every kind: its quota it may not write
    assert not everything[0] and "federatedresourcequotas" in everything[1], everything
    assert _can_i(kubectl, None, "get", "componentstatuses")[0]  # `kubectl get cs` works: the answer is yes
    assert _can_i(kubectl, viewer, "get", "componentstatuses")[0]
    assert not _can_i(kubectl, None, "delete", "componentstatuses")[0]  # computed: nobody writes them
    forged = _can_i(kubectl, team, "create", "events", "-n", "team-a")  # what the components say is theirs
    assert not forged[0] and "events are written by cluster-wide tokens only" in forged[1], forged
    quota = _can_i(kubectl, team, "create", "federatedresourcequotas", "-n", "team-a")
    assert not quota[0] and "cluster-wide tokens only" in quota[1]
    assert not _can_i(kubectl, viewer, "delete", "deployments", "-n", "team-a")[0]
    assert _can_i(kubectl, viewer, "list", "deployments", "-A")[0]
    assert not _can_i(kubectl, viewer, "get", "/api/v1/audit")[0]
    assert not _can_i(kubectl, agent, "list", "deployments", "-A")[0]
    assert _can_i(kubectl, agent, "get", "/api/v1/agent/works")[0]
    # a flat read narrowed to a namespace by its query: judged by that namespace, as the request is
    assert _can_i(kubectl, team, "get", "/api/v1/decisions?namespace=team-a")[0]
    assert not _can_i(kubectl, team, "get", "/api/v1/decisions?namespace=team-b")[0]
    assert not _can_i(kubectl, team, "get", "/api/v1/decisions")[0]
    collection = _can_i(kubectl, None, "deletecollection", "configmaps", "-n", "team-a")  # a DELETE of a list: 405
    assert not collection[0] and "deletecollection is not served" in collection[1], collection

    # each answer against the request it is about
    cases = [(team, "team-a", True), (team, "team-b", False), (viewer, "team-a", False), (agent, "team-a", False)]
    for token, ns, expected in cases:
        said_yes = _can_i(kubectl, token, "create", "deployments", "-n", ns)[0]
        with httpx.Client(base_url=server.url, verify=server.verify, timeout=30,
                          headers={"Authorization": f"Bearer {token}"}) as http:
            r = http.post(f"/apis/apps/v1/namespaces/{ns}/deployments", json=_deployment("can-i", ns),
                          params={"dryRun": "All"})
        assert said_yes is expected and (r.status_code == 201) is expected, (ns, said_yes, r.status_code, r.text)


def test_can_i_list_shows_a_namespaced_tokens_rules(kubectl: Kubectl) -> None:
    team = _token(kubectl.server, "--role", "operator", "--namespace", "team-a")
    own = kubectl.run("auth", "can-i", "--list", "-n", "team-a", f"--token={team}").stdout
    rows = {line.split()[0]: line for line in own.splitlines()[1:] if line and not line.startswith(" ")}
    assert "create" in rows["deployments.apps"] and "delete" in rows["deployments.apps"], own
    assert "*.*" in rows and "create" not in rows["*.*"]  # reads everywhere in team-a, writes by kind
    assert not any(r.startswith("federatedresourcequotas") for r in rows), own
    other = kubectl.run("auth", "can-i", "--list", "-n", "team-b", f"--token={team}").stdout
    assert "deployments" not in other and "*.*" not in other, other
    admin = kubectl.run("auth", "can-i", "--list").stdout
    assert any(line.startswith("*.*") for line in admin.splitlines()), admin


def test_a_review_without_its_question_is_refused(kubectl: Kubectl) -> None:
    server = kubectl.server
    with httpx.Client(base_url=server.url, verify=server.verify, timeout=30,
                      headers={"Authorization": f"Bearer {server.token('viewer')}"}) as http:
        neither = http.post(REVIEWS, json={"spec": {}})
        no_verb = http.post(REVIEWS, json={"spec": {"resourceAttributes": {"resource": "pods"}}})
        found = http.get("/apis/authorization.k8s.io/v1").json()
    assert neither.status_code == 422 and neither.json()["reason"] == "Invalid", neither.text
    assert "exactly one of spec.resourceAttributes" in neither.json()["message"]
    assert no_verb.status_code == 422 and "spec.resourceAttributes.verb" in no_verb.json()["message"], no_verb.text
    assert {r["name"] for r in found["resources"]} == {"selfsubjectaccessreviews", "selfsubjectrulesreviews"}


def test_impersonation_is_refused_not_ignored(kubectl: Kubectl) -> None:
    """``--as=bob`` was ignored: an admin asking what bob may do got the admin's own answer."""
    done = kubectl.run("auth", "can-i", "delete", "deployments", "-n", "team-b", "--as=bob", check=False)
    assert done.returncode != 0 and "impersonation" in done.stderr and "not served" in done.stderr, \
        (done.stdout, done.stderr)
    done = kubectl.run("get", "deployments", "--as=bob", check=False)
    assert done.returncode != 0 and "impersonation" in done.stderr, done.stderr
