"""The Kind table a simulated member cluster serves: what a plain Kubernetes cluster has, nothing
of DRO-DS's own ``multicluster.io`` group (a member is not a control plane). Each kind prints the
``kubectl get`` columns kube-apiserver prints for it (`drods.api.table.KUBERNETES_COLUMNS`), not
the control plane's multicluster view of the same kind."""

from __future__ import annotations

from drods.api.table import KUBERNETES_COLUMNS, PrintedKind
from drods.model.kinds import ALL, CUSTOM_RESOURCE_DEFINITION, Kind

# What `kubectl get all` lists on a real cluster (of the kinds a sim serves).
_IN_ALL = frozenset({"Pod", "Service", "Deployment", "StatefulSet", "DaemonSet", "Job", "CronJob", "ReplicaSet",
                     "ReplicationController", "HorizontalPodAutoscaler"})


def _kind(group: str, kind: str, plural: str, namespaced: bool, *short_names: str, version: str = "v1") -> Kind:
    """A kind with kube-apiserver's ``kubectl get`` columns if `KUBERNETES_COLUMNS` has them, else
    NAME and AGE (`drods.api.table.to_table`'s plain columns)."""
    categories = ALL if kind in _IN_ALL else ()
    columns = KUBERNETES_COLUMNS.get(kind)
    if columns is None:
        return Kind(group, version, kind, plural, namespaced, short_names=short_names, categories=categories)
    return PrintedKind(group, version, kind, plural, namespaced, short_names=short_names, categories=categories,
                       columns=columns)


NAMESPACE = _kind("", "Namespace", "namespaces", False, "ns")
NODE = _kind("", "Node", "nodes", False, "no")
POD = _kind("", "Pod", "pods", True, "po")
SERVICE = _kind("", "Service", "services", True, "svc")
CONFIG_MAP = _kind("", "ConfigMap", "configmaps", True, "cm")
SECRET = _kind("", "Secret", "secrets", True)
EVENT = _kind("", "Event", "events", True, "ev")
SERVICE_ACCOUNT = _kind("", "ServiceAccount", "serviceaccounts", True, "sa")
DEPLOYMENT = _kind("apps", "Deployment", "deployments", True, "deploy")
STATEFUL_SET = _kind("apps", "StatefulSet", "statefulsets", True, "sts")
DAEMON_SET = _kind("apps", "DaemonSet", "daemonsets", True, "ds")
JOB = _kind("batch", "Job", "jobs", True)
# Runs its pods as a Deployment does (owner references, ``readyReplicas``); no Deployment makes one here.
REPLICA_SET = _kind("apps", "ReplicaSet", "replicasets", True, "rs")
# Served from live usage by drods.sim.routes; listed here so discovery advertises the group.
NODE_METRICS = Kind("metrics.k8s.io", "v1beta1", "NodeMetrics", "nodes", False, verbs=("get", "list"))
POD_METRICS = Kind("metrics.k8s.io", "v1beta1", "PodMetrics", "pods", True, verbs=("get", "list"))

