"""Event history kept in the store: the failure log and the automatic-operations log (SPEC API9).

These are low-rate, must survive restarts and must be shared by every replica, so they live in
the store (not in the series file), as `Journal`s (`drods.machinery.journal`) under
``/history/failures/`` and ``/history/operations/``, pruned after ``failureRetentionDays``.
An entry's key is random, or deterministic when several replicas may record the same fact (then
the first write wins).

Entry shape (shared with the scheduler, which appends unschedulable attempts the same way)::

    {"time": "2026-01-01T00:00:00.123Z",    # RFC 3339, UTC
     "kind": "ClusterNotReady",              # UpperCamel, see below
     "cluster": "aws-us-east",               # optional
     "binding": "default/web",               # optional
     "reason": "human text",
     "details": {…}}                         # free-form, JSON

Kinds written by monitoring: ``ClusterNotReady`` (Ready condition went False), ``StaleReports``
(no report for ``staleAfterSeconds``), ``ReportRejected`` (invalid, stale or out-of-order report;
at most one per cluster and code per minute), ``WaterLevelLimitBreached`` (water level crossed the
cluster's limit), ``SustainedAboveLimit`` (stayed above it for the sustained duration),
``CollectFailed`` (a pull collector could not read the cluster; at most one per minute),
``DomainEvent`` (an agent posted a critical domain event). The scheduler adds ``Unschedulable``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from drods.machinery.journal import Journal, Page
from drods.store import Store

__all__ = ["HistoryLog", "Page", "append", "make_entry"]


def make_entry(kind: str, reason: str, *, cluster: str | None = None, binding: str | None = None,
               details: Mapping[str, Any] | None = None) -> dict[str, Any]:
    e: dict[str, Any] = {"kind": kind}
    if cluster is not None:
        e["cluster"] = cluster
    if binding is not None:
        e["binding"] = binding
    e["reason"] = reason
    e["details"] = dict(details or {})
    return e


class HistoryLog:
    """One log (failures or operations): a journal of `make_entry` entries."""

    def __init__(self, store: Store, prefix: str) -> None:
        self.journal = Journal(store, prefix)

    async def append(self, kind: str, reason: str, *, ts: float | None = None, cluster: str | None = None,
                     binding: str | None = None, details: Mapping[str, Any] | None = None,
                     dedup: str | None = None) -> bool:
        """Write one entry; with ``dedup`` a second write of the same fact is a no-op (False)."""
        return await self.journal.append(make_entry(kind, reason, cluster=cluster, binding=binding, details=details),
                                         ts=ts, dedup=dedup)

    async def query(self, start: float, end: float, max_entries: int, *, kind: str | None = None,
                    cluster: str | None = None) -> Page:
        """Entries with ``start <= time <= end``, newest first, at most ``max_entries``."""
        def match(e: dict[str, Any]) -> bool:
            return (not kind or e.get("kind") == kind) and (not cluster or e.get("cluster") == cluster)

        return await self.journal.query(start, end, max_entries, match)

    async def prune(self, older_than: float) -> int:
        return await self.journal.prune(older_than)


async def append(store: Store, prefix: str, kind: str, reason: str, **kw: Any) -> bool:
    """`HistoryLog.append` for a one-off writer (the scheduler's failure entries)."""
    return await HistoryLog(store, prefix).append(kind, reason, **kw)
