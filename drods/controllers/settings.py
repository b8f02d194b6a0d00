"""Tunables of the member-cluster controllers (propagation, status, health, failover, cleanup).

The ``members`` section of the configuration file (`drods.config`, docs/configuration.md); tests
and tools pass their own to the process assembly. Two per-cluster overrides live in
Cluster annotations, so an operator can tune one flaky site without touching the others:

* ``multicluster.io/not-ready-grace-seconds`` — how long without a successful probe (push) or a
  report (pull) before the cluster is NotReady;
* ``multicluster.io/toleration-seconds`` — how long bindings stay on a NotReady cluster before
  they are rescheduled (a placement's ``clusterTolerations[].tolerationSeconds`` for the
  not-ready taint wins over it).
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from drods.members.client import MemberOptions

GRACE_ANNOTATION = "multicluster.io/not-ready-grace-seconds"
TOLERATION_ANNOTATION = "multicluster.io/toleration-seconds"


class MemberSettings(BaseModel):
    model_config = ConfigDict(extra="forbid")

    probeIntervalSeconds: float = Field(default=5.0, gt=0)
    # Health checks in flight at once across the fleet: each holds its cluster's documents while it
    # waits on the member and the store, so 10,000 clusters probed at once weighed ~280 MB.
    probeConcurrency: int = Field(default=512, ge=1)
    # Push mode: the resource summary (nodes, pods, metrics: the member's heaviest reads) is taken at most
    # this often, with a successful probe; the probe itself is one small request.
    summaryIntervalSeconds: float = Field(default=10.0, gt=0)
    # Push mode: each summary reads this many nodes' kubelet stats (network counters), in turn, through
    # the member's node proxy; a node's traffic rate is kept until its next turn (0: every node, every time).
    nodeStatsPerSummary: int = Field(default=5, ge=0)
    # Push mode: NotReady after this long without a successful probe (3 missed probes at 5 s).
    notReadyGraceSeconds: float = Field(default=15.0, gt=0)
    # Pull mode: NotReady after this long without a report (the monitor rewrites an unchanged
    # status document only every heartbeat, 60 s by default, so this must be well above it).
    pullGraceSeconds: float = Field(default=180.0, gt=0)
    # Failover (S11): bindings leave a NotReady cluster after this long.
    tolerationSeconds: float = Field(default=30.0, ge=0)
    # ... unless no cluster is Ready: every member silent at once is more likely the control plane's loss
    # (`drods.controllers.failover`); false fails over all the same (a bench of the failover storm does)
    holdFailoverWhileNoneReady: bool = True
    # Bindings failover hands to the scheduler a second while the fleet is healthy (None: as their
    # tolerations run out); when more than unhealthyClusterThreshold of the clusters are NotReady, at
    # secondaryEvictionRate on a fleet of more than largeClusterNumThreshold clusters, none on a smaller one
    # (Karmada's eviction queue: `drods.controllers.eviction_pace`)
    evictionRate: float | None = Field(default=None, gt=0)
    secondaryEvictionRate: float = Field(default=0.1, ge=0)
    unhealthyClusterThreshold: float = Field(default=0.55, ge=0, le=1)
    largeClusterNumThreshold: int = Field(default=10, ge=0)
    # How often an unchanged Ready condition's lastHeartbeatTime is rewritten in the Cluster object.
    heartbeatWriteSeconds: float = Field(default=20.0, gt=0)
    # The fleet's heartbeat writes a second at most: a large fleet's heartbeats are spaced further
    # apart (10,000 clusters at 50 a second: every 200 s) so they never take the store's writes
    # from the work (as Kubernetes reports an unchanged node status only every 5 minutes).
    heartbeatWritesPerSecond: float = Field(default=50.0, gt=0)
    # How often each member's managed workloads are listed for their status while a kind of them is not
    # followed by a watch (between lists a watch records each change as it happens).
    statusPollSeconds: float = Field(default=2.0, gt=0)
    # While every kind is followed by a watch: how often the copies the watches keep are checked against
    # their Works (an informer's resync: nothing is listed).
    statusResyncSeconds: float = Field(default=15.0, gt=0)
    # How often each member's pods and metrics.k8s.io PodMetrics are read (one list of each per
    # namespace) for the per-workload usage on Works and Bindings; metrics-server's resolution is 15 s.
    usagePollSeconds: float = Field(default=15.0, gt=0)
    # An old cluster's copy is removed after this long even if the new placement never got ready.
    gracefulTimeoutSeconds: float = Field(default=600.0, gt=0)
    # Consecutive failed applies to one cluster before the binding is Failed (retries go on).
    applyFailureThreshold: int = Field(default=5, ge=1)
    cleanupIntervalSeconds: float = Field(default=5.0, gt=0)
    # Member client (per cluster): timeouts, retries, parallel calls.
    connectTimeoutSeconds: float = Field(default=3.0, gt=0)
    readTimeoutSeconds: float = Field(default=5.0, gt=0)
    retries: int = Field(default=1, ge=0)
    concurrency: int = Field(default=8, ge=1)
    # Workers turning Bindings into Works (the binding controller) and workloads into Bindings (the
    # resource detector). A pass spends most of its time waiting for its writes' group commit, and a
    # worker is a coroutine: with 8, a commit carried ~8 passes' writes and the controller waited on
    # the disk; with 128, Binding -> Work ran 1.9x faster on less CPU (docs/performance.md).
    bindingWorkers: int = Field(default=128, ge=1)
    detectorWorkers: int = Field(default=128, ge=1)
    # A change of a Work's status alone brings its Binding's pass back after this long, so what a member
    # reports in quick succession (applied, observed, ready) is rolled up in one pass: one write of the
    # Binding's status and one of the template's for all of it, not one each (0: at once).
    statusCoalesceSeconds: float = Field(default=0.5, ge=0)

    def member_options(self) -> MemberOptions:
        return MemberOptions(connect_timeout=self.connectTimeoutSeconds, read_timeout=self.readTimeoutSeconds,
                             retries=self.retries, backoff=0.2, backoff_max=2.0, concurrency=self.concurrency,
                             failure_threshold=2, probe_interval=self.probeIntervalSeconds,
                             node_stats_per_summary=self.nodeStatsPerSummary)


def annotation_seconds(obj: dict[str, Any] | None, name: str) -> float | None:
    """A non-negative number of seconds from an annotation, or None when absent or unreadable."""
    value = (((obj or {}).get("metadata") or {}).get("annotations") or {}).get(name)
    try:
        seconds = float(value) if value is not None else None
    except ValueError:
        return None
    return seconds if seconds is not None and seconds >= 0 else None
