"""Karmada's MultiClusterService against real (simulated) members, applied unchanged with kubectl: a
Deployment and its Service run on aws-dfw only; the MultiClusterService names aws-dfw the provider and
gcp-sin the consumer. gcp-sin — read with the official Kubernetes client, as its users would — receives
the Service and an EndpointSlice of it (``kubernetes.io/service-name``) listing aws-dfw's pod addresses;
azure-lhr, neither, receives nothing. Deleting the MultiClusterService takes both away again."""

from __future__ import annotations

from typing import Any

from kubernetes import client as k8s
from kubernetes.client.exceptions import ApiException

from tests.kubectl.conftest import Kubectl
from tests.members_e2e.conftest import Env, wait_for

MCS = "/apis/networking.karmada.io/v1alpha1/namespaces/mcs/multiclusterservices/shop"
SHOP = """
apiVersion: v1
kind: Namespace
metadata: {name: mcs}
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: shop, namespace: mcs}
spec:
  replicas: 2
  selector: {matchLabels: {app: shop}}
  template:
    metadata: {labels: {app: shop}}
    spec:
      containers:
      - {name: shop, image: nginx:1.25, ports: [{containerPort: 8080, name: http}],
         resources: {requests: {cpu: 100m}}}
---
apiVersion: v1
kind: Service
metadata: {name: shop, namespace: mcs}
spec:
  selector: {app: shop}
  ports: [{name: http, port: 80, targetPort: http}, {name: admin, port: 9090}]
---
apiVersion: policy.karmada.io/v1alpha1
kind: PropagationPolicy
metadata: {name: shop, namespace: mcs}
spec:
  resourceSelectors: [{apiVersion: apps/v1, kind: Deployment, name: shop}]
  placement:
    clusterAffinity: {clusterNames: [aws-dfw]}
    replicaScheduling: {replicaSchedulingType: Duplicated}
"""
EXPOSE = """
apiVersion: networking.karmada.io/v1alpha1
kind: MultiClusterService
metadata: {name: shop, namespace: mcs}
spec:
  types: [CrossCluster]
  ports: [{name: http, port: 80}]
  providerClusters: [{name: aws-dfw}]
  consumerClusters: [{name: gcp-sin}]
"""


def slices(env: Env, cluster: str) -> list[Any]:
    got = k8s.DiscoveryV1Api(env.members[cluster].api).list_namespaced_endpoint_slice(
        "mcs", label_selector="kubernetes.io/service-name=shop", _request_timeout=3)
    return list(got.items)


def addresses(items: list[Any]) -> set[str]:
    return {a for sl in items for ep in sl.endpoints or [] if ep.conditions.ready for a in ep.addresses}


def service(env: Env, cluster: str) -> Any:
    try:
        return k8s.CoreV1Api(env.members[cluster].api).read_namespaced_service("shop", "mcs", _request_timeout=3)
    except ApiException as e:
        if e.status == 404:
            return None
        raise


def test_a_consumer_receives_the_service_and_the_providers_endpoints(env: Env, kubectl: Kubectl) -> None:
    kubectl.run("apply", "-f", "-", input=SHOP)
    # scheduled, propagated, two pods started and ready in the member: 60 s ran out once on a loaded CI run
    provider = wait_for(lambda: (lambda a: a if len(a) == 2 else None)(addresses(slices(env, "aws-dfw"))), 120,
                        "aws-dfw's own EndpointSlice of shop with 2 ready pods",
                        what_else=lambda: slices(env, "aws-dfw"))
    kubectl.run("apply", "-f", "-", input=EXPOSE)
    written = env.http.get(MCS).json()
    assert written["spec"] == {"types": ["CrossCluster"], "ports": [{"name": "http", "port": 80}],
                               "providerClusters": [{"name": "aws-dfw"}], "consumerClusters": [{"name": "gcp-sin"}]}

    imported = wait_for(lambda: [sl for sl in slices(env, "gcp-sin") if addresses([sl]) == provider] or None, 60,
                        "gcp-sin's EndpointSlice of shop with aws-dfw's pod addresses")[0]
    assert imported.metadata.labels["endpointslice.karmada.io/provision-cluster"] == "aws-dfw"
    assert imported.metadata.labels["endpointslice.kubernetes.io/managed-by"] == "multicluster-service.multicluster.io"
    assert [(p.name, p.port) for p in imported.ports] == [("http", 8080)]  # only the exposed port
    svc = service(env, "gcp-sin")
    assert svc is not None and {p.port for p in svc.spec.ports} == {80, 9090}
    assert service(env, "azure-lhr") is None and not slices(env, "azure-lhr")
    assert addresses(slices(env, "aws-dfw")) == provider  # the provider's endpoints are not imported back

    def conditions() -> dict[str, str] | None:
        got = {c["type"]: c["status"] for c in (env.http.get(MCS).json().get("status") or {}).get("conditions", [])}
        return got if got == {"ServiceApplied": "True", "EndpointSliceDispatched": "True"} else None

    wait_for(conditions, 20, "the MultiClusterService's conditions")
    listed = kubectl.run("get", "multiclusterservices.networking.karmada.io", "-n", "mcs", "-o", "name").stdout
    assert listed.strip() == "multiclusterservice.networking.karmada.io/shop"

    kubectl.run("delete", "-f", "-", input=EXPOSE)
    wait_for(lambda: not slices(env, "gcp-sin") and service(env, "gcp-sin") is None, 60,
             "the Service and the imported EndpointSlice gone from gcp-sin")
    kubectl.run("delete", "-f", "-", "--wait=false", "--ignore-not-found", input=SHOP)


