"""F3 stateful topology end to end: ``examples/placement/policy-stateful-topology.yaml`` applied as
written to a real ``drods serve`` with three ``drods sim`` members puts the StatefulSet's primary
(2 replicas) on the cluster holding its dataset's Primary copy and one replica on each of the two
others; the members get those counts and a role label, the Binding status and history say which
cluster holds the primary; a bad topology is refused with 422 and nothing stored; when the primary's member goes
down, a replica cluster is promoted."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from drods.model.kinds import by_kind
from tests.members_e2e.conftest import Env, wait_for

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "placement" / "policy-stateful-topology.yaml"
BINDING = "statefulset-default-orders-db"
STS = "/apis/apps/v1/namespaces/default/statefulsets/orders-db"
POLICIES = "/apis/multicluster.io/v1alpha1/propagationpolicies"


def path_of(doc: dict[str, Any]) -> str:
    kind = by_kind(doc["apiVersion"], doc["kind"])
    assert kind is not None
    group = "api" if kind.group == "" else f"apis/{kind.group}"
    ns = f"namespaces/{doc['metadata'].get('namespace') or 'default'}/" if kind.namespaced else ""
    return f"/{group}/{kind.api_version.split('/')[-1]}/{ns}{kind.plural}"


def roles(env: Env) -> dict[str, tuple[int, str | None]]:
    b = env.binding(BINDING) or {}
    return {t["cluster"]: (t["replicas"], t.get("role")) for t in (b.get("status") or {}).get("placement") or []}


def copies(env: Env, skip: str = "") -> dict[str, tuple[int, str | None]]:
    """Each member's copy: its replicas and its ``multicluster.io/stateful-role`` label."""
    out = {}
    for name, m in env.members.items():
        sts = m.get(STS) if name != skip else None
        if sts is not None:
            role = (sts["metadata"].get("labels") or {}).get("multicluster.io/stateful-role")
            out[name] = (int(sts["spec"]["replicas"]), role)
    return out


def test_primary_beside_its_data_replicas_elsewhere_and_promotion(fresh: Env) -> None:
    env = fresh
    # bad input first: 422 {code, message, details} naming the field, and no policy stored
    bad = env.http.post(POLICIES, json={
        "apiVersion": "multicluster.io/v1alpha1", "kind": "PropagationPolicy", "metadata": {"name": "bad-topology"},
        "spec": {"resourceSelectors": [{"kind": "StatefulSet"}],
                 "placement": {"statefulTopology": {"replicas": {"clusters": 0}}}}})
    assert bad.status_code == 422, bad.text
    body = bad.json()
    assert {"code", "message", "details"} <= set(body) and "statefulTopology" in bad.text
    assert env.http.get(f"{POLICIES}/bad-topology").status_code == 404

    docs = [d for d in yaml.safe_load_all(EXAMPLE.read_text()) if d]
    for doc in docs:
        env.create(path_of(doc), doc)
    want = {"azure-lhr": (2, "Primary"), "aws-dfw": (1, "Replica"), "gcp-sin": (1, "Replica")}
    wait_for(lambda: roles(env) == want, 20, "the topology's placement", what_else=lambda: env.binding(BINDING))
    wait_for(lambda: copies(env) == {"azure-lhr": (2, "primary"), "aws-dfw": (1, "replica"),
                                     "gcp-sin": (1, "replica")}, 20, "the members' StatefulSets",
             what_else=lambda: copies(env))
    hist = env.http.get("/api/v1/history/schedules", params={"binding": BINDING}).json()["items"]
    topo = hist[0]["topology"]
    assert topo["primary"] == "azure-lhr" and sorted(topo["replicas"]) == ["aws-dfw", "gcp-sin"]
    assert topo["primaryChosenBy"] == "affinity" and hist[0]["division"] == "StatefulTopology"
    assert {"cluster": "azure-lhr", "replicas": 2, "role": "Primary"} in hist[0]["result"]["placement"]

    # the primary's member fails: after its toleration the failover re-places the binding and a
    # replica cluster takes the primary (two healthy clusters left: one replica cluster short)
    env.members["azure-lhr"].fault("down")

    def promoted() -> dict[str, tuple[int, str | None]] | None:
        got = roles(env)
        return got if "azure-lhr" not in got and (2, "Primary") in got.values() else None

    got = wait_for(promoted, 30, "a replica cluster promoted", what_else=lambda: env.binding(BINDING))
    assert sorted(r for _, r in got.values()) == ["Primary", "Replica"]
    b = env.binding(BINDING) or {}
    assert "1/2 replica clusters found" in b["status"]["message"]
    new_primary = next(c for c, (_, r) in got.items() if r == "Primary")
    # the promoted member's copy now has the primary's replicas and says so
    wait_for(lambda: copies(env, skip="azure-lhr").get(new_primary) == (2, "primary"), 20,
             "the promoted member's copy", what_else=lambda: copies(env, skip="azure-lhr"))
    hist = env.http.get("/api/v1/history/schedules", params={"binding": BINDING}).json()["items"]
    assert hist[0]["topology"]["promotedFrom"] == "azure-lhr"
    assert hist[0]["topology"]["primaryChosenBy"] == "promoted"
    env.members["azure-lhr"].fault("up")
    for doc in reversed(docs):
        env.delete(f"{path_of(doc)}/{doc['metadata']['name']}")
    wait_for(lambda: env.binding(BINDING) is None, 20, "the binding gone with the policy")
