"""Cluster affinity filter: clusterNames, exclude, labelSelector, fieldSelector of the affinity term
being tried (the framework walks ordered ``clusterAffinities`` groups), plus the binding's
region/provider/zone/city shorthands. A term with ``overflowAffinities`` admits the clusters of
any of its groups; the division fills them group by group (``tiers.py``)."""

from __future__ import annotations

from drods.scheduler.arrays import BoolArr
from drods.scheduler.interface import FilterOutcome, PluginBase, Rejection, reject
from drods.scheduler.selectors import affinity_parts, overflow_mask
from drods.scheduler.snapshot import Snapshot
from drods.scheduler.task import TaskInfo


class ClusterAffinity(PluginBase):
    name = "ClusterAffinity"

    def filter(self, task: TaskInfo, snap: Snapshot, mask: BoolArr) -> FilterOutcome:
        out: list[Rejection] = []
        term = task.affinity
        task.missing_affinity_names = tuple(snap.rows_of(term.cluster_names)[1]) if term is not None else ()
        if term is not None and term.overflow:  # F6: the primary group or any overflow group
            ok = overflow_mask(snap, term)
            drop = mask & ~ok
            if drop.any():
                out.append(reject(self.name, f"affinity {term.name}: in neither its clusters nor its "
                                             "overflowAffinities", drop))
                mask = mask & ok
        elif term is not None:
            prefix = f"affinity {term.name}: " if term.name else ""
            for reason, ok in affinity_parts(snap, term):
                drop = mask & ~ok
                if drop.any():
                    out.append(reject(self.name, prefix + reason, drop))
                    mask = mask & ok
        for fld, values in task.shorthand:
            ok = snap.field_in(fld, values)
            drop = mask & ~ok
            if drop.any():
                out.append(reject(self.name, f"{fld} not in [{', '.join(values)}]", drop))
                mask = mask & ok
        return mask, out
