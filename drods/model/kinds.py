"""Every kind the registry serves, with its storage key and schema (one table, one source of truth)."""

from __future__ import annotations

from dataclasses import dataclass, field

from pydantic import BaseModel

from drods.model.autoscaling import CronFederatedHPASpec, FederatedHPASpec
from drods.model.binding import BindingSpec
from drods.model.cluster import ClusterSpec
from drods.model.dataset import DatasetSpec
from drods.model.meta import API_VERSION, GROUP, VERSION
from drods.model.policy import (
    ClusterOverridePolicySpec,
    PropagationPolicySpec,
    ResourcePlacementPolicySpec,
)
from drods.model.steering import (
    ServiceExportSpec,
    ServiceImportSpec,
    ServiceRegistrationSpec,
    ServiceRouteSpec,
)
from drods.model.work import WorkSpec


@dataclass(frozen=True)
class Kind:
    group: str
    version: str
    kind: str
    plural: str
    namespaced: bool
    spec_model: type[BaseModel] | None = None
    short_names: tuple[str, ...] = ()
    # Dotted spec paths encrypted at rest and redacted on read (SEC2).
    secret_paths: tuple[str, ...] = ()
    categories: tuple[str, ...] = ()
    verbs: tuple[str, ...] = field(
        default=("create", "delete", "get", "list", "patch", "update", "watch")
    )

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version

    @property
    def singular(self) -> str:
        return self.kind.lower()

    def key_prefix(self, namespace: str | None = None) -> str:
        base = f"/registry/{self.group or 'core'}/{self.plural}/"
        if self.namespaced and namespace:
            return f"{base}{namespace}/"
        return base

    def key(self, name: str, namespace: str | None = None) -> str:
        return f"{self.key_prefix(namespace)}{name}"


# ``kubectl get drods`` lists every DRO-DS object; ``all`` keeps Kubernetes' meaning (workloads and
# Services, not configuration and not custom kinds).
_OURS = ("drods",)
ALL = ("all",)

CLUSTER = Kind(GROUP, VERSION, "Cluster", "clusters", False, ClusterSpec, ("mc",),
               secret_paths=("credentials",), categories=_OURS)
PROPAGATION_POLICY = Kind(GROUP, VERSION, "PropagationPolicy", "propagationpolicies", False,
                          PropagationPolicySpec, ("pp",), categories=_OURS)
RESOURCE_PLACEMENT_POLICY = Kind(GROUP, VERSION, "ResourcePlacementPolicy", "resourceplacementpolicies",
                                 False, ResourcePlacementPolicySpec, ("rpp",), categories=_OURS)
CLUSTER_OVERRIDE_POLICY = Kind(GROUP, VERSION, "ClusterOverridePolicy", "clusteroverridepolicies",
                               False, ClusterOverridePolicySpec, ("cop",), categories=_OURS)
BINDING = Kind(GROUP, VERSION, "Binding", "bindings", False, BindingSpec, ("rb",), categories=_OURS)
WORK = Kind(GROUP, VERSION, "Work", "works", False, WorkSpec, ("wk",), categories=_OURS)
FEDERATED_HPA = Kind(GROUP, VERSION, "FederatedHPA", "federatedhpas", True, FederatedHPASpec, ("fhpa",),
                     categories=_OURS)
CRON_FEDERATED_HPA = Kind(GROUP, VERSION, "CronFederatedHPA", "cronfederatedhpas", True, CronFederatedHPASpec,
                          ("cronfhpa",), categories=_OURS)

# Computing-aware traffic steering (C4, C7) and multi-cluster services (F8, KEP-1645).
SERVICE_REGISTRATION = Kind(GROUP, VERSION, "ServiceRegistration", "serviceregistrations", True,
                            ServiceRegistrationSpec, ("sreg",), categories=_OURS)
SERVICE_ROUTE = Kind(GROUP, VERSION, "ServiceRoute", "serviceroutes", False, ServiceRouteSpec, ("sroute",),
                     categories=_OURS)
SERVICE_EXPORT = Kind(GROUP, VERSION, "ServiceExport", "serviceexports", True, ServiceExportSpec, ("svcex",),
                      categories=_OURS)
SERVICE_IMPORT = Kind(GROUP, VERSION, "ServiceImport", "serviceimports", True, ServiceImportSpec, ("svcim",),
                      categories=_OURS)

DATASET = Kind(GROUP, VERSION, "Dataset", "datasets", True, DatasetSpec, ("dset",), categories=_OURS)

MULTICLUSTER_KINDS: tuple[Kind, ...] = (
    CLUSTER, PROPAGATION_POLICY, RESOURCE_PLACEMENT_POLICY, CLUSTER_OVERRIDE_POLICY, BINDING, WORK,
    SERVICE_REGISTRATION, SERVICE_ROUTE, SERVICE_EXPORT, SERVICE_IMPORT, DATASET, FEDERATED_HPA,
    CRON_FEDERATED_HPA,
)

# Workload templates users submit on the Kubernetes paths; kept as given (F7).
WORKLOAD_KINDS: tuple[Kind, ...] = (
    Kind("apps", "v1", "Deployment", "deployments", True, short_names=("deploy",), categories=ALL),
    Kind("apps", "v1", "StatefulSet", "statefulsets", True, short_names=("sts",), categories=ALL),
    Kind("apps", "v1", "DaemonSet", "daemonsets", True, short_names=("ds",), categories=ALL),
    Kind("batch", "v1", "Job", "jobs", True, categories=ALL),
    Kind("", "v1", "Service", "services", True, short_names=("svc",), categories=ALL),
    Kind("", "v1", "ConfigMap", "configmaps", True, short_names=("cm",)),
    Kind("", "v1", "Secret", "secrets", True),
    Kind("", "v1", "Namespace", "namespaces", False, short_names=("ns",)),
)

ALL_KINDS: tuple[Kind, ...] = MULTICLUSTER_KINDS + WORKLOAD_KINDS
SECRET = next(k for k in WORKLOAD_KINDS if k.kind == "Secret")
# Stored encrypted as whole objects (SEC2, `drods.store.encrypted`): Secrets and the Works that carry
# them to pull-mode members. (Cluster credentials are sealed field by field: `secret_paths`.)
ENCRYPTED_AT_REST: tuple[Kind, ...] = (SECRET, WORK)

assert CLUSTER.api_version == API_VERSION


def by_plural(group: str, version: str, plural: str) -> Kind | None:
    for k in ALL_KINDS:
        if k.group == group and k.version == version and k.plural == plural:
            return k
    return None


def by_kind(api_version: str, kind: str) -> Kind | None:
    for k in ALL_KINDS:
        if k.api_version == api_version and k.kind == kind:
            return k
    return None
