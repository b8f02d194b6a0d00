"""The configuration file's schema: ``DRODSConfiguration`` (``config.drods.io/v1alpha1``).

Like Kubernetes' ``KubeSchedulerConfiguration``: one typed document, one section per part of the
control plane, each section the very model its component is built from (``MonitorSettings``,
``MemberSettings``, ``AutoOpsPolicy``, ``ProfileSpec``, ``ApiSettings``), so a knob has one name and
one default, defined next to the code that uses it. Every level forbids unknown keys.
"""

from __future__ import annotations

from typing import Final, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from drods.api.settings import ApiSettings
from drods.autoscaling.settings import AutoscalingConfig
from drods.controllers.cache_planner import CachePlannerSettings
from drods.controllers.settings import MemberSettings
from drods.model.migration import MigrationSettings
from drods.monitor.autoops import AutoOpsPolicy
from drods.monitor.service import MonitorSettings
from drods.scheduler.profile import ProfileSpec
from drods.schedulerd.service import SchedulerSettings
from drods.security.at_rest import EncryptionConfig
from drods.steering.settings import SteeringSettings

API_VERSION: Final = "config.drods.io/v1alpha1"
KIND: Final = "DRODSConfiguration"

_S = SchedulerSettings  # its dataclass defaults are the scheduler section's (one default per knob)


class FleetChangeConfig(BaseModel):
    """S11: how placements follow clusters that join, become Ready or change (``schedulerd.fleet``)."""

    model_config = ConfigDict(extra="forbid")

    # divided bindings (water level, available replicas, aggregated) move replicas to a cluster that joins or
    # becomes Ready; false keeps them where they are (Karmada's behaviour); placement.rebalanceOnFleetChange
    # overrides it per binding. Duplicated and static-weight bindings always follow the fleet.
    rebalance: bool = _S.fleet_rebalance
    minMoveFraction: float = Field(default=_S.fleet_min_move_fraction, ge=0, le=1)  # smaller moves are skipped
    maxMovesPerMinute: int = Field(default=_S.fleet_max_moves_per_minute, ge=0)  # replicas, fleet-wide
    # after start or a leadership change, wait at most this long for every registered cluster's first status
    firstStatusGraceSeconds: float = Field(default=_S.first_status_grace, ge=0)


class SchedulerConfig(BaseModel):
    """The scheduler's run-time knobs and its profile (plugins, weights, adjuster, defaults)."""

    model_config = ConfigDict(extra="forbid")

    batchSize: int = Field(default=_S.batch_size, ge=1)  # decisions per status-write transaction at most
    batchSeconds: float = Field(default=_S.batch_seconds, ge=0)  # decide this long before watches run
    maxInflight: int = Field(default=_S.max_inflight, ge=1)  # status-write transactions in flight
    assumeTtlSeconds: float = Field(default=_S.assume_ttl, gt=0)  # an assumed placement expires unconfirmed
    statusMaxAgeSeconds: float = Field(default=_S.status_max_age, gt=0)  # older cluster status: not schedulable
    sweepSeconds: float = Field(default=_S.sweep_seconds, gt=0)  # how often backoffs and assumptions are swept
    historyRetentionSeconds: float = Field(default=_S.history_retention_s, gt=0)  # schedule history kept
    initialBackoffSeconds: float = Field(default=_S.initial_backoff, gt=0)  # first retry of an unschedulable
    maxBackoffSeconds: float = Field(default=_S.max_backoff, gt=0)
    maxUnschedulableSeconds: float = Field(default=_S.max_unschedulable, gt=0)  # retried at least this often
    fleetChange: FleetChangeConfig = Field(default_factory=FleetChangeConfig)
    # replicas follow learned users only when their mean latency drops by at least this (ms)
    usersMinGainMs: float = Field(default=_S.users_min_gain_ms, ge=0)
    profile: ProfileSpec = Field(default_factory=ProfileSpec)

    def settings(self, *, identity: str | None = None, lease_ttl: int = _S.lease_ttl) -> SchedulerSettings:
        """The scheduler's settings with this process's identity and lease TTL (flags)."""
        s = SchedulerSettings(lease_ttl=lease_ttl, batch_size=self.batchSize, batch_seconds=self.batchSeconds,
                              max_inflight=self.maxInflight, assume_ttl=self.assumeTtlSeconds,
                              status_max_age=self.statusMaxAgeSeconds, sweep_seconds=self.sweepSeconds,
                              history_retention_s=self.historyRetentionSeconds,
                              initial_backoff=self.initialBackoffSeconds, max_backoff=self.maxBackoffSeconds,
                              max_unschedulable=self.maxUnschedulableSeconds,
                              fleet_rebalance=self.fleetChange.rebalance,
                              fleet_min_move_fraction=self.fleetChange.minMoveFraction,
                              fleet_max_moves_per_minute=self.fleetChange.maxMovesPerMinute,
                              first_status_grace=self.fleetChange.firstStatusGraceSeconds,
                              users_min_gain_ms=self.usersMinGainMs)
        if identity:
            s.identity = identity
        return s


class DRODSConfiguration(BaseModel):
    model_config = ConfigDict(extra="forbid")

    apiVersion: Literal["config.drods.io/v1alpha1"]
    kind: Literal["DRODSConfiguration"]
    api: ApiSettings = Field(default_factory=ApiSettings)
    scheduler: SchedulerConfig = Field(default_factory=SchedulerConfig)
    monitoring: MonitorSettings = Field(default_factory=MonitorSettings)
    members: MemberSettings = Field(default_factory=MemberSettings)
    autoops: AutoOpsPolicy = Field(default_factory=AutoOpsPolicy)
    steering: SteeringSettings = Field(default_factory=SteeringSettings)
    autoscaling: AutoscalingConfig = Field(default_factory=AutoscalingConfig)
    datasets: CachePlannerSettings = Field(default_factory=CachePlannerSettings)
    migration: MigrationSettings = Field(default_factory=MigrationSettings)  # how drains move data (F3)
    encryption: EncryptionConfig = Field(default_factory=EncryptionConfig)  # the kinds sealed at rest (SEC2)

    @classmethod
    def default(cls) -> DRODSConfiguration:
        return cls(apiVersion=API_VERSION, kind=KIND)

    @model_validator(mode="after")
    def _one_water_level_limit(self) -> DRODSConfiguration:
        """Scheduling (placements without their own limit) and evacuation (clusters without their
        own limit) use one limit: set in one place, it is the other's too; set differently in both,
        the file is refused, since the scheduler would fill clusters that monitoring then empties."""
        mon = self.monitoring
        dflt = self.scheduler.profile.defaults
        mon_set = "waterLevelLimit" in mon.model_fields_set
        prof_set = "waterLevelLimit" in dflt.model_fields_set and dflt.waterLevelLimit is not None
        if mon_set and prof_set and mon.waterLevelLimit != dflt.waterLevelLimit:
            raise ValueError(f"monitoring.waterLevelLimit ({mon.waterLevelLimit:g}) and "
                             f"scheduler.profile.defaults.waterLevelLimit ({dflt.waterLevelLimit:g}) differ: "
                             "evacuation and scheduling would disagree about the same cluster; set one of them")
        if mon_set and not prof_set:
            dflt.waterLevelLimit = mon.waterLevelLimit
        elif prof_set and not mon_set and dflt.waterLevelLimit is not None:
            mon.waterLevelLimit = dflt.waterLevelLimit
        return self
