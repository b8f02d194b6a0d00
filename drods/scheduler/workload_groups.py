"""Which workloads belong to each workload-affinity group (Karmada 1.17 ``workloadAffinity``).

A group is ``<namespace>/<labelKey>=<labelValue>`` (groups are scoped to a namespace); the scheduler
service records each binding's groups as its Binding arrives, so a workload created in the same
burst as its peers already counts as their peer. Where the members run is the snapshot's
``workload_placements``.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable


class WorkloadGroups:
    def __init__(self) -> None:
        self._members: dict[str, set[str]] = {}  # group → workloads ("namespace/name")
        self._groups: dict[str, tuple[str, ...]] = {}  # workload → its groups

    def set(self, workload: str, groups: Iterable[str]) -> None:
        """``workload``'s groups now (none: it leaves every group)."""
        new = tuple(sorted(set(groups)))
        old = self._groups.get(workload, ())
        if new == old:
            return
        for g in old:
            members = self._members.get(g)
            if members is not None:
                members.discard(workload)
                if not members:
                    del self._members[g]
        for g in new:
            self._members.setdefault(g, set()).add(workload)
        if new:
            self._groups[workload] = new
        else:
            self._groups.pop(workload, None)

    def members(self, group: str) -> Collection[str]:
        """The workloads of ``group`` (not to be changed by the caller)."""
        return self._members.get(group, frozenset())
