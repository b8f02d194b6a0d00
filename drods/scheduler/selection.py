"""Whether a binding may select one cluster, judged from the cluster's facts alone.

The filters judge every cluster of the snapshot at once (masks); a fleet change concerns one
cluster, and the scheduler asks, for each distinct selection among its bindings, whether that
cluster is selectable now and was before. Same semantics as ``TargetClusters`` and
``ClusterAffinity`` (``selectors.affinity_parts``): a missing label or field fails ``In`` and
passes ``NotIn``; a term with overflow groups admits the clusters of any of its groups.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from drods.model.binding import BindingSpec
from drods.model.cluster import ClusterSpec
from drods.model.selector import requirement_matches
from drods.scheduler.task import AffinityKey, affinity_terms, shorthands


@dataclass(frozen=True, slots=True)
class ClusterFacts:
    """What a selection reads of a cluster: its name, labels and topology fields."""

    name: str
    labels: Mapping[str, str]
    fields: Mapping[str, str | None]

    @classmethod
    def of(cls, name: str, labels: Mapping[str, str], spec: ClusterSpec) -> ClusterFacts:
        return cls(name, dict(labels), {"region": spec.region, "zone": spec.zone, "provider": spec.provider,
                                        "city": spec.city})


def _group_selects(term: AffinityKey, c: ClusterFacts) -> bool:
    if term.cluster_names and c.name not in term.cluster_names:
        return False
    if c.name in term.exclude:
        return False
    if any(c.labels.get(k) != v for k, v in term.match_labels):
        return False
    if not all(requirement_matches(c.labels, k, op, vals) for k, op, vals in term.label_exprs):
        return False
    return all((c.fields.get(k) in vals) == (op == "In") for k, op, vals in term.field_exprs)


def term_selects(term: AffinityKey | None, c: ClusterFacts) -> bool:
    """The term (its own group or any overflow group) admits the cluster."""
    if term is None:
        return True
    return _group_selects(term, c) or any(_group_selects(g, c) for g in term.overflow)


@dataclass(frozen=True, slots=True)
class ClusterSelection:
    """The cluster-selecting part of a binding: targets, shorthands and affinity terms."""

    targets: frozenset[str]
    shorthand: tuple[tuple[str, tuple[str, ...]], ...]
    terms: tuple[AffinityKey | None, ...]

    @classmethod
    def of(cls, spec: BindingSpec) -> ClusterSelection:
        return cls(frozenset(spec.targetClusters), shorthands(spec), affinity_terms(spec.placement))

    def selects(self, c: ClusterFacts) -> bool:
        """Some affinity term admits the cluster (the framework tries them in order) and it is
        among the targets and shorthands."""
        if self.targets and c.name not in self.targets:
            return False
        if any(c.fields.get(f) not in values for f, values in self.shorthand):
            return False
        return any(term_selects(t, c) for t in self.terms)
