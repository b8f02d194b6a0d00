"""``/metrics`` for monitoring: the fleet as the scheduler sees it, and the ingest path's own counters.

Fleet gauges are produced at scrape time from the process's `FleetView` (a custom collector), so a
thousand clusters cost nothing between scrapes and every replica exports the same numbers.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping

from prometheus_client import CollectorRegistry, Counter, Histogram
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.metrics_core import Metric
from prometheus_client.registry import Collector

from drods.monitor import report as r
from drods.monitor.fleetview import FleetView
from drods.monitor.report import NormalisedStatus

_RESOURCES = (
    ("cpu", r.CPU_CAPACITY, r.CPU_USED),
    ("memory", r.MEMORY_CAPACITY, r.MEMORY_USED),
    ("gpu", r.GPU_CAPACITY, r.GPU_USED),
    ("storage", r.STORAGE_CAPACITY, r.STORAGE_USED),
)


class FleetCollector(Collector):
    """``latest``: this replica's latest accepted report per cluster — what the report age counts from
    (the scheduler's view is written only when it changes enough, so its age grew past a healthy
    cluster's report interval)."""

    def __init__(self, fleet: FleetView, active_max_age_s: Callable[[], float],
                 latest: Callable[[], Mapping[str, NormalisedStatus]] | None = None) -> None:
        self.fleet = fleet
        self.active_max_age_s = active_max_age_s
        self.latest = latest

    def collect(self) -> Iterator[Metric]:
        fleet = self.fleet
        now = fleet.clock()
        snap, details = fleet.realtime(self.active_max_age_s(), now)
        wl = GaugeMetricFamily("drods_cluster_water_level", "Scheduler-visible water level (0..1)", labels=["cluster"])
        ready = GaugeMetricFamily("drods_cluster_ready", "Cluster Ready (1, also while Unknown) or not (0)",
                                  labels=["cluster"])
        active = GaugeMetricFamily("drods_cluster_active", "Ready and reporting (1) or not (0)", labels=["cluster"])
        age = GaugeMetricFamily("drods_cluster_report_age_seconds", "Seconds since the last report was received",
                                labels=["cluster"])
        cap = GaugeMetricFamily("drods_cluster_capacity", "Capacity (cores, GiB, devices)",
                                labels=["cluster", "resource"])
        used = GaugeMetricFamily("drods_cluster_used", "Used (cores, GiB, devices)", labels=["cluster", "resource"])
        pods = GaugeMetricFamily("drods_cluster_pods", "Pods running", labels=["cluster"])
        net = GaugeMetricFamily("drods_cluster_network_mbps", "Network traffic in Mbps",
                                labels=["cluster", "direction"])
        surge = GaugeMetricFamily("drods_cluster_surge_magnitude", "Traffic surge magnitude (0..1)",
                                  labels=["cluster"])
        surge_doc = fleet.surge.get("clusters") or {}
        latest = self.latest() if self.latest is not None else {}
        for c, d in details.items():
            ready.add_metric([c], 0.0 if d["ready"] is False else 1.0)
            active.add_metric([c], 1.0 if d["active"] else 0.0)
            if d["waterLevel"] is not None:
                wl.add_metric([c], d["waterLevel"])
            report_age = d["reportAgeSeconds"]
            if (last := latest.get(c)) is not None:
                newest = max(now - last.received_ts, 0.0)
                report_age = newest if report_age is None else min(report_age, newest)
            if report_age is not None:
                age.add_metric([c], report_age)
            entry = fleet.statuses.get(c)
            st = entry.status if entry is not None else None
            if st is not None:
                for name, cap_m, used_m in _RESOURCES:
                    if (v := st.get(cap_m)) is not None:
                        cap.add_metric([c, name], v)
                    if (v := st.get(used_m)) is not None:
                        used.add_metric([c, name], v)
                if st.pods is not None:
                    pods.add_metric([c], float(st.pods))
                for direction, field in (("in", r.NETWORK_IN), ("out", r.NETWORK_OUT)):
                    if (v := st.get(field)) is not None:  # never measured: no series, not a made-up 0
                        net.add_metric([c, direction], v)
            s = surge_doc.get(c) if isinstance(surge_doc, dict) else None
            surge.add_metric([c], float(s.get("magnitude", 0.0)) if isinstance(s, dict) else 0.0)
        yield from (wl, ready, active, age, cap, used, pods, net, surge)
        fwl = GaugeMetricFamily("drods_fleet_water_level", "Capacity-weighted water level of active clusters")
        if snap.waterLevel.fleet is not None:
            fwl.add_metric([], snap.waterLevel.fleet)
        yield fwl
        yield GaugeMetricFamily("drods_fleet_active_clusters", "Clusters ready and reporting",
                                value=snap.activeClusters)
        yield GaugeMetricFamily("drods_fleet_pods", "Pods on active clusters", value=snap.totalPods)
        fnet = GaugeMetricFamily("drods_fleet_network_mbps", "Traffic of active clusters (Mbps; absent when "
                                 "no cluster's traffic is measured)")
        if snap.networkTrafficMbps is not None:
            fnet.add_metric([], snap.networkTrafficMbps)
        yield fnet
        fs = fleet.surge.get("fleet") or {}
        yield GaugeMetricFamily("drods_fleet_surge_magnitude", "Fleet traffic surge magnitude (0..1)",
                                value=float(fs.get("magnitude", 0.0)) if isinstance(fs, dict) else 0.0)


class MonitorMetrics:
    """The registry served on the API server's ``/metrics`` (``ctx.prometheus_registries``)."""

    def __init__(self, fleet: FleetView, active_max_age_s: Callable[[], float],
                 latest: Callable[[], Mapping[str, NormalisedStatus]] | None = None) -> None:
        self.registry = CollectorRegistry()
        self.registry.register(FleetCollector(fleet, active_max_age_s, latest))
        self.reports = Counter("drods_monitor_reports", "Metrics reports by source and result",
                               ["source", "result"], registry=self.registry)
        self.writes = Counter("drods_monitor_status_writes", "Status documents written, by reason",
                              ["reason"], registry=self.registry)
        self.suppressed = Counter("drods_monitor_rate_control_suppressed",
                                  "Accepted reports that left the scheduler-visible status unchanged (no write)",
                                  registry=self.registry)
        self.events = Counter("drods_monitor_events", "Events published, by kind", ["kind"], registry=self.registry)
        self.samples = Counter("drods_monitor_history_samples", "Raw samples written to metric history",
                               registry=self.registry)
        self.history_dropped = Counter("drods_monitor_history_samples_dropped",
                                       "Samples metric history could not keep (rejected: refused by Prometheus, "
                                       "e.g. too old; overflow: Prometheus unreachable for too long)",
                                       ["reason"], registry=self.registry)
        self.collect_errors = Counter("drods_monitor_collect_errors", "Pull-collector failures by source",
                                      ["source"], registry=self.registry)
        self.ingest_seconds = Histogram("drods_monitor_ingest_seconds", "Time to ingest one report (incl. writes)",
                                        registry=self.registry,
                                        buckets=(.0005, .001, .0025, .005, .01, .025, .05, .1, .25, 1))
