"""How often each controller reconciles, how long a reconcile takes and how often it fails, and how
long its keys wait in its queue.

controller-runtime's ``controller_runtime_reconcile_total`` / ``…_time_seconds`` /
``…_errors_total`` and client-go's ``workqueue_depth`` / ``workqueue_queue_duration_seconds``, under
DRO-DS's prefix, labelled by the runnable's name: where an object's latency goes is the sum, per
controller on its path, of its wait in the queue and its reconcile. Watch-driven
controllers (`drods.machinery.controller`) count one reconcile per key, periodic ones
(`drods.machinery.periodic`) one per pass. A process's manager owns one `ReconcileMetrics` and
hands it to its runnables' tasks through `CURRENT` (as it hands them the audit sink): a controller
built outside a manager (a test, a tool) reports nowhere.
"""

from __future__ import annotations

import contextlib
import contextvars
import time
from collections.abc import Callable, Iterator, Mapping, Sized

from prometheus_client import CollectorRegistry, Counter, Histogram
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

_BUCKETS = (.001, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60)


class ReconcileMetrics:
    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        self.total = Counter("drods_controller_reconcile_total", "Reconciles (passes) by controller and result",
                             ["controller", "result"], registry=self.registry)
        self.errors = Counter("drods_controller_reconcile_errors_total", "Reconciles (passes) that failed",
                              ["controller"], registry=self.registry)
        self.duration = Histogram("drods_controller_reconcile_time_seconds", "Time of one reconcile (pass)",
                                  ["controller"], registry=self.registry, buckets=_BUCKETS)
        self.queue_wait = Histogram("drods_workqueue_queue_duration_seconds",
                                    "Time a key waited in a controller's queue before a worker took it",
                                    ["controller"], registry=self.registry, buckets=_BUCKETS)
        self.queues = QueueDepths()
        self.registry.register(self.queues)

    @contextlib.contextmanager
    def reconcile(self, controller: str) -> Iterator[None]:
        """Count and time the body as one reconcile of ``controller``; an exception is an error (and
        goes on). A cancellation is not a reconcile: the process is stopping."""
        started = time.perf_counter()
        try:
            yield
        except Exception:
            self.total.labels(controller, "error").inc()
            self.errors.labels(controller).inc()
            self.duration.labels(controller).observe(time.perf_counter() - started)
            raise
        self.total.labels(controller, "success").inc()
        self.duration.labels(controller).observe(time.perf_counter() - started)


class QueueDepths(Collector):
    """``drods_workqueue_depth``: the keys ready and waiting in each running controller's queue, read
    when scraped (a stalled controller's depth still shows)."""

    def __init__(self) -> None:
        self.queues: dict[str, Sized] = {}

    def collect(self) -> Iterator[GaugeMetricFamily]:
        g = GaugeMetricFamily("drods_workqueue_depth", "Keys ready and waiting in a controller's queue",
                              labels=["controller"])
        for name, queue in sorted(self.queues.items()):
            g.add_metric([name], len(queue))
        yield g


class LeasesHeld(Collector):
    """``drods_leader{lease}``: 1 for each single-active part this process leads now, 0 for those it
    stands by for — which replica leads each, read from any replica's ``/metrics``."""

    def __init__(self, leading: Callable[[], Mapping[str, bool]]) -> None:
        self.leading = leading

    def collect(self) -> Iterator[GaugeMetricFamily]:
        g = GaugeMetricFamily("drods_leader", "1 while this process holds the part's leader lease", labels=["lease"])
        for name, held in sorted(self.leading().items()):
            g.add_metric([name], 1.0 if held else 0.0)
        yield g


CURRENT: contextvars.ContextVar[ReconcileMetrics | None] = contextvars.ContextVar("drods_reconciles", default=None)


@contextlib.contextmanager
def reconcile(controller: str) -> Iterator[None]:
    """One reconcile of ``controller``, counted in the current manager's metrics (if any)."""
    metrics = CURRENT.get()
    if metrics is None:
        yield
        return
    with metrics.reconcile(controller):
        yield


def queued(controller: str, seconds: float) -> None:
    """A key of ``controller`` waited ``seconds`` in its queue (counted in the current manager's metrics)."""
    m = CURRENT.get()
    if m is not None:
        m.queue_wait.labels(controller).observe(seconds)


@contextlib.contextmanager
def queue_depth(controller: str, queue: Sized) -> Iterator[None]:
    """Report ``queue``'s depth as ``controller``'s while the body runs."""
    m = CURRENT.get()
    if m is None:
        yield
        return
    m.queues.queues[controller] = queue
    try:
        yield
    finally:
        if m.queues.queues.get(controller) is queue:
            del m.queues.queues[controller]
