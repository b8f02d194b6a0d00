"""Extension points of the scheduler framework (S4, S5, S8), in the style of Kubernetes' framework.

A plugin implements exactly one of these protocols and is registered by name. Plugins work on whole
NumPy arrays (one row per cluster), never on Python loops over clusters: that is what keeps a
scheduling cycle cheap at thousands of clusters.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar, Protocol, runtime_checkable

import numpy as np
import numpy.typing as npt

from drods.scheduler.arrays import BoolArr, FloatArr, IntArr

if TYPE_CHECKING:
    from drods.scheduler.snapshot import Snapshot
    from drods.scheduler.task import TaskInfo


@dataclass(slots=True)
class Rejection:
    """Clusters one filter dropped for one reason.

    ``reason`` is the short category counted in the summary message ("water level above 85%");
    ``detail`` (optional) renders the per-cluster text lazily from values captured at filter time,
    so a 10,000-cluster rejection costs no string formatting unless someone reads it.
    """

    reason: str
    rows: IntArr
    plugin: str = ""
    detail: Callable[[int], str] | None = None
    capacity_only: bool = False

    def message(self, k: int) -> str:
        """Text for the k-th row of ``rows``."""
        return self.detail(k) if self.detail is not None else self.reason


FilterOutcome = tuple[BoolArr, list[Rejection]]


@runtime_checkable
class FilterPlugin(Protocol):
    """Drops clusters that cannot run the task (S4). Returns the narrowed mask and why."""

    name: ClassVar[str]
    # True when the filter only limits *growth* (capacity, water level): clusters that already
    # host the workload keep their replicas even when such a filter drops them.
    capacity_only: ClassVar[bool]

    def filter(self, task: TaskInfo, snap: Snapshot, mask: BoolArr) -> FilterOutcome: ...


@runtime_checkable
class ReplicaEstimator(Protocol):
    """Optional second face of a filter: how many more replicas fit per cluster (Karmada estimator);
    None when this task meets no limit of its (no fleet-sized array of infinities per decision)."""

    def max_replicas(self, task: TaskInfo, snap: Snapshot) -> FloatArr | None: ...


@runtime_checkable
class ScorePlugin(Protocol):
    """Rates every cluster 0..100 (S5); values outside ``mask`` are ignored."""

    name: ClassVar[str]

    def score(self, task: TaskInfo, snap: Snapshot, mask: BoolArr) -> FloatArr: ...


class PluginBase:
    """Convenience base: stores the profile's ``pluginArgs`` for this plugin."""

    name: ClassVar[str] = ""
    capacity_only: ClassVar[bool] = False
    # True for a score that says where a workload belongs relative to others (traffic peers, data,
    # clashing classes): when such scores separate clusters the division concentrates (concentrate.py)
    affinity: ClassVar[bool] = False
    # True for an affinity that keeps workloads apart (clashing classes): every extra cluster a
    # workload lands on is another set of neighbours, so its concentration uses the fewest clusters
    repels: ClassVar[bool] = False

    def __init__(self, args: dict[str, Any] | None = None) -> None:
        self.args: dict[str, Any] = dict(args or {})


def none_more_on(held: IntArr, n: int) -> FloatArr | None:
    """An estimate of no more replicas on the ``held`` rows (clusters that keep what they have), no
    limit elsewhere; None when there are none."""
    if not held.size:
        return None
    room = np.full(n, np.inf)
    room[held] = 0.0
    return room


def distinct(values: npt.NDArray[Any]) -> list[Any]:
    """The distinct values, ascending: ``np.unique`` without its sort when all are equal (the usual
    case for the few reasons a filter groups its drops by)."""
    if values.size and values.min() == values.max():
        return [values[0].item()]
    return np.unique(values).tolist()  # type: ignore[no-any-return]


def reject(
    plugin: str,
    reason: str,
    drop: BoolArr,
    detail: Callable[[IntArr], Callable[[int], str]] | None = None,
    capacity_only: bool = False,
) -> Rejection:
    """Build a Rejection from a drop mask; ``detail`` receives the dropped rows and returns a renderer."""
    rows = drop.nonzero()[0]
    return Rejection(reason, rows, plugin, detail(rows) if detail else None, capacity_only)
