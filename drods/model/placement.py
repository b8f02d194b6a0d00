"""Where a workload may run and how its replicas are divided (Karmada-compatible field names)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from drods.model.meta import check_label_key
from drods.model.selector import LabelSelector

# The one default water-level limit (a fraction of a cluster's capacity): placements without their own
# ``waterLevelLimit`` are scheduled below it, and monitoring evacuates a cluster with no
# ``spec.waterLevelLimit`` that stays above it. One constant, so scheduling and evacuation agree about
# the same cluster (docs/configuration.md says why 0.85).
DEFAULT_WATER_LEVEL_LIMIT = 0.85


def qualified_name_problem(value: str) -> str | None:
    """Why ``value`` is not a Kubernetes qualified name (a label key, `drods.model.meta.check_label_key`),
    or None when it is one. Karmada checks affinity names and state-preservation label names so."""
    try:
        check_label_key(value)
    except ValueError as e:
        return f"{value!r} is not a qualified name: {e}"
    return None


class FieldSelectorRequirement(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)

    key: Literal["provider", "region", "zone", "city"]
    operator: Literal["In", "NotIn"]
    values: list[str] = Field(min_length=1)


class FieldSelector(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)

    matchExpressions: list[FieldSelectorRequirement] = Field(default_factory=list)


class ClusterAffinity(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)

    clusterNames: list[str] = Field(default_factory=list)
    exclude: list[str] = Field(default_factory=list)
    labelSelector: LabelSelector | None = None
    fieldSelector: FieldSelector | None = None

    def is_empty(self) -> bool:
        """No names, exclusions or selectors: every cluster."""
        return (not self.clusterNames and not self.exclude and self.labelSelector is None
                and self.fieldSelector is None)


def _affinity_name(v: str) -> str:
    if (problem := qualified_name_problem(v)) is not None:
        raise ValueError(problem)  # Karmada: an affinity name is a label key
    return v


class OverflowClusterAffinity(ClusterAffinity):
    """One overflow tier of a ``clusterAffinities`` term (Karmada 1.18)."""

    affinityName: str = Field(min_length=1, max_length=32)

    @field_validator("affinityName")
    @classmethod
    def _label_key(cls, v: str) -> str:
        return _affinity_name(v)


class ClusterAffinityTerm(ClusterAffinity):
    affinityName: str = Field(min_length=1)
    # Karmada 1.18: groups used in order once the primary (this term's own selector) is full; the last
    # shrinks first on scale-down. A cluster in several tiers belongs to the first that names it.
    overflowAffinities: list[OverflowClusterAffinity] = Field(default_factory=list)

    @field_validator("affinityName")
    @classmethod
    def _label_key(cls, v: str) -> str:
        return _affinity_name(v)

    @model_validator(mode="after")
    def _overflow_tiers(self) -> ClusterAffinityTerm:
        # Karmada's webhook: overflow needs a primary group that is not "every cluster", and every
        # tier's name differs from the primary's and from the other tiers'
        if self.overflowAffinities and self.is_empty():
            raise ValueError(f"overflowAffinities: term {self.affinityName!r} has no clusterNames, exclude, "
                             "labelSelector or fieldSelector of its own; overflow tiers need a primary group "
                             "that is not every cluster")
        seen = {self.affinityName}
        for i, tier in enumerate(self.overflowAffinities):
            if tier.affinityName in seen:
                raise ValueError(f"overflowAffinities[{i}].affinityName: {tier.affinityName!r} is already used "
                                 "by this term or an earlier tier; each tier needs its own name")
            seen.add(tier.affinityName)
        return self


class Toleration(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)

    key: str | None = None
    operator: Literal["Equal", "Exists"] = "Equal"
    value: str | None = None
    effect: Literal["NoSchedule", "PreferNoSchedule", "NoExecute"] | None = None
    tolerationSeconds: int | None = Field(default=None, ge=0)


class SpreadConstraint(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)

    spreadByField: Literal["cluster", "region", "zone", "provider", "city"] | None = None
    spreadByLabel: str | None = None
    maxGroups: int | None = Field(default=None, ge=1)
    minGroups: int | None = Field(default=None, ge=1)

    @model_validator(mode="after")
    def _one_key(self) -> SpreadConstraint:
        if self.spreadByField is not None and self.spreadByLabel is not None:
            raise ValueError("spreadByField and spreadByLabel are mutually exclusive")
        if self.spreadByField is None and self.spreadByLabel is None:
            self.spreadByField = "cluster"  # Karmada's default
        if self.maxGroups and self.minGroups and self.minGroups > self.maxGroups:
            raise ValueError("minGroups must not exceed maxGroups")
        return self


def karmada_spread_problem(constraints: Sequence[SpreadConstraint]) -> str | None:
    """What Karmada's webhook refuses in a policy's ``spreadConstraints`` beyond each constraint's own
    checks, or None: one constraint per ``spreadByField``, and a constraint by a field coarser than a
    cluster (region, zone, provider, and DRO-DS's city) only together with a ``spreadByField:
    cluster`` one, which says how many clusters to pick. DRO-DS's own placement API keeps allowing
    a region spread alone (its scheduler reads it with the clusters unbounded)."""
    fields = [c.spreadByField for c in constraints if c.spreadByField is not None]
    for f in dict.fromkeys(fields):
        if fields.count(f) > 1:
            return f"{fields.count(f)} constraints spread by {f}; at most one constraint per spreadByField"
    coarser = [f for f in dict.fromkeys(fields) if f != "cluster"]
    if coarser and "cluster" not in fields:
        return (f"spreadByField {', '.join(coarser)} needs a spreadByField: cluster constraint alongside it "
                "(it says how many clusters to select)")
    return None


class StaticClusterWeight(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)

    targetCluster: ClusterAffinity
    weight: int = Field(ge=1)


class WeightPreference(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)

    staticWeightList: list[StaticClusterWeight] = Field(default_factory=list)
    dynamicWeight: Literal["WaterLevel", "AvailableReplicas"] | None = None

    @property
    def static_weights(self) -> list[StaticClusterWeight]:
        """The static weights that divide the replicas: none when a ``dynamicWeight`` is set, which
        makes Karmada ignore the ``staticWeightList``."""
        return [] if self.dynamicWeight else self.staticWeightList


class ReplicaScheduling(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)

    replicaSchedulingType: Literal["Duplicated", "Divided"] = "Divided"
    replicaDivisionPreference: Literal["Aggregated", "Weighted"] = "Weighted"
    weightPreference: WeightPreference | None = None


class PrimaryRole(BaseModel):
    """The primary of a stateful topology: all its replicas on one cluster."""

    model_config = ConfigDict(extra="forbid", strict=True)

    replicas: int = Field(default=1, ge=1, le=10_000)


class ReplicaRole(BaseModel):
    """The replicas of a stateful topology: ``clusters`` distinct clusters besides the primary's,
    ``replicasPerCluster`` on each."""

    model_config = ConfigDict(extra="forbid", strict=True)

    clusters: int = Field(ge=1, le=64)
    replicasPerCluster: int = Field(default=1, ge=1, le=10_000)


class StatefulTopology(BaseModel):
    """F3: an explicit primary + replicas layout for a stateful workload (a StatefulSet, a database).

    The primary goes whole to the best cluster (the scores, data locality measured from its datasets'
    Primary copies), the replicas to the next ``replicas.clusters`` best distinct clusters, spread over
    regions, then zones, when the candidates allow. The counts are the placement: the workload's own
    ``replicas`` are not divided."""

    model_config = ConfigDict(extra="forbid", strict=True)

    primary: PrimaryRole = Field(default_factory=PrimaryRole)
    replicas: ReplicaRole

    @property
    def total(self) -> int:
        return self.primary.replicas + self.replicas.clusters * self.replicas.replicasPerCluster


class UserSite(BaseModel):
    """Where some of a workload's users are: one client site, city or region, with a weight (the
    weights are relative; the scheduler divides by their shares)."""

    model_config = ConfigDict(extra="forbid", strict=True)

    site: str | None = Field(default=None, min_length=1, max_length=253)
    city: str | None = Field(default=None, min_length=1, max_length=253)
    region: str | None = Field(default=None, min_length=1, max_length=253)
    weight: float = Field(default=1.0, gt=0, le=1e9)

    @model_validator(mode="after")
    def _one_place(self) -> UserSite:
        if sum(v is not None for v in (self.site, self.city, self.region)) != 1:
            raise ValueError("set exactly one of site, city or region")
        return self

    @property
    def kind(self) -> str:
        return "site" if self.site is not None else "city" if self.city is not None else "region"

    @property
    def place(self) -> str:
        return str(self.site or self.city or self.region)


# A Kubernetes label key: an optional DNS-subdomain prefix and a name of at most 63 characters.
LABEL_KEY = r"^([a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?/)?[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?$"


class WorkloadAffinityTerm(BaseModel):
    """Workloads whose template carries the same value under ``groupByLabelKey`` form one group
    (per namespace)."""

    model_config = ConfigDict(extra="forbid", strict=True)

    groupByLabelKey: str = Field(min_length=1, max_length=316, pattern=LABEL_KEY)


class WorkloadAffinity(BaseModel):
    """Karmada 1.17's inter-workload rules, both hard: ``affinity`` keeps a group on the clusters its
    placed members use (the first member places freely); ``antiAffinity`` keeps a group's members
    off each other's clusters."""

    model_config = ConfigDict(extra="forbid", strict=True)

    affinity: WorkloadAffinityTerm | None = None
    antiAffinity: WorkloadAffinityTerm | None = None

    @model_validator(mode="after")
    def _distinct_keys(self) -> WorkloadAffinity:
        if (self.affinity is not None and self.antiAffinity is not None
                and self.affinity.groupByLabelKey == self.antiAffinity.groupByLabelKey):
            raise ValueError(f"affinity and antiAffinity both group by {self.affinity.groupByLabelKey!r}: a "
                             "workload would have to run with its group and away from it; use different "
                             "groupByLabelKey values")
        return self


