"""Karmada's autoscaling.karmada.io kinds stored with DRO-DS's own (one storage, read back in the
version asked for), a custom kind read in each served version, and the ``/scale`` subresource:
reads, writes, a stale resourceVersion, bad input and ``dryRun`` change nothing they should not."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from tests.api.conftest import Api

YAML = Path(__file__).resolve().parents[1] / "karmada" / "yaml"
KARMADA_FHPA = "/apis/autoscaling.karmada.io/v1alpha1/namespaces/shop/federatedhpas"
OWN_FHPA = "/apis/multicluster.io/v1alpha1/namespaces/shop/federatedhpas"
DEPLOY = "/apis/apps/v1/namespaces/shop/deployments"

FHPA = """
apiVersion: autoscaling.karmada.io/v1alpha1
kind: FederatedHPA
metadata: {name: web, namespace: shop}
spec:
  scaleTargetRef: {apiVersion: apps/v1, kind: Deployment, name: web}
  minReplicas: 2
  maxReplicas: 10
  metrics:
    - type: Resource
      resource: {name: cpu, target: {type: Utilization, averageUtilization: 60}}
    - type: Resource
      resource: {name: memory, target: {type: AverageValue, averageValue: 512Mi}}
    - type: Pods
      pods:
        metric: {name: http_requests_per_second}
        target: {type: AverageValue, averageValue: 100m}
    - type: External
      external:
        metric: {name: queue_messages_ready, selector: {matchLabels: {queue: worker_tasks}}}
        target: {type: AverageValue, averageValue: "30"}
  behavior:
    scaleDown:
      stabilizationWindowSeconds: 30
      policies: [{type: Percent, value: 50, periodSeconds: 15}]
"""


def body(text: str) -> dict[str, Any]:
    doc: dict[str, Any] = yaml.safe_load(text)
    return doc


async def test_karmada_federated_hpa_is_dro_ds_federated_hpa(api: Api) -> None:
    written = body(FHPA)
    r = await api.call("POST", KARMADA_FHPA, json=written)
    assert r.status_code == 201, r.text
    back = (await api.call("GET", f"{KARMADA_FHPA}/web")).json()
    assert back["apiVersion"] == written["apiVersion"] and back["spec"] == written["spec"]
    own = (await api.call("GET", f"{OWN_FHPA}/web")).json()  # the same object, in DRO-DS's group
    assert own["apiVersion"] == "multicluster.io/v1alpha1" and own["spec"] == written["spec"]
    assert own["metadata"]["uid"] == back["metadata"]["uid"]
    # one autoscaler per workload holds across the two groups
    dup = {**written, "apiVersion": "multicluster.io/v1alpha1", "metadata": {"name": "web2", "namespace": "shop"}}
    r = await api.call("POST", OWN_FHPA, json=dup)
    assert r.status_code == 409 and "already scaled" in r.text
    listed = (await api.call("GET", KARMADA_FHPA)).json()
    assert [i["apiVersion"] for i in listed["items"]] == ["autoscaling.karmada.io/v1alpha1"]


async def test_custom_kind_reads_in_each_served_version(api: Api) -> None:
    definition, resource = (body(d) for d in (YAML / "crd.yaml").read_text().split("\n---\n"))
    r = await api.call("POST", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions", json=definition)
    assert r.status_code == 201, r.text
    r = await api.call("POST", "/apis/apps.example.com/v1/namespaces/conformance/webapps", json=resource)
    assert r.status_code == 201, r.text
    for version in ("v1", "v1beta1"):
        got = (await api.call("GET", f"/apis/apps.example.com/{version}/namespaces/conformance/webapps/shop")).json()
        assert got["apiVersion"] == f"apps.example.com/{version}" and got["spec"] == resource["spec"]
    # the scale subresource is declared on v1 only
    assert (await api.call("GET", "/apis/apps.example.com/v1beta1/namespaces/conformance/webapps/shop/scale")
            ).status_code == 404
    scale = (await api.call("GET", "/apis/apps.example.com/v1/namespaces/conformance/webapps/shop/scale")).json()
    assert scale["spec"] == {"replicas": 2} and scale["status"] == {"replicas": 0, "selector": "app=shop"}


async def test_scale_subresource_writes_only_the_replicas(api: Api) -> None:
    deploy = {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web", "namespace": "shop"},
              "spec": {"replicas": 2, "selector": {"matchLabels": {"app": "web"}},
                       "template": {"metadata": {"labels": {"app": "web"}},
                                    "spec": {"containers": [{"name": "c", "image": "nginx"}]}}}}
    assert (await api.call("POST", DEPLOY, json=deploy)).status_code == 201
    merge = {"headers": {"Content-Type": "application/merge-patch+json"}}
    r = await api.call("PATCH", f"{DEPLOY}/web/scale", json={"spec": {"replicas": 5}}, **merge)
    assert r.status_code == 200, r.text
    assert r.json()["spec"] == {"replicas": 5} and r.json()["status"]["selector"] == "app=web"
    got = (await api.call("GET", f"{DEPLOY}/web")).json()
    assert got["spec"]["replicas"] == 5 and got["spec"]["template"] == deploy["spec"]["template"]
    # PUT of a Scale, with a stale resourceVersion → 409; dry run → nothing stored; bad → 422
    scale = (await api.call("GET", f"{DEPLOY}/web/scale")).json()
    stale = {**scale, "metadata": {**scale["metadata"], "resourceVersion": "1"}, "spec": {"replicas": 7}}
    assert (await api.call("PUT", f"{DEPLOY}/web/scale", json=stale)).status_code == 409
    r = await api.call("PUT", f"{DEPLOY}/web/scale?dryRun=All", json={**scale, "spec": {"replicas": 7}})
    assert r.status_code == 200 and r.json()["spec"] == {"replicas": 7}
    r = await api.call("PATCH", f"{DEPLOY}/web/scale", json={"spec": {"replicas": -1}}, **merge)
    assert r.status_code == 422 and r.json()["code"] == "VALIDATION_FAILED" or r.json().get("reason") == "Invalid"
    r = await api.call("PATCH", f"{DEPLOY}/web/scale", json=[{"op": "replace", "path": "/spec/replicas",
                                                              "value": 3}],
                       headers={"Content-Type": "application/json-patch+json"})
    assert r.status_code == 200 and r.json()["spec"] == {"replicas": 3}
    assert (await api.call("GET", f"{DEPLOY}/web")).json()["spec"]["replicas"] == 3
    # a kind without replicas has no /scale
    assert (await api.call("GET", "/api/v1/namespaces/shop/configmaps/x/scale")).status_code == 404
