"""Built-in scheduler plugins, one module each, registered by name on import."""

from __future__ import annotations

from drods.scheduler.plugins.balanced_allocation import BalancedAllocation
from drods.scheduler.plugins.capability import Capability
from drods.scheduler.plugins.cluster_affinity import ClusterAffinity
from drods.scheduler.plugins.cluster_locality import ClusterLocality
from drods.scheduler.plugins.cost import Cost
from drods.scheduler.plugins.data_locality import DataLocality
from drods.scheduler.plugins.dissonance import Dissonance
from drods.scheduler.plugins.follow_up import FollowUp
from drods.scheduler.plugins.gpu_storage_fit import GpuStorageFit
from drods.scheduler.plugins.least_water_level import LeastWaterLevel
from drods.scheduler.plugins.network_fit import NetworkFit
from drods.scheduler.plugins.network_locality import NetworkLocality
from drods.scheduler.plugins.readiness import Readiness
from drods.scheduler.plugins.resource_fit import ResourceFit
from drods.scheduler.plugins.spread_constraint import SpreadConstraint
from drods.scheduler.plugins.taint_toleration import TaintToleration
from drods.scheduler.plugins.target_clusters import TargetClusters
from drods.scheduler.plugins.topology_preference import TopologyPreference
from drods.scheduler.plugins.traffic_affinity import TrafficAffinity
from drods.scheduler.plugins.user_latency import UserLatency, UserLatencySLO
from drods.scheduler.plugins.water_level_limit import WaterLevelLimit
from drods.scheduler.plugins.workload_affinity import WorkloadAffinity
from drods.scheduler.registry import register

FILTERS: tuple[type, ...] = (
    Readiness, TargetClusters, ClusterAffinity, WorkloadAffinity, TaintToleration, Capability, NetworkFit,
    GpuStorageFit, ResourceFit, WaterLevelLimit, UserLatencySLO, SpreadConstraint, FollowUp,
)
SCORES: tuple[type, ...] = (
    LeastWaterLevel, BalancedAllocation, ClusterLocality, TopologyPreference, NetworkLocality, Cost,
    Dissonance, TrafficAffinity, DataLocality, UserLatency,
)

for _cls in FILTERS + SCORES:
    register(_cls, replace=True)

__all__ = [c.__name__ for c in FILTERS + SCORES] + ["FILTERS", "SCORES"]
