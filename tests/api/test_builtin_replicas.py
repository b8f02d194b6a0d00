"""A built-in workload's ``spec.replicas`` is a whole number of at least 0, whichever write sends it
(create, replace, merge patch, JSON patch), as the Kubernetes API server checks it; a refused write
changes nothing. A word or a negative count used to be stored and the workload divided as one replica."""

from __future__ import annotations

from typing import Any

import pytest

from tests.api.conftest import Api

DEPLOYS = "/apis/apps/v1/namespaces/default/deployments"


def deployment(name: str, replicas: Any) -> dict[str, Any]:
    return {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": name},
            "spec": {"replicas": replicas, "selector": {"matchLabels": {"app": name}},
                     "template": {"metadata": {"labels": {"app": name}},
                                  "spec": {"containers": [{"name": "c", "image": "nginx"}]}}}}


@pytest.mark.parametrize("replicas", ["three", -3, 2.5, True])
async def test_a_bad_replica_count_is_refused_on_every_write(api: Api, replicas: Any) -> None:
    r = await api.call("POST", DEPLOYS, json=deployment("bad", replicas))
    assert r.status_code == 422, r.text
    assert r.json()["details"]["causes"][0]["field"] == "spec.replicas"
    assert (await api.call("POST", DEPLOYS, json=deployment("web", 6))).status_code == 201
    for body, content_type in (({"spec": {"replicas": replicas}}, "application/merge-patch+json"),
                               ([{"op": "replace", "path": "/spec/replicas", "value": replicas}],
                                "application/json-patch+json")):
        r = await api.call("PATCH", f"{DEPLOYS}/web", json=body, headers={"content-type": content_type})
        assert r.status_code == 422, (body, r.text)
    live = (await api.call("GET", f"{DEPLOYS}/web")).json()
    r = await api.call("PUT", f"{DEPLOYS}/web", json={**live, "spec": {**live["spec"], "replicas": replicas}})
    assert r.status_code == 422, r.text
    assert (await api.call("GET", f"{DEPLOYS}/web")).json()["spec"]["replicas"] == 6
    r = await api.call("PATCH", f"{DEPLOYS}/web", json={"spec": {"replicas": 0}},
                       headers={"content-type": "application/merge-patch+json"})
    assert r.status_code == 200 and r.json()["spec"]["replicas"] == 0, r.text
