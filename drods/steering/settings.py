"""Tunables of traffic steering: the ``steering`` section of the configuration file
(`drods.config`); tests and tools pass their own to the process assembly."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

from drods.steering.routing import Damping


class UserLearning(BaseModel):
    """Issue 34: how a service's users are learned from the requests steering resolves per client
    site, and how far they must move before its workload is re-placed."""

    model_config = ConfigDict(extra="forbid")

    enabled: bool = True
    # the request rate per client site decays with this time constant (an exponential window)
    windowSeconds: float = Field(default=60.0, gt=0)
    # a client site with less than this share of the rate is left out (the rest are renormalised)
    floor: float = Field(default=0.05, ge=0, lt=1)
    # below this total rate (requests/s) nothing is learned: too little demand to say where users are
    minRequestsPerSecond: float = Field(default=0.05, ge=0)
    # the learned users count as moved when their distribution differs by this much (total variation)
    change: float = Field(default=0.2, gt=0, le=1)
    # hysteresis: a move must hold this long before the workload is re-placed
    settleSeconds: float = Field(default=300.0, ge=0)
    # how often the demand is read
    pollSeconds: float = Field(default=5.0, gt=0)


class ProbeSettings(BaseModel):
    """The ``steering.probe`` section: what the control plane measures, and how often."""

    model_config = ConfigDict(extra="forbid")

    enabled: bool = True
    site: str = Field(default="control-plane", min_length=1, max_length=253)  # where this process runs
    intervalSeconds: float = Field(default=10.0, gt=0)
    probesPerInterval: int = Field(default=5, ge=1, le=100)
    timeoutSeconds: float = Field(default=2.0, gt=0)
    clientSites: dict[str, str] = Field(default_factory=dict)  # client site → its probe URL
    concurrency: int = Field(default=64, ge=1)  # targets probed at once (a large fleet is probed in waves)


class SteeringSettings(BaseModel):
    model_config = ConfigDict(extra="forbid")

    # C8: a client site's route changes at most this often (unless the instance it uses breaks the SLA).
    minIntervalSeconds: float = Field(default=10.0, ge=0)
    # C8: a valid route is replaced only by one better by this much (relative, in the strategy's key).
    changeThreshold: float = Field(default=0.1, ge=0, lt=1)
    # C8: a new instance must meet every SLA threshold with this margin (0.1: delay ≤ 90 ms for 100 ms).
    hysteresis: float = Field(default=0.1, ge=0, lt=1)
    # Status changes arriving within this window are evaluated together (one burst, one recomputation).
    coalesceSeconds: float = Field(default=0.02, ge=0)
    # CCC: a nearer cluster is offered to a service's workload at most once per this long per client site.
    offerCooldownSeconds: float = Field(default=60.0, ge=0)
    # F8: how often the provider clusters of exported Services are asked for their endpoints.
    endpointPollSeconds: float = Field(default=2.0, gt=0)
    # Registration files (YAML, one or more documents) applied when the controller starts leading (C4).
    registrationFiles: list[str] = Field(default_factory=list)
    # users learned from demand
    users: UserLearning = Field(default_factory=UserLearning)
    # C2: the control plane's network probe (`drods.steering.probing`)
    probe: ProbeSettings = Field(default_factory=ProbeSettings)

    def damping(self) -> Damping:
        return Damping(self.minIntervalSeconds, self.changeThreshold, self.hysteresis)
