"""Karmada's ``networking.karmada.io/v1alpha1`` kinds as written, so Karmada YAML applies unchanged.

* ``MultiClusterService`` (namespaced, named like the Service it exposes): ``types`` (``CrossCluster``
  and ``LoadBalancer``, both acted on by `drods.steering.multicluster_service`), ``ports`` (the ports
  exposed; none named = all of the Service's), the provider and consumer clusters
  (``providerClusters`` / ``consumerClusters`` with ``{name}``; the older ``serviceProvisionClusters``
  / ``serviceConsumptionClusters`` name lists and the deprecated ``range.clusterNames`` mean the same;
  empty = every cluster).
* ``MultiClusterIngress``: its spec is a ``networking.k8s.io/v1`` Ingress spec, read by
  `drods.steering.multicluster_ingress`.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

KARMADA_NETWORKING_GROUP = "networking.karmada.io"
KARMADA_NETWORKING_VERSION = "v1alpha1"


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)


class ExposurePort(_Strict):
    """A port of the Service to expose: ``name`` must be the Service's port name when given."""

    name: str | None = None
    port: int = Field(ge=1, le=65535)


class ExposureRange(_Strict):
    clusterNames: list[str] = Field(default_factory=list)


class ClusterSelector(_Strict):
    name: str = Field(min_length=1)


class MultiClusterServiceSpec(_Strict):
    types: list[Literal["CrossCluster", "LoadBalancer"]] = Field(min_length=1)
    ports: list[ExposurePort] = Field(default_factory=list)
    range: ExposureRange | None = None  # deprecated in Karmada: the clusters both provide and consume
    serviceProvisionClusters: list[str] = Field(default_factory=list)
    serviceConsumptionClusters: list[str] = Field(default_factory=list)
    providerClusters: list[ClusterSelector] = Field(default_factory=list)
    consumerClusters: list[ClusterSelector] = Field(default_factory=list)

    def providers(self) -> set[str]:
        """The named provider clusters (empty: every cluster)."""
        range_names = self.range.clusterNames if self.range is not None else []
        return {c.name for c in self.providerClusters} | set(self.serviceProvisionClusters) | set(range_names)

    def consumers(self) -> set[str]:
        """The named consumer clusters (empty: every cluster)."""
        range_names = self.range.clusterNames if self.range is not None else []
        return {c.name for c in self.consumerClusters} | set(self.serviceConsumptionClusters) | set(range_names)


# ---- a networking.k8s.io/v1 IngressSpec -----------------------------------------------------------


class ServiceBackendPort(_Strict):
    name: str | None = None
    number: int | None = Field(default=None, ge=1, le=65535)


class IngressServiceBackend(_Strict):
    name: str = Field(min_length=1)
    port: ServiceBackendPort | None = None


class TypedLocalObjectReference(_Strict):
    apiGroup: str | None = None
    kind: str = Field(min_length=1)
    name: str = Field(min_length=1)


class IngressBackend(_Strict):
    service: IngressServiceBackend | None = None
    resource: TypedLocalObjectReference | None = None


class HTTPIngressPath(_Strict):
    path: str | None = None
    pathType: Literal["Exact", "Prefix", "ImplementationSpecific"]
    backend: IngressBackend


class HTTPIngressRuleValue(_Strict):
    paths: list[HTTPIngressPath] = Field(min_length=1)


class IngressRule(_Strict):
    host: str | None = None
    http: HTTPIngressRuleValue | None = None


class IngressTLS(_Strict):
    hosts: list[str] = Field(default_factory=list)
    secretName: str | None = None


class IngressSpec(_Strict):
    ingressClassName: str | None = None
    defaultBackend: IngressBackend | None = None
    tls: list[IngressTLS] = Field(default_factory=list)
    rules: list[IngressRule] = Field(default_factory=list)

    def backend_services(self) -> list[str]:
        """The Services this ingress routes to, in order of first mention."""
        backends = [self.defaultBackend] if self.defaultBackend is not None else []
        backends += [p.backend for r in self.rules if r.http is not None for p in r.http.paths]
        names = [b.service.name for b in backends if b.service is not None]
        return list(dict.fromkeys(names))
