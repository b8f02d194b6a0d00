"""Every kind the registry serves, with its storage key and schema (one table, one source of truth)."""

from __future__ import annotations

from dataclasses import dataclass, field

from pydantic import BaseModel

from drods.model.autoscaling import CronFederatedHPASpec, FederatedHPASpec
from drods.model.binding import BindingSpec
from drods.model.cluster import ClusterSpec
from drods.model.crd import CRD_GROUP, CRD_VERSION, CustomResourceDefinitionSpec
from drods.model.dataset import CachePlanSpec, DatasetSpec
from drods.model.federated_quota import FederatedResourceQuotaSpec
from drods.model.interpreter import ResourceInterpreterCustomizationSpec
from drods.model.karmada import (
    KARMADA_POLICY_GROUP,
    KARMADA_POLICY_VERSION,
    KarmadaOverrideSpec,
    KarmadaPropagationSpec,
)
from drods.model.lua_customization import (
    KARMADA_CONFIG_GROUP,
    KARMADA_CONFIG_VERSION,
    KarmadaInterpreterCustomizationSpec,
)
from drods.model.meta import API_VERSION, GROUP, VERSION
from drods.model.migration import MigrationPlanSpec
from drods.model.networking import (
    KARMADA_NETWORKING_GROUP,
    KARMADA_NETWORKING_VERSION,
    IngressSpec,
    MultiClusterServiceSpec,
)
from drods.model.policy import (
    ClusterOverridePolicySpec,
    PropagationPolicySpec,
    ResourcePlacementPolicySpec,
)
from drods.model.rebalancer import REBALANCER_GROUP, REBALANCER_VERSION, WorkloadRebalancerSpec
from drods.model.remedy import RemedySpec
from drods.model.search import SEARCH_GROUP, SEARCH_VERSION, ResourceRegistrySpec
from drods.model.steering import (
    ServiceExportSpec,
    ServiceImportSpec,
    ServiceRegistrationSpec,
    ServiceRouteSpec,
)
from drods.model.structural import StructuralSchema
from drods.model.taint_policy import ClusterTaintPolicySpec
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
    # A kind a CustomResourceDefinition defines (`drods.registry.catalog`): its version's schema.
    custom: StructuralSchema | None = None
    # Stored with another group's kind of the same name and schema (one storage, read back in the
    # version asked for): Karmada's autoscaling.karmada.io kinds share DRO-DS's multicluster.io ones.
    storage_group: str | None = None
    # False: a namespaced token may read it in its namespaces but not write it (a namespace's quota
    # is set by whoever administers the fleet, as a Kubernetes ResourceQuota is)
    tenant_writable: bool = True

    @property
    def has_status(self) -> bool:
        """Served with a ``/status`` subresource (the main path then leaves status alone)."""
        if self.custom is not None:
            return self.custom.status_subresource
        return self.spec_model is not None or self.kind in ("Deployment", "StatefulSet", "Job")

    @property
    def scale_paths(self) -> tuple[str, str, str] | None:
        """Served with a ``/scale`` subresource: where the replicas and the selector are."""
        if self.custom is not None:
            return self.custom.scale
        return _BUILT_IN_SCALE.get((self.group, self.kind))

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version

    @property
    def singular(self) -> str:
        return self.kind.lower()

    def key_prefix(self, namespace: str | None = None) -> str:
        # Every custom resource under one prefix: one watch sees the kinds CRDs add later.
        base = custom_resources_prefix(self.group, self.plural) if self.custom is not None \
            else f"/registry/{self.storage_group or self.group or 'core'}/{self.plural}/"
        if self.namespaced and namespace:
            return f"{base}{namespace}/"
        return base

    def key(self, name: str, namespace: str | None = None) -> str:
        return f"{self.key_prefix(namespace)}{name}"


# The built-in kinds with a ``/scale`` subresource (as kube-apiserver serves them).
_BUILT_IN_SCALE = {(g, k): (".spec.replicas", ".status.replicas", ".spec.selector")
                   for g, k in (("apps", "Deployment"), ("apps", "StatefulSet"), ("apps", "ReplicaSet"),
                                ("", "ReplicationController"))}

CUSTOM_RESOURCES_PREFIX = "/registry/custom/"


def custom_resources_prefix(group: str, plural: str) -> str:
    """Where a custom kind's resources are stored (whichever served version wrote them)."""
    return f"{CUSTOM_RESOURCES_PREFIX}{group}/{plural}/"

# ``kubectl get drods`` lists every DRO-DS object; ``all`` keeps Kubernetes' meaning (workloads and
# Services, not configuration and not custom kinds).
_OURS = ("drods",)
ALL = ("all",)

