"""Every store key outside the object registry, in one place (the registry's are
``/registry/<group>/<plural>/…``, from `drods.model.kinds`). A key is a contract between
components that only meet through the store: define it here, import it everywhere."""

from __future__ import annotations

# Latest status document of each cluster (`drods.monitor.statusdoc`), written by monitoring.
STATUS_PREFIX = "/status/clusters/"
# Fleet-wide traffic surge signal read by the scheduler's adjuster.
SURGE_KEY = "/status/surge"
# Leader election: ``/leases/<name>`` while a process leads ``name`` (`drods.machinery.leader`).
LEASES_PREFIX = "/leases/"
# Objects left in a member that was unreachable when they had to go (`drods.controllers.cleanup`).
CLEANUP_PREFIX = "/cleanup/"
# Time-keyed, leased journals (`drods.machinery.journal`).
AUDIT_PREFIX = "/audit/"
# Issued API tokens (never the token itself) and their revocation.
TOKENS_PREFIX = "/auth/tokens/"
# When each deleted Cluster went (``/auth/cluster-cutoffs/<cluster>``): its agent tokens issued before are refused.
CLUSTER_CUTOFFS_PREFIX = "/auth/cluster-cutoffs/"
SCHEDULES_PREFIX = "/history/schedules/"
FAILURES_PREFIX = "/history/failures/"
OPERATIONS_PREFIX = "/history/operations/"
DESCHEDULER_STATE_KEY = "/state/descheduler"  # A6: cooldowns, the hourly rate limit and holds, for the next leader
FAILOVER_STATE_KEY = "/state/failover"  # S11: whether failover is held, and when it last resumed, for the next leader
AUTOSCALING_PREFIX = "/history/autoscaling/"  # scaling decisions with their inputs
DECISIONS_PREFIX = "/history/decisions/"  # X1: route changes, migrations, cache plans (`drods.model.decision`)
# Monitoring's events (prefix-watchable, leased).
THRESHOLD_EVENTS_PREFIX = "/events/thresholds/"
SUSTAINED_EVENTS_PREFIX = "/events/sustained/"
# Domain events an agent or collector posted for a cluster (``POST /api/v1/metrics/events``, leased):
# ``/events/clusters/<cluster>/<nanoseconds>``; `drods.model.reachability` reads a pull agent's.
CLUSTER_EVENTS_PREFIX = "/events/clusters/"
# Collection subscriptions (C1).
SUBSCRIPTIONS_PREFIX = "/monitor/subscriptions/"
# Latest application feedback per workload (H3): ``/feedback/<namespace>/<kind>/<name>``.
FEEDBACK_PREFIX = "/feedback/"
# Network status between client sites and service sites (C2): ``/status/network/<from>/<to>``.
NETWORK_PREFIX = "/status/network/"
# Endpoints of exported Services collected from their provider clusters (F8):
# ``/status/endpoints/<cluster>/<namespace>/<name>``.
ENDPOINTS_PREFIX = "/status/endpoints/"
# Flow affinity pins (C7): ``/steering/flows/<serviceId>/<flow>``.
FLOWS_PREFIX = "/steering/flows/"
# requests per client site each API server saw for a service (cumulative counts)
DEMAND_PREFIX = "/steering/demand/"
# The service traffic graph (H1, `drods.model.traffic`), written by PUT /api/v1/traffic.
TRAFFIC_KEY = "/traffic/graph"
# F4: decayed Dataset reads per (Dataset, reading cluster) (`drods.model.dataset_access`)
DATASET_ACCESS_KEY = "/datasets/access"
# API7 domain configuration: an opaque JSON document per domain (``_fleet`` for fleet-wide ones).
SYNC_CONFIGS_PREFIX = "/sync/configs/"
FLEET_CONFIG = "_fleet"


def status_key(cluster: str) -> str:
    return f"{STATUS_PREFIX}{cluster}"


def lease_key(name: str) -> str:
    return f"{LEASES_PREFIX}{name}"


def feedback_key(namespace: str, kind: str, name: str) -> str:
    return f"{FEEDBACK_PREFIX}{namespace}/{kind}/{name}"


def cluster_feedback_key(namespace: str, kind: str, name: str, cluster: str) -> str:
    """One cluster's report for a workload (per-cluster weights, H3), under the workload's key."""
    return f"{FEEDBACK_PREFIX}{namespace}/{kind}/{name}/{cluster}"


def network_key(source: str, target: str) -> str:
    return f"{NETWORK_PREFIX}{source}/{target}"


def endpoints_key(cluster: str, namespace: str, name: str) -> str:
    return f"{ENDPOINTS_PREFIX}{cluster}/{namespace}/{name}"


def demand_key(service_id: str, process: str) -> str:
    return f"{DEMAND_PREFIX}{service_id}/{process}"


def flow_key(service_id: str, flow: str) -> str:
    return f"{FLOWS_PREFIX}{service_id}/{flow}"


def pair_of(key: str) -> tuple[str, str] | None:
    """``/status/network/<from>/<to>`` → (from, to)."""
    if not key.startswith(NETWORK_PREFIX):
        return None
    source, _, target = key[len(NETWORK_PREFIX):].partition("/")
    return (source, target) if source and target else None