# Stored as given (no controller acts on them in a sim), so the objects that follow a workload land.
PERSISTENT_VOLUME_CLAIM = _kind("", "PersistentVolumeClaim", "persistentvolumeclaims", True, "pvc")
INGRESS = _kind("networking.k8s.io", "Ingress", "ingresses", True, "ing")
CRON_JOB = _kind("batch", "CronJob", "cronjobs", True, "cj")
# A FederatedResourceQuota's static assignment lands as one (no quota controller fills its status here).
RESOURCE_QUOTA = Kind("", "v1", "ResourceQuota", "resourcequotas", True, short_names=("quota",))
# Written by the sim's endpoint-slice step for Services with a selector (and kept as given when
# someone else — the control plane's service directory — writes them).
ENDPOINT_SLICE = _kind("discovery.k8s.io", "EndpointSlice", "endpointslices", True)
# RBAC objects a policy propagates (a workload's Role and binding, a ClusterRole): stored as given
# (a sim authorises nothing by them)
_RBAC = "rbac.authorization.k8s.io"
ROLE = Kind(_RBAC, "v1", "Role", "roles", True)
ROLE_BINDING = Kind(_RBAC, "v1", "RoleBinding", "rolebindings", True)
CLUSTER_ROLE = Kind(_RBAC, "v1", "ClusterRole", "clusterroles", False)
CLUSTER_ROLE_BINDING = Kind(_RBAC, "v1", "ClusterRoleBinding", "clusterrolebindings", False)
# The rest of the built-in kinds DRO-DS propagates (docs/resources.md), stored as given: no
# autoscaler, disruption budget, network policy, admission, endpoints, volume or CSI controller acts
# on them in a sim (an HPA scales nothing, a LimitRange defaults no pod's requests, a PriorityClass
# orders no scheduling, a ReplicationController makes no pods).
HORIZONTAL_POD_AUTOSCALER = _kind("autoscaling", "HorizontalPodAutoscaler", "horizontalpodautoscalers", True, "hpa",
                                  version="v2")
POD_DISRUPTION_BUDGET = _kind("policy", "PodDisruptionBudget", "poddisruptionbudgets", True, "pdb")
NETWORK_POLICY = _kind("networking.k8s.io", "NetworkPolicy", "networkpolicies", True, "netpol")
LIMIT_RANGE = _kind("", "LimitRange", "limitranges", True, "limits")
POD_TEMPLATE = _kind("", "PodTemplate", "podtemplates", True)
REPLICATION_CONTROLLER = _kind("", "ReplicationController", "replicationcontrollers", True, "rc")
ENDPOINTS = _kind("", "Endpoints", "endpoints", True, "ep")
CSI_STORAGE_CAPACITY = _kind("storage.k8s.io", "CSIStorageCapacity", "csistoragecapacities", True)
PERSISTENT_VOLUME = _kind("", "PersistentVolume", "persistentvolumes", False, "pv")
STORAGE_CLASS = _kind("storage.k8s.io", "StorageClass", "storageclasses", False, "sc")
CSI_DRIVER = _kind("storage.k8s.io", "CSIDriver", "csidrivers", False)
INGRESS_CLASS = _kind("networking.k8s.io", "IngressClass", "ingressclasses", False)
PRIORITY_CLASS = _kind("scheduling.k8s.io", "PriorityClass", "priorityclasses", False, "pc")

WORKLOADS: tuple[Kind, ...] = (DEPLOYMENT, STATEFUL_SET, DAEMON_SET, JOB, REPLICA_SET)
STORED_AS_GIVEN_NAMESPACED: tuple[Kind, ...] = (
    HORIZONTAL_POD_AUTOSCALER, POD_DISRUPTION_BUDGET, NETWORK_POLICY, LIMIT_RANGE, POD_TEMPLATE,
    REPLICATION_CONTROLLER, ENDPOINTS, CSI_STORAGE_CAPACITY)
STORED_AS_GIVEN_CLUSTER: tuple[Kind, ...] = (PERSISTENT_VOLUME, STORAGE_CLASS, CSI_DRIVER, INGRESS_CLASS,
                                             PRIORITY_CLASS)
NAMESPACED: tuple[Kind, ...] = (POD, SERVICE, CONFIG_MAP, SECRET, EVENT, SERVICE_ACCOUNT, PERSISTENT_VOLUME_CLAIM,
                                INGRESS, CRON_JOB, ENDPOINT_SLICE, RESOURCE_QUOTA, ROLE, ROLE_BINDING, *WORKLOADS,
                                *STORED_AS_GIVEN_NAMESPACED)
# A member serves the custom kinds of the definitions it holds (DRO-DS sends a definition with its resources).
SIM_KINDS: tuple[Kind, ...] = (NAMESPACE, NODE, *NAMESPACED, CLUSTER_ROLE, CLUSTER_ROLE_BINDING,
                               *STORED_AS_GIVEN_CLUSTER, NODE_METRICS, POD_METRICS, CUSTOM_RESOURCE_DEFINITION)