class Placement(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)

    clusterAffinity: ClusterAffinity | None = None
    clusterAffinities: list[ClusterAffinityTerm] = Field(default_factory=list)
    clusterTolerations: list[Toleration] = Field(default_factory=list)
    spreadConstraints: list[SpreadConstraint] = Field(default_factory=list)
    replicaScheduling: ReplicaScheduling | None = None
    waterLevelLimit: float = Field(default=DEFAULT_WATER_LEVEL_LIMIT, gt=0, le=1)
    # F6: the cheapest placement that meets the water-level limit and the latency needs
    costFirst: bool = False
    # F3: primary + replicas over distinct clusters (sets the division and the spread itself)
    statefulTopology: StatefulTopology | None = None
    # S11: move replicas to clusters that join or become Ready (None: the scheduler's fleetChange.rebalance);
    # false keeps a divided placement where it is, as Karmada does
    rebalanceOnFleetChange: bool | None = None
    # Issue 34: where the workload's users are (declared); without it, users learned from CATS
    # steering's observed demand are used (docs/scheduling.md, "Placement that follows the users")
    users: list[UserSite] = Field(default_factory=list, max_length=64)
    # the latency (ms) from the users no replica should exceed while a cluster within it has room
    latencySLOMs: float | None = Field(default=None, gt=0, le=60_000)
    # Karmada 1.17: co-locate or separate workloads by a label of their templates (drods.model.binding)
    workloadAffinity: WorkloadAffinity | None = None

    @field_validator("clusterAffinities")
    @classmethod
    def _unique_affinity_names(cls, terms: list[ClusterAffinityTerm]) -> list[ClusterAffinityTerm]:
        names = [t.affinityName for t in terms]
        twice = sorted({n for n in names if names.count(n) > 1})
        if twice:
            raise ValueError(f"affinityName {', '.join(map(repr, twice))} is used by more than one term; "
                             "each term needs a unique affinityName")
        return terms

    @model_validator(mode="after")
    def _one_affinity_form(self) -> Placement:
        if self.clusterAffinity is not None and self.clusterAffinities:
            raise ValueError("clusterAffinity and clusterAffinities are mutually exclusive")
        if self.statefulTopology is not None:
            given = [k for k in ("replicaScheduling", "spreadConstraints", "costFirst") if getattr(self, k)]
            if given:
                raise ValueError(f"statefulTopology sets the division and the spread itself: "
                                 f"remove {', '.join(given)}")
        # a site and a city of one name read the same latencies: one place, whatever the case
        places = [(u.kind == "region", u.place.casefold()) for u in self.users]
        if len(set(places)) != len(places):
            raise ValueError("users: a site, city or region is listed twice (names compared without case; a site "
                             "and a city of one name are one place)")
        if any(t.overflowAffinities for t in self.clusterAffinities):
            rs = self.replicaScheduling
            wp = rs.weightPreference if rs is not None else None
            if (rs is None or rs.replicaSchedulingType != "Divided" or rs.replicaDivisionPreference != "Weighted"
                    or (wp is not None and wp.static_weights)):
                raise ValueError("overflowAffinities can only be used with replicaScheduling Divided, "
                                 "Weighted by a dynamic weight (WaterLevel or AvailableReplicas)")
        return self