CLUSTER = Kind(GROUP, VERSION, "Cluster", "clusters", False, ClusterSpec, ("mc",),
               secret_paths=("credentials",), categories=_OURS)
# ``pp`` and ``cop`` are Karmada's short names for its own kinds (below), which its users type
PROPAGATION_POLICY = Kind(GROUP, VERSION, "PropagationPolicy", "propagationpolicies", False,
                          PropagationPolicySpec, ("mpp",), categories=_OURS)
RESOURCE_PLACEMENT_POLICY = Kind(GROUP, VERSION, "ResourcePlacementPolicy", "resourceplacementpolicies",
                                 False, ResourcePlacementPolicySpec, ("rpp",), categories=_OURS)
CLUSTER_OVERRIDE_POLICY = Kind(GROUP, VERSION, "ClusterOverridePolicy", "clusteroverridepolicies",
                               False, ClusterOverridePolicySpec, ("mcop",), categories=_OURS)
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
CACHE_PLAN = Kind(GROUP, VERSION, "CachePlan", "cacheplans", True, CachePlanSpec, ("cplan",), categories=_OURS)

# Declarative resource interpretation of a kind (`drods.model.interpreter`), applied with kubectl.
RESOURCE_INTERPRETER_CUSTOMIZATION = Kind(GROUP, VERSION, "ResourceInterpreterCustomization",
                                          "resourceinterpretercustomizations", False,
                                          ResourceInterpreterCustomizationSpec, ("ric",), categories=_OURS)
# Custom kinds (F7): each served version of a stored definition becomes a Kind (`drods.registry.catalog`).
CUSTOM_RESOURCE_DEFINITION = Kind(CRD_GROUP, CRD_VERSION, "CustomResourceDefinition", "customresourcedefinitions",
                                  False, CustomResourceDefinitionSpec, ("crd", "crds"))

# F3: a stateful workload's move between clusters, in phases (drods.model.migration)
MIGRATION_PLAN = Kind(GROUP, VERSION, "MigrationPlan", "migrationplans", True, MigrationPlanSpec, ("mplan",),
                      categories=_OURS)

