"""The Kind table a simulated member cluster serves: what a plain Kubernetes cluster has, nothing
of DRO-DS's own ``multicluster.io`` group (a member is not a control plane)."""

from __future__ import annotations

from drods.model.kinds import Kind

NAMESPACE = Kind("", "v1", "Namespace", "namespaces", False, short_names=("ns",))
NODE = Kind("", "v1", "Node", "nodes", False, short_names=("no",))
POD = Kind("", "v1", "Pod", "pods", True, short_names=("po",))
SERVICE = Kind("", "v1", "Service", "services", True, short_names=("svc",))
CONFIG_MAP = Kind("", "v1", "ConfigMap", "configmaps", True, short_names=("cm",))
SECRET = Kind("", "v1", "Secret", "secrets", True)
EVENT = Kind("", "v1", "Event", "events", True, short_names=("ev",))
SERVICE_ACCOUNT = Kind("", "v1", "ServiceAccount", "serviceaccounts", True, short_names=("sa",))
DEPLOYMENT = Kind("apps", "v1", "Deployment", "deployments", True, short_names=("deploy",))
STATEFUL_SET = Kind("apps", "v1", "StatefulSet", "statefulsets", True, short_names=("sts",))
DAEMON_SET = Kind("apps", "v1", "DaemonSet", "daemonsets", True, short_names=("ds",))
JOB = Kind("batch", "v1", "Job", "jobs", True)
# Served from live usage by drods.sim.routes; listed here so discovery advertises the group.
NODE_METRICS = Kind("metrics.k8s.io", "v1beta1", "NodeMetrics", "nodes", False, verbs=("get", "list"))
POD_METRICS = Kind("metrics.k8s.io", "v1beta1", "PodMetrics", "pods", True, verbs=("get", "list"))

WORKLOADS: tuple[Kind, ...] = (DEPLOYMENT, STATEFUL_SET, DAEMON_SET, JOB)
NAMESPACED: tuple[Kind, ...] = (POD, SERVICE, CONFIG_MAP, SECRET, EVENT, SERVICE_ACCOUNT, *WORKLOADS)
SIM_KINDS: tuple[Kind, ...] = (NAMESPACE, NODE, *NAMESPACED, NODE_METRICS, POD_METRICS)