FRONT = """
apiVersion: v1
kind: Namespace
metadata: {name: mci}
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: front, namespace: mci}
spec:
  replicas: 1
  selector: {matchLabels: {app: front}}
  template:
    metadata: {labels: {app: front}}
    spec:
      containers: [{name: front, image: nginx:1.25, resources: {requests: {cpu: 100m}}}]
---
apiVersion: v1
kind: Service
metadata: {name: front, namespace: mci}
spec:
  selector: {app: front}
  ports: [{port: 80}]
---
apiVersion: policy.karmada.io/v1alpha1
kind: PropagationPolicy
metadata: {name: front, namespace: mci}
spec:
  resourceSelectors: [{apiVersion: apps/v1, kind: Deployment, name: front}]
  placement:
    clusterAffinity: {clusterNames: [azure-lhr]}
    replicaScheduling: {replicaSchedulingType: Duplicated}
---
apiVersion: networking.karmada.io/v1alpha1
kind: MultiClusterIngress
metadata: {name: shop-web, namespace: mci}
spec:
  ingressClassName: nginx
  rules:
  - host: shop.example.com
    http:
      paths:
      - {path: /, pathType: Prefix, backend: {service: {name: front, port: {number: 80}}}}
"""


def ingress(env: Env, cluster: str) -> Any:
    try:
        return k8s.NetworkingV1Api(env.members[cluster].api).read_namespaced_ingress("shop-web", "mci",
                                                                                     _request_timeout=3)
    except ApiException as e:
        if e.status == 404:
            return None
        raise


REMEDY = """
apiVersion: remedy.karmada.io/v1alpha1
kind: Remedy
metadata: {name: lhr-upgrade}
spec:
  clusterAffinity: {clusterNames: [azure-lhr]}
  decisionMatches:
  - clusterConditionMatch: {conditionType: Ready, operator: Equal, conditionStatus: "True"}
  actions: [TrafficControl]
"""


def test_a_multicluster_ingress_goes_where_its_backends_run_and_reports_their_load_balancer(
        env: Env, kubectl: Kubectl) -> None:
    kubectl.run("apply", "-f", "-", input=FRONT)
    mci = "/apis/networking.karmada.io/v1alpha1/namespaces/mci/multiclusteringresses/shop-web"
    assert env.http.get(mci).json()["spec"]["rules"][0]["host"] == "shop.example.com"
    copy = wait_for(lambda: ingress(env, "azure-lhr"), 60, "the Ingress on azure-lhr, where front runs")
    assert copy.spec.rules[0].http.paths[0].backend.service.name == "front"
    assert ingress(env, "gcp-sin") is None and ingress(env, "aws-dfw") is None

    # azure-lhr's ingress controller publishes its address: the MultiClusterIngress reports it.
    k8s.NetworkingV1Api(env.members["azure-lhr"].api).patch_namespaced_ingress_status(
        "shop-web", "mci", {"status": {"loadBalancer": {"ingress": [{"ip": "203.0.113.7"}]}}}, _request_timeout=3)
    wait_for(lambda: (env.http.get(mci).json().get("status") or {}).get("loadBalancer") ==
             {"ingress": [{"ip": "203.0.113.7"}]}, 30, "the MultiClusterIngress's status.loadBalancer")

    # A Remedy (Karmada's remedy.karmada.io) whose condition azure-lhr meets takes its traffic away:
    # the cluster's status.remedyActions says TrafficControl and the Ingress leaves it; deleted, it is back.
    kubectl.run("apply", "-f", "-", input=REMEDY)
    wait_for(lambda: (env.cluster("azure-lhr").get("status") or {}).get("remedyActions") == ["TrafficControl"],
             30, "azure-lhr's remedy actions")
    assert not (env.cluster("gcp-sin").get("status") or {}).get("remedyActions")  # not named by the Remedy
    wait_for(lambda: ingress(env, "azure-lhr") is None, 60, "the Ingress withdrawn from azure-lhr",
             what_else=lambda: ((env.cluster("azure-lhr").get("status") or {}).get("remedyActions"),
                                env.http.get("/apis/multicluster.io/v1alpha1/bindings/mci-mci-shop-web").json()))
    kubectl.run("delete", "remedies.remedy.karmada.io", "lhr-upgrade")
    wait_for(lambda: not (env.cluster("azure-lhr").get("status") or {}).get("remedyActions"), 30,
             "the remedy actions cleared")
    wait_for(lambda: ingress(env, "azure-lhr"), 60, "the Ingress back on azure-lhr")

    kubectl.run("delete", "-f", "-", "--wait=false", "--ignore-not-found", input=FRONT)
    wait_for(lambda: ingress(env, "azure-lhr") is None, 60, "the Ingress gone from azure-lhr")


