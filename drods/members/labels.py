"""Node label names DRO-DS reads from member clusters (and `drods sim` writes).

Region, zone and instance type are the well-known Kubernetes labels every cloud sets. Kubernetes has
no standard for the provider or the city (M1), so DRO-DS uses labels in its own group; a provider
missing from the labels is taken from ``spec.providerID`` (``aws:///…``, ``gce://…``, ``azure:///…``).
"""

from __future__ import annotations

REGION = "topology.kubernetes.io/region"
ZONE = "topology.kubernetes.io/zone"
INSTANCE_TYPE = "node.kubernetes.io/instance-type"
PROVIDER = "multicluster.io/provider"
CITY = "multicluster.io/city"
HOSTNAME = "kubernetes.io/hostname"
# NVIDIA GPU feature discovery labels the product (model) of a node's GPUs.
GPU_PRODUCT = "nvidia.com/gpu.product"
GPU_RESOURCE = "nvidia.com/gpu"

# Older clusters still carry the deprecated beta names.
LEGACY = {
    REGION: "failure-domain.beta.kubernetes.io/region",
    ZONE: "failure-domain.beta.kubernetes.io/zone",
    INSTANCE_TYPE: "beta.kubernetes.io/instance-type",
}


def label(labels: dict[str, str], name: str) -> str | None:
    """A node label by its current name, falling back to the deprecated beta name."""
    value = labels.get(name)
    if value is None and name in LEGACY:
        value = labels.get(LEGACY[name])
    return value


def provider_of(labels: dict[str, str], provider_id: str | None) -> str | None:
    """The cloud a node runs in: our label, else the scheme of ``spec.providerID``."""
    value = labels.get(PROVIDER)
    if value:
        return value
    if provider_id and "://" in provider_id:
        return provider_id.split("://", 1)[0] or None
    return None