MULTICLUSTER_KINDS: tuple[Kind, ...] = (
    CLUSTER, PROPAGATION_POLICY, RESOURCE_PLACEMENT_POLICY, CLUSTER_OVERRIDE_POLICY, BINDING, WORK,
    SERVICE_REGISTRATION, SERVICE_ROUTE, SERVICE_EXPORT, SERVICE_IMPORT, DATASET, CACHE_PLAN, FEDERATED_HPA,
    CRON_FEDERATED_HPA, RESOURCE_INTERPRETER_CUSTOMIZATION, MIGRATION_PLAN,
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

# The other common core, apps, batch, networking, RBAC, autoscaling and policy kinds (F7): stored as
# given and propagated like the workload templates. Kinds without replicas go to every selected
# cluster; those a pod template names (ServiceAccounts, PVCs) follow their workload.
RESOURCE_KINDS: tuple[Kind, ...] = (
    Kind("", "v1", "ServiceAccount", "serviceaccounts", True, short_names=("sa",)),
    Kind("", "v1", "PersistentVolumeClaim", "persistentvolumeclaims", True, short_names=("pvc",)),
    Kind("", "v1", "ResourceQuota", "resourcequotas", True, short_names=("quota",)),
    Kind("", "v1", "LimitRange", "limitranges", True, short_names=("limits",)),
    Kind("apps", "v1", "ReplicaSet", "replicasets", True, short_names=("rs",), categories=ALL),
    Kind("batch", "v1", "CronJob", "cronjobs", True, short_names=("cj",), categories=ALL),
    Kind("autoscaling", "v2", "HorizontalPodAutoscaler", "horizontalpodautoscalers", True, short_names=("hpa",),
         categories=ALL),
    Kind("networking.k8s.io", "v1", "Ingress", "ingresses", True, short_names=("ing",)),
    Kind("networking.k8s.io", "v1", "NetworkPolicy", "networkpolicies", True, short_names=("netpol",)),
    Kind("discovery.k8s.io", "v1", "EndpointSlice", "endpointslices", True),
    Kind("policy", "v1", "PodDisruptionBudget", "poddisruptionbudgets", True, short_names=("pdb",)),
    Kind("rbac.authorization.k8s.io", "v1", "Role", "roles", True),
    Kind("rbac.authorization.k8s.io", "v1", "RoleBinding", "rolebindings", True),
    Kind("rbac.authorization.k8s.io", "v1", "ClusterRole", "clusterroles", False),
    Kind("rbac.authorization.k8s.io", "v1", "ClusterRoleBinding", "clusterrolebindings", False),
    # the rest of a v1.31 cluster's core, apps, networking, storage and scheduling kinds (docs/resources.md)
    Kind("", "v1", "Pod", "pods", True, short_names=("po",), categories=ALL),
    Kind("", "v1", "PodTemplate", "podtemplates", True),
    Kind("", "v1", "ReplicationController", "replicationcontrollers", True, short_names=("rc",), categories=ALL),
    Kind("", "v1", "Endpoints", "endpoints", True, short_names=("ep",)),
    Kind("", "v1", "PersistentVolume", "persistentvolumes", False, short_names=("pv",)),
    Kind("networking.k8s.io", "v1", "IngressClass", "ingressclasses", False),
    Kind("storage.k8s.io", "v1", "StorageClass", "storageclasses", False, short_names=("sc",)),
    Kind("storage.k8s.io", "v1", "CSIDriver", "csidrivers", False),
    Kind("storage.k8s.io", "v1", "CSIStorageCapacity", "csistoragecapacities", True),
    Kind("scheduling.k8s.io", "v1", "PriorityClass", "priorityclasses", False, short_names=("pc",)),
)

# Kinds that describe one cluster's own machinery (its nodes, events, leader leases, attachments):
# stored, listed and watched on the control plane as on any cluster, never propagated.
CONTROL_PLANE_KINDS: tuple[Kind, ...] = (
    Kind("", "v1", "Node", "nodes", False, short_names=("no",)),
    Kind("", "v1", "Event", "events", True, short_names=("ev",), tenant_writable=False),  # components write them
    Kind("apps", "v1", "ControllerRevision", "controllerrevisions", True),
    Kind("coordination.k8s.io", "v1", "Lease", "leases", True),
    Kind("storage.k8s.io", "v1", "CSINode", "csinodes", False),
    Kind("storage.k8s.io", "v1", "VolumeAttachment", "volumeattachments", False),
)

# Every kind a Binding may name as its template (what the propagation controller watches).
TEMPLATE_KINDS: tuple[Kind, ...] = WORKLOAD_KINDS + RESOURCE_KINDS

# Karmada's policy API as written (drods.model.karmada): a namespaced PropagationPolicy selects only
# its namespace's resources and wins over cluster-scoped policies.
KARMADA_PROPAGATION_POLICY = Kind(KARMADA_POLICY_GROUP, KARMADA_POLICY_VERSION, "PropagationPolicy",
                                  "propagationpolicies", True, KarmadaPropagationSpec, ("pp",), categories=_OURS)
KARMADA_CLUSTER_PROPAGATION_POLICY = Kind(KARMADA_POLICY_GROUP, KARMADA_POLICY_VERSION, "ClusterPropagationPolicy",
                                          "clusterpropagationpolicies", False, KarmadaPropagationSpec,
                                          ("cpp",), categories=_OURS)
KARMADA_OVERRIDE_POLICY = Kind(KARMADA_POLICY_GROUP, KARMADA_POLICY_VERSION, "OverridePolicy", "overridepolicies",
                               True, KarmadaOverrideSpec, ("op",), categories=_OURS)
KARMADA_CLUSTER_OVERRIDE_POLICY = Kind(KARMADA_POLICY_GROUP, KARMADA_POLICY_VERSION, "ClusterOverridePolicy",
                                       "clusteroverridepolicies", False, KarmadaOverrideSpec, ("cop",),
                                       categories=_OURS)
KARMADA_PROPAGATION_KINDS: tuple[Kind, ...] = (KARMADA_PROPAGATION_POLICY, KARMADA_CLUSTER_PROPAGATION_POLICY)
# the policies the resource detector places workloads by: DRO-DS's and Karmada's
PLACEMENT_POLICY_KINDS: tuple[Kind, ...] = (PROPAGATION_POLICY, RESOURCE_PLACEMENT_POLICY, *KARMADA_PROPAGATION_KINDS)
# the autoscalers that may own a workload's replicas (one each: `drods.autoscaling.admission`)
AUTOSCALER_KINDS: tuple[Kind, ...] = (FEDERATED_HPA, CRON_FEDERATED_HPA)
# autoscaling.karmada.io: the same objects as DRO-DS's FederatedHPA / CronFederatedHPA (one storage)
KARMADA_AUTOSCALING_KINDS: tuple[Kind, ...] = (
    Kind("autoscaling.karmada.io", "v1alpha1", "FederatedHPA", "federatedhpas", True, FederatedHPASpec,
         categories=_OURS, storage_group=GROUP),
    Kind("autoscaling.karmada.io", "v1alpha1", "CronFederatedHPA", "cronfederatedhpas", True, CronFederatedHPASpec,
         categories=_OURS, storage_group=GROUP),
)
KARMADA_OVERRIDE_KINDS: tuple[Kind, ...] = (KARMADA_OVERRIDE_POLICY, KARMADA_CLUSTER_OVERRIDE_POLICY)
# config.karmada.io: a kind's interpretation as Lua scripts (drods.model.lua_customization), stored
# apart from DRO-DS's declarative customizations; both feed one interpreter (drods.model.interpreter)
KARMADA_RESOURCE_INTERPRETER_CUSTOMIZATION = Kind(
    KARMADA_CONFIG_GROUP, KARMADA_CONFIG_VERSION, "ResourceInterpreterCustomization",
    "resourceinterpretercustomizations", False, KarmadaInterpreterCustomizationSpec, categories=_OURS)
INTERPRETER_CUSTOMIZATION_KINDS: tuple[Kind, ...] = (RESOURCE_INTERPRETER_CUSTOMIZATION,
                                                     KARMADA_RESOURCE_INTERPRETER_CUSTOMIZATION)
# networking.karmada.io (drods.model.networking): exposure of a Service across clusters, and an Ingress
# routed to the clusters that run its backends
MULTI_CLUSTER_SERVICE = Kind(KARMADA_NETWORKING_GROUP, KARMADA_NETWORKING_VERSION, "MultiClusterService",
                             "multiclusterservices", True, MultiClusterServiceSpec, ("mcs",), categories=_OURS)
MULTI_CLUSTER_INGRESS = Kind(KARMADA_NETWORKING_GROUP, KARMADA_NETWORKING_VERSION, "MultiClusterIngress",
                             "multiclusteringresses", True, IngressSpec, ("mci",), categories=_OURS)
KARMADA_NETWORKING_KINDS: tuple[Kind, ...] = (MULTI_CLUSTER_SERVICE, MULTI_CLUSTER_INGRESS)
# A namespace's quota across clusters (drods.model.federated_quota) and taints by cluster condition
# (drods.model.taint_policy)
FEDERATED_RESOURCE_QUOTA = Kind(KARMADA_POLICY_GROUP, KARMADA_POLICY_VERSION, "FederatedResourceQuota",
                                "federatedresourcequotas", True, FederatedResourceQuotaSpec, ("frq",),
                                categories=_OURS, tenant_writable=False)
CLUSTER_TAINT_POLICY = Kind(KARMADA_POLICY_GROUP, KARMADA_POLICY_VERSION, "ClusterTaintPolicy",
                            "clustertaintpolicies", False, ClusterTaintPolicySpec, ("ctp",), categories=_OURS)
# apps.karmada.io: re-place the listed workloads from scratch (drods.model.rebalancer), cluster-scoped
WORKLOAD_REBALANCER = Kind(REBALANCER_GROUP, REBALANCER_VERSION, "WorkloadRebalancer", "workloadrebalancers", False,
                           WorkloadRebalancerSpec, categories=_OURS)
# remedy.karmada.io: actions on clusters by condition (drods.model.remedy), cluster-scoped
REMEDY = Kind("remedy.karmada.io", "v1alpha1", "Remedy", "remedies", False, RemedySpec, categories=_OURS)
# search.karmada.io: which members' resources the search cache keeps (drods.model.search), cluster-scoped
RESOURCE_REGISTRY = Kind(SEARCH_GROUP, SEARCH_VERSION, "ResourceRegistry", "resourceregistries", False,
                         ResourceRegistrySpec, categories=_OURS)
KARMADA_KINDS: tuple[Kind, ...] = (KARMADA_PROPAGATION_KINDS + KARMADA_OVERRIDE_KINDS + KARMADA_AUTOSCALING_KINDS
                                   + (FEDERATED_RESOURCE_QUOTA, CLUSTER_TAINT_POLICY)
                                   + (KARMADA_RESOURCE_INTERPRETER_CUSTOMIZATION,) + KARMADA_NETWORKING_KINDS
                                   + (WORKLOAD_REBALANCER, REMEDY, RESOURCE_REGISTRY))

ALL_KINDS: tuple[Kind, ...] = (MULTICLUSTER_KINDS + TEMPLATE_KINDS + CONTROL_PLANE_KINDS + KARMADA_KINDS
                               + (CUSTOM_RESOURCE_DEFINITION,))
SECRET = next(k for k in WORKLOAD_KINDS if k.kind == "Secret")
PRIORITY_CLASS = next(k for k in RESOURCE_KINDS if k.kind == "PriorityClass")

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
