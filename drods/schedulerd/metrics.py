"""Prometheus metrics under Karmada's names, so karmada-scheduler dashboards carry over (issue part 8).

==========================================================  ===========================================
``karmada_scheduler_e2e_scheduling_duration_seconds``       queued → status written {result, scheduleType}
``karmada_scheduler_scheduling_algorithm_duration_seconds`` the cycle and its steps {scheduleStep}
``karmada_scheduler_framework_extension_point_duration_seconds``  Filter / Score per cycle {extension_point, result}
``karmada_scheduler_plugin_execution_duration_seconds``     per plugin {plugin, extension_point, result}
``karmada_scheduler_schedule_attempts_total``               {result, scheduleType}
``karmada_scheduler_queue_incoming_bindings_total``         {event}
``karmada_scheduler_pending_bindings``                      queue depth {queue: active|backoff|unschedulable|processing}
``drods_scheduler_is_leader``                               1 while this process holds the scheduler lease
``drods_scheduler_status_write_batch_size``                 decisions per group-committed status write
==========================================================  ===========================================

Results are ``success`` (placed, maybe partially), ``unschedulable`` and ``error``. Per-plugin
durations are recorded for one cycle in ``PLUGIN_SAMPLE_EVERY`` (the first, then every tenth), as
kube-scheduler samples 10 % of its cycles: observing ~15 histograms per binding cost more than a
plugin's own run.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

_BUCKETS = tuple(0.001 * 2**i for i in range(15))  # Karmada: ExponentialBuckets(0.001, 2, 15)
_FINE = tuple(0.00001 * 2**i for i in range(16))  # 10 µs … 0.33 s: per-plugin times are tiny
PLUGIN_SAMPLE_EVERY = 10


class _QueueDepth(Collector):
    def __init__(self, counts: Callable[[], dict[str, int]]) -> None:
        self._counts = counts

    def collect(self) -> Iterator[GaugeMetricFamily]:
        g = GaugeMetricFamily("karmada_scheduler_pending_bindings", "Bindings waiting in the scheduling queue",
                              labels=["queue"])
        for where, n in self._counts().items():
            g.add_metric([where], n)
        yield g


class SchedulerMetrics:
    def __init__(self, queue_counts: Callable[[], dict[str, int]]) -> None:
        r = self.registry = CollectorRegistry()
        self.e2e = Histogram("karmada_scheduler_e2e_scheduling_duration_seconds", "E2e scheduling latency in seconds",
                             ["result", "scheduleType"], registry=r, buckets=_BUCKETS)
        self.algorithm = Histogram("karmada_scheduler_scheduling_algorithm_duration_seconds",
                                   "Scheduling algorithm latency in seconds", ["scheduleStep"], registry=r,
                                   buckets=_BUCKETS)
        self.extension_point = Histogram(
            "karmada_scheduler_framework_extension_point_duration_seconds",
            "Latency for running all plugins of a specific extension point.", ["extension_point", "result"],
            registry=r, buckets=_FINE)
        self.plugin = Histogram("karmada_scheduler_plugin_execution_duration_seconds",
                                "Duration for running a plugin at a specific extension point.",
                                ["plugin", "extension_point", "result"], registry=r, buckets=_FINE)
        self.attempts = Counter("karmada_scheduler_schedule_attempts_total",
                                "Number of attempts to schedule a binding", ["result", "scheduleType"], registry=r)
        self.incoming = Counter("karmada_scheduler_queue_incoming_bindings_total",
                                "Number of bindings added to scheduling queues by event type.", ["event"], registry=r)
        self.leader = Gauge("drods_scheduler_is_leader", "1 while this process holds the scheduler lease",
                            registry=r)
        self.write_conflicts = Counter("drods_scheduler_status_write_conflicts_total",
                                       "Binding status writes retried after a CAS conflict", registry=r)
        self.fleet_moved = Counter("drods_scheduler_fleet_moved_replicas_total",
                                   "Replicas moved (Duplicated: copies added or removed) because a cluster joined, "
                                   "became Ready or changed", registry=r)
        self.write_batch = Histogram("drods_scheduler_status_write_batch_size",
                                     "Decisions written together (group commit)", registry=r,
                                     buckets=tuple(2.0**i for i in range(9)))  # 1 … 256 (batchSize)
        r.register(_QueueDepth(queue_counts))
        self._children: dict[tuple[str, ...], Any] = {}
        self._cycles = 0

    def _child(self, metric: Any, *labels: str) -> Any:
        """Label lookups cost more than the observation; the hot path reuses the children."""
        k = (metric._name, *labels)
        c = self._children.get(k)
        if c is None:
            c = metric.labels(*labels)
            self._children[k] = c
        return c

    def observe_cycle(self, result: str, timings_ms: dict[str, float], filters: list[str], scores: list[str]) -> None:
        ch = self._child
        sampled = self._cycles % PLUGIN_SAMPLE_EVERY == 0
        self._cycles += 1
        fsum = ssum = 0.0
        for p in filters:
            t = timings_ms.get(p)
            if t is not None:
                fsum += t
                if sampled:
                    ch(self.plugin, p, "Filter", result).observe(t / 1e3)
        for p in scores:
            t = timings_ms.get(p)
            if t is not None:
                ssum += t
                if sampled:
                    ch(self.plugin, p, "Score", result).observe(t / 1e3)
        ch(self.extension_point, "Filter", result).observe(fsum / 1e3)
        if scores and result != "unschedulable":
            ch(self.extension_point, "Score", result).observe(ssum / 1e3)
        ch(self.algorithm, "Schedule").observe(timings_ms.get("total", 0.0) / 1e3)
        ch(self.algorithm, "Filter").observe(fsum / 1e3)
        if "divide" in timings_ms:
            ch(self.algorithm, "Score").observe(ssum / 1e3)
            ch(self.algorithm, "Select").observe(timings_ms.get("select", 0.0) / 1e3)
            ch(self.algorithm, "AssignReplicas").observe(timings_ms["divide"] / 1e3)

    def attempt(self, result: str, schedule_type: str, e2e_s: float | None) -> None:
        self._child(self.attempts, result, schedule_type).inc()
        if e2e_s is not None:
            self._child(self.e2e, result, schedule_type).observe(e2e_s)

    def incoming_event(self, event: str, n: int = 1) -> None:
        if n:
            self._child(self.incoming, event).inc(n)
