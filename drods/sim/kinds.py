"""The Kind table a simulated member cluster serves: what a plain Kubernetes cluster has, nothing
of DRO-DS's own ``multicluster.io`` group (a member is not a control plane). Each kind prints the
``kubectl get`` columns kube-apiserver prints for it (`drods.api.table.KUBERNETES_COLUMNS`), not
the control plane's multicluster view of the same kind."""

from __future__ import annotations

from drods.api.table import KUBERNETES_COLUMNS, PrintedKind
from drods.model.kinds import ALL, CUSTOM_RESOURCE_DEFINITION, Kind

# What `kubectl get all` lists on a real cluster (of the kinds a sim serves).
_IN_ALL = frozenset({"Pod", "Service", "Deployment", "StatefulSet", "DaemonSet", "Job", "CronJob"})


def _kind(group: str, kind: str, plural: str, namespaced: bool, *short_names: str) -> Kind:
    return PrintedKind(group, "v1", kind, plural, namespaced, short_names=short_names,
                       categories=ALL if kind in _IN_ALL else (), columns=KUBERNETES_COLUMNS[kind])


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

WORKLOADS: tuple[Kind, ...] = (DEPLOYMENT, STATEFUL_SET, DAEMON_SET, JOB)
NAMESPACED: tuple[Kind, ...] = (POD, SERVICE, CONFIG_MAP, SECRET, EVENT, SERVICE_ACCOUNT, PERSISTENT_VOLUME_CLAIM,
                                INGRESS, CRON_JOB, ENDPOINT_SLICE, RESOURCE_QUOTA, ROLE, ROLE_BINDING, *WORKLOADS)
# A member serves the custom kinds of the definitions it holds (DRO-DS sends a definition with its resources).
SIM_KINDS: tuple[Kind, ...] = (NAMESPACE, NODE, *NAMESPACED, CLUSTER_ROLE, CLUSTER_ROLE_BINDING, NODE_METRICS,
                               POD_METRICS, CUSTOM_RESOURCE_DEFINITION)