API = """
apiVersion: v1
kind: Namespace
metadata: {name: mlb}
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: api, namespace: mlb}
spec:
  replicas: 1
  selector: {matchLabels: {app: api}}
  template:
    metadata: {labels: {app: api}}
    spec:
      containers: [{name: api, image: nginx:1.25, resources: {requests: {cpu: 100m}}}]
---
apiVersion: v1
kind: Service
metadata: {name: api, namespace: mlb}
spec:
  selector: {app: api}
  ports: [{port: 443}]
---
apiVersion: policy.karmada.io/v1alpha1
kind: PropagationPolicy
metadata: {name: api, namespace: mlb}
spec:
  resourceSelectors: [{apiVersion: apps/v1, kind: Deployment, name: api}]
  placement:
    clusterAffinity: {clusterNames: [aws-dfw, gcp-sin]}
    replicaScheduling: {replicaSchedulingType: Duplicated}
---
apiVersion: networking.karmada.io/v1alpha1
kind: MultiClusterService
metadata: {name: api, namespace: mlb}
spec:
  types: [LoadBalancer]
  providerClusters: [{name: aws-dfw}, {name: gcp-sin}]
"""
SIN_REMEDY = """
apiVersion: remedy.karmada.io/v1alpha1
kind: Remedy
metadata: {name: sin-upgrade}
spec:
  clusterAffinity: {clusterNames: [gcp-sin]}
  decisionMatches:
  - clusterConditionMatch: {conditionType: Ready, operator: Equal, conditionStatus: "True"}
  actions: [TrafficControl]
"""


def test_a_load_balancer_service_lists_the_healthy_providers_addresses(env: Env, kubectl: Kubectl) -> None:
    mcs = "/apis/networking.karmada.io/v1alpha1/namespaces/mlb/multiclusterservices/api"

    def api_service(cluster: str) -> Any:
        try:
            return k8s.CoreV1Api(env.members[cluster].api).read_namespaced_service("api", "mlb", _request_timeout=3)
        except ApiException as e:
            if e.status == 404:
                return None
            raise

    def status() -> dict[str, Any]:
        return dict(env.http.get(mcs).json().get("status") or {})

    kubectl.run("apply", "-f", "-", input=API)
    # the providers get the Service as type LoadBalancer (the template keeps its own type); nobody else
    for cluster in ("aws-dfw", "gcp-sin"):
        svc = wait_for(lambda c=cluster: (s := api_service(c)) is not None and s.spec.type == "LoadBalancer" and s,
                       60, f"the LoadBalancer Service on {cluster}")
        assert [p.port for p in svc.spec.ports] == [443]
    assert api_service("azure-lhr") is None
    assert env.http.get("/api/v1/namespaces/mlb/services/api").json()["spec"].get("type") in (None, "ClusterIP")

    # each provider's cloud publishes its load balancer's address: the MultiClusterService lists both
    for cluster, ip in (("aws-dfw", "198.51.100.10"), ("gcp-sin", "198.51.100.20")):
        k8s.CoreV1Api(env.members[cluster].api).patch_namespaced_service_status(
            "api", "mlb", {"status": {"loadBalancer": {"ingress": [{"ip": ip}]}}}, _request_timeout=3)
    both = {"ingress": [{"ip": "198.51.100.10"}, {"ip": "198.51.100.20"}]}
    wait_for(lambda: status().get("loadBalancer") == both, 30, "both providers' addresses",
             what_else=lambda: (status(), [api_service(c).status for c in ("aws-dfw", "gcp-sin")]))
    ready = {c["type"]: c["status"] for c in status()["conditions"]}
    assert ready == {"ServiceApplied": "True", "LoadBalancerReady": "True"}

    # gcp-sin's traffic taken away (a Remedy's TrafficControl): its address leaves the list, and comes back
    kubectl.run("apply", "-f", "-", input=SIN_REMEDY)
    wait_for(lambda: status().get("loadBalancer") == {"ingress": [{"ip": "198.51.100.10"}]}, 30,
             "only aws-dfw's address", what_else=status)
    kubectl.run("delete", "remedies.remedy.karmada.io", "sin-upgrade")
    wait_for(lambda: status().get("loadBalancer") == both, 30, "gcp-sin's address back", what_else=status)

    # deleted: the providers keep the Service as a dependent of the Deployment there, as written again
    kubectl.run("delete", "multiclusterservices.networking.karmada.io", "api", "-n", "mlb")
    wait_for(lambda: all((s := api_service(c)) is not None and s.spec.type != "LoadBalancer"
                         for c in ("aws-dfw", "gcp-sin")), 60, "the providers' Service no longer a LoadBalancer")
    assert env.http.get("/apis/policy.karmada.io/v1alpha1/namespaces/mlb/overridepolicies/mcs-api-loadbalancer"
                        ).status_code == 404
    kubectl.run("delete", "-f", "-", "--wait=false", "--ignore-not-found", input=API)
