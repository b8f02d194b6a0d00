"""Monitoring wired into the running control plane (SPEC A4, API6, C1, C3, C8, F5).

`MonitorService` is the one object per API process that every monitoring route and component
shares (built by `drods.assembly`). A report, pushed by an agent
or pulled by a collector, goes::

    validate → MonitorPipeline (normalise, rate control, thresholds, surge, history buffer)
      → /status/clusters/<name>   only when the scheduler-visible status changed, or every
                                  ``heartbeatSeconds`` so report age stays known (bounded writes, C8)
      → /events/thresholds/<cluster>/…, /events/sustained/<cluster>/…   (lease TTL, prefix watch, C3)
      → /status/surge             per-cluster and fleet surge signal for the scheduler's adjuster
      → /history/failures/…       breaches, rejected reports (see `drods.monitor.history`)
      → metric history            raw samples, flushed in batches (`drods.monitor.metric_history`:
                                  the SQLite series file, or a Prometheus shared by every replica)

Per-process state (normaliser, damper, detectors) is a cache of the store: on the first report of
a cluster, or when another replica wrote its status since, it is re-seeded from the stored
document, and status writes are compare-and-swap on the revision, so several API replicas can
take reports for one cluster without flapping or overwriting newer status with older.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import re
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from drods.errors import Conflict
from drods.machinery.lease_pool import LeasePool
from drods.machinery.shared import SharedInformers
from drods.machinery.tasks import each_bounded, stop_tasks
from drods.model import jsondoc
from drods.model.keys import (
    FAILURES_PREFIX,
    OPERATIONS_PREFIX,
    SURGE_KEY,
    SUSTAINED_EVENTS_PREFIX,
    THRESHOLD_EVENTS_PREFIX,
    status_key,
)
from drods.model.kinds import CLUSTER
from drods.model.placement import DEFAULT_WATER_LEVEL_LIMIT
from drods.model.timefmt import parse_rfc3339
from drods.monitor import report as r
from drods.monitor.autoops import AutoOpsPolicy
from drods.monitor.exporter import MonitorMetrics
from drods.monitor.fleetview import ClusterInfo, FleetView, StatusEntry, decode_cluster, decode_status
from drods.monitor.forecast import Forecaster
from drods.monitor.history import HistoryLog
from drods.monitor.metric_history import Backend, MetricHistory, open_history
from drods.monitor.pipeline import DEFAULT_RULES, MonitorPipeline
from drods.monitor.prom_history import check_labels
from drods.monitor.rate_control import RateController, StatusDamper, with_min_interval
from drods.monitor.report import MetricsReport, NormalisedStatus, Normaliser, Rejection, Source, iso
from drods.monitor.series import DEFAULT_PROMQL, Point, PrometheusSeriesReader
from drods.monitor.statusdoc import build_doc, comparable
from drods.monitor.surge import SurgeConfig, SurgeDetector, SurgeSignal
from drods.monitor.thresholds import (
    SustainedDetector,
    SustainedEvent,
    ThresholdDetector,
    ThresholdEvent,
    ThresholdRule,
)
from drods.store import CasFailed, Store
from drods.store.cas import read_modify_write

log = logging.getLogger(__name__)

LIMIT_RULE = "waterLevel>=limit"


class RuleSetting(BaseModel):
    model_config = ConfigDict(extra="forbid")

    metric: str
    level: float
    hysteresis: float = Field(default=0.0, ge=0)
    name: str = ""


class MonitorSettings(BaseModel):
    """Tunables: the ``monitoring`` section of the configuration file (`drods.config`,
    docs/configuration.md)."""

    model_config = ConfigDict(extra="forbid")

    historyPath: str | None = None  # sqlite backend; default: <data dir>/history.db
    # Metric history backend (`drods.monitor.metric_history`): "sqlite" for one process, "prometheus"
    # (remote-write in, PromQL out) so every API server reads and writes the same history.
    historyBackend: Backend = "sqlite"
    historyPrometheusUrl: str | None = None  # required with historyBackend: prometheus
    historyPrometheusLabels: dict[str, str] = Field(default_factory=dict)  # added to every history series
    heartbeatSeconds: float = Field(default=60.0, gt=0)
    activeMaxAgeSeconds: float = Field(default=150.0, gt=0)  # > heartbeat + report interval
    staleAfterSeconds: float = Field(default=180.0, gt=0)
    flushIntervalSeconds: float = Field(default=1.0, gt=0)
    maintenanceIntervalSeconds: float = Field(default=60.0, gt=0)
    staleCheckIntervalSeconds: float = Field(default=5.0, gt=0)
    forecastIntervalSeconds: float = Field(default=300.0, gt=0)
    forecastRefitSeconds: float = Field(default=3600.0, gt=0)
    forecastSearchSeconds: float = Field(default=86_400.0, gt=0)  # the model's parameters searched anew
    eventTtlSeconds: int = Field(default=3600, ge=1)
    # When a cluster has no spec.waterLevelLimit; one default with the scheduler's (see the constant).
    waterLevelLimit: float = Field(default=DEFAULT_WATER_LEVEL_LIMIT, gt=0, le=1)
    limitHysteresis: float = Field(default=0.05, ge=0)
    rateMinIntervalSeconds: float | None = Field(default=None, ge=0)  # C8: overrides the per-metric 30 s
    sustainedSeconds: float = Field(default=300.0, ge=0)
    thresholds: list[RuleSetting] = Field(
        default_factory=lambda: [RuleSetting(metric=x.metric, level=x.level, hysteresis=x.hysteresis)
                                 for x in DEFAULT_RULES])
    rejectionLogIntervalSeconds: float = Field(default=60.0, ge=0)
    failureRetentionDays: float = Field(default=30.0, gt=0)
    realtimeMinIntervalSeconds: float = Field(default=0.5, ge=0)
    surgeMinChange: float = Field(default=0.05, ge=0)
    # S5 surge detection (`drods.monitor.surge`): the history a baseline needs before any surge, the
    # baseline's and the fast average's time constants.
    surgeWarmupSeconds: float = Field(default=300.0, ge=0)
    surgeBaselineSeconds: float = Field(default=1800.0, gt=0)
    surgeFastSeconds: float = Field(default=30.0, gt=0)
    # Collection interval per cluster (SPEC C1, `drods.monitor.subscriptions`): the smallest
    # maxAgeSeconds among the subscriptions that match it, clamped to [min, collectIntervalSeconds];
    # collectIntervalSeconds alone when nobody asks for fresher status.
    collectIntervalSeconds: float = Field(default=15.0, gt=0)
    minCollectIntervalSeconds: float = Field(default=2.0, gt=0)
    schedulerMaxAgeSeconds: float | None = Field(default=None, gt=0)  # built-in need; None: collectIntervalSeconds
    autoopsMaxAgeSeconds: float | None = Field(default=None, gt=0)  # built-in need; None: sustainedSeconds / 5
    collectConcurrency: int = Field(default=32, ge=1)
    collectTimeoutSeconds: float = Field(default=10.0, gt=0)
    promql: dict[str, str] = Field(default_factory=dict)  # collector templates by report field (overrides)
    promqlWindow: str = "2m"
    historyPromql: dict[str, str] = Field(default_factory=dict)  # range templates by metric (overrides)
    @model_validator(mode="after")
    def _history_backend(self) -> MonitorSettings:
        if self.historyBackend == "prometheus" and not self.historyPrometheusUrl:
            raise ValueError("historyBackend prometheus needs historyPrometheusUrl")
        check_labels(self.historyPrometheusLabels)
        return self


@dataclass(slots=True)
class IngestOutcome:
    cluster: str
    accepted: bool
    rejection: Rejection | None = None
    water_level: float | None = None  # of this report
    visible_water_level: float | None = None  # what the scheduler sees after rate control
    clock_skew_clamped: bool = False
    published: str | None = None  # why the status document was written ("changed", "heartbeat")
    events: int = 0


class _SeedableNormaliser(Normaliser):
    """A normaliser whose per-cluster memory can be rebuilt from the store."""

    def seed(self, status: NormalisedStatus) -> None:
        cur = self.latest(status.cluster)
        if cur is None or status.ts > cur.ts:
            self._last[status.cluster] = status


class _LimitWatch:
    """Per-cluster water-level limit (spec.waterLevelLimit or the default): crossings + sustained."""

    def __init__(self, hysteresis: float, sustained_s: float, max_gap_s: float) -> None:
        self.hysteresis = hysteresis
        self.sustained_s = sustained_s
        self.max_gap_s = max_gap_s
        self._by_limit: dict[float, tuple[ThresholdDetector, SustainedDetector]] = {}
        self._limit_of: dict[str, float] = {}

    def detectors(self, limit: float) -> tuple[ThresholdDetector, SustainedDetector]:
        d = self._by_limit.get(limit)
        if d is None:
            rule = ThresholdRule(r.WATER_LEVEL, limit, self.hysteresis, name=LIMIT_RULE)
            d = self._by_limit[limit] = (
                ThresholdDetector([rule]),
                SustainedDetector(r.WATER_LEVEL, limit, self.sustained_s, hysteresis=self.hysteresis,
                                  max_gap_s=self.max_gap_s),
            )
        return d

    def observe(self, status: NormalisedStatus, limit: float) -> tuple[list[ThresholdEvent], SustainedEvent | None]:
        prev = self._limit_of.get(status.cluster)
        if prev is not None and prev != limit:
            self.forget(status.cluster)
        self._limit_of[status.cluster] = limit
        th, sd = self.detectors(limit)
        return th.observe_status(status), sd.observe_status(status)

    def is_sustained(self, cluster: str) -> bool:
        limit = self._limit_of.get(cluster)
        return limit is not None and self.detectors(limit)[1].is_sustained(cluster)

    def forget(self, cluster: str) -> None:
        limit = self._limit_of.pop(cluster, None)
        if limit is not None:
            th, sd = self.detectors(limit)
            th.forget(cluster)
            sd.forget(cluster)


_SLUG = re.compile(r"[^A-Za-z0-9._=-]+")


def _slug(s: str) -> str:
    return _SLUG.sub("_", s.replace(">=", "-ge-"))


def _ns(ts: float) -> str:
    return f"{int(ts * 1e9):020d}"


class HistoryReader:
    """`SeriesReader` for history and forecasting: the cluster's Prometheus when its object names
    one (spec.prometheus) and a range template exists for the metric, else the control plane's own
    metric history ("local": the series file or the shared Prometheus, per ``historyBackend``)."""

    def __init__(self, service: MonitorService) -> None:
        self.service = service
        self._readers: dict[str, PrometheusSeriesReader] = {}

    def source_for(self, cluster: str, metric: str) -> Literal["local", "prometheus"]:
        info = self.service.fleet.clusters.get(cluster)
        if info is not None and info.prometheus and metric in self.templates():
            return "prometheus"
        return "local"

    def templates(self) -> dict[str, str]:
        return {**DEFAULT_PROMQL, **self.service.settings.historyPromql}

    def prometheus(self, url: str) -> PrometheusSeriesReader:
        rd = self._readers.get(url)
        if rd is None:
            rd = self._readers[url] = PrometheusSeriesReader(url, self.templates())
        return rd

    async def query_from(self, source: Literal["local", "prometheus"], cluster: str, metric: str, start: float,
                         end: float, step: float, info: ClusterInfo | None = None) -> list[Point]:
        if source == "prometheus":
            info = info or self.service.fleet.clusters.get(cluster)
            if info is None or not info.prometheus:
                raise LookupError(f"cluster {cluster!r} has no spec.prometheus URL")
            return await self.prometheus(info.prometheus).query(cluster, metric, start, end, step)
        series = await self.service.series()
        return await series.query(cluster, metric, start, end, step)

    async def query(self, cluster: str, metric: str, start: float, end: float, step: float) -> list[Point]:
        return await self.query_from(self.source_for(cluster, metric), cluster, metric, start, end, step)

    async def aclose(self) -> None:
        for rd in self._readers.values():
            await rd.aclose()
        self._readers.clear()


class MonitorService:
    def __init__(self, store: Store, data_dir: Path, settings: MonitorSettings | None = None, *,
                 autoops: AutoOpsPolicy | None = None, clock: Callable[[], float] = time.time,
                 informers: SharedInformers | None = None) -> None:
        self.store = store
        # the process's shared informers (None: monitoring watches for itself)
        self.informers = informers
        self.data_dir = data_dir
        self.settings = settings or MonitorSettings()
        # The fleet's automatic-operations policy: monitoring samples fast enough for its sustained
        # detection when it is enabled (`drods.monitor.subscriptions`); the descheduler acts on it.
        self.autoops = autoops or AutoOpsPolicy()
        self.clock = clock
        s = self.settings
        rates = None if s.rateMinIntervalSeconds is None else with_min_interval(s.rateMinIntervalSeconds)
        self.pipeline = MonitorPipeline(
            surge=SurgeDetector(SurgeConfig(baseline_tau_s=s.surgeBaselineSeconds,
                                            surging_baseline_tau_s=8 * s.surgeBaselineSeconds,
                                            fast_tau_s=s.surgeFastSeconds, warmup_s=s.surgeWarmupSeconds)),
            normaliser=_SeedableNormaliser(max_age_s=s.staleAfterSeconds),  # one threshold for "stale"
            damper=StatusDamper(RateController(rates)),
            thresholds=ThresholdDetector(
                [ThresholdRule(x.metric, x.level, x.hysteresis, x.name) for x in s.thresholds]),
            clock=clock,
        )
        self.limits = _LimitWatch(s.limitHysteresis, s.sustainedSeconds, max_gap_s=s.staleAfterSeconds)
        self.fleet = FleetView(store, clock=clock, informers=informers)
        self.fleet.on_cluster_change(self._on_cluster_change)
        self.metrics = MonitorMetrics(self.fleet, lambda: self.settings.activeMaxAgeSeconds,
                                      self.pipeline.normaliser.latest_all)
        self.failures = HistoryLog(store, FAILURES_PREFIX)
        self.operations = HistoryLog(store, OPERATIONS_PREFIX)
        self.leases = LeasePool(store, s.eventTtlSeconds, clock)
        self.history = HistoryReader(self)
        self.forecaster = Forecaster(self.history, clock=clock, refit_every_s=s.forecastRefitSeconds,
                                     search_every_s=s.forecastSearchSeconds)
        self._series: MetricHistory | None = None
        self._locks: dict[str, asyncio.Lock] = {}
        self._known_rev: dict[str, int] = {}  # revision of the status doc our state reflects
        self._last_view: dict[str, dict[str, Any]] = {}
        self._last_pub: dict[str, float] = {}
        self._surge_pub: dict[str, tuple[bool, float]] = {}
        self._rejection_logged: dict[tuple[str, str], float] = {}
        self._stale_logged: dict[str, float] = {}
        self._last_flush = clock()
        self._flush_lock = asyncio.Lock()
        self._start_lock = asyncio.Lock()
        self._started = False
        self._closed = False
        self._not_ready: list[tuple[str, float, dict[str, Any]]] = []  # failure-log entries still to write
        self._not_ready_writer: asyncio.Task[None] | None = None
        self._dropping: set[asyncio.Task[None]] = set()  # deleted clusters' status documents being dropped

    # -- lifecycle ---------------------------------------------------------------------------

    async def start(self) -> None:
        """Open the series file and start the watch caches (idempotent)."""
        async with self._start_lock:
            if self._started:
                return
            self._closed = False
            await self.series()
            await self.fleet.start()
            self._started = True

    async def series(self) -> MetricHistory:
        """The metric history backend the settings choose (opened on first use)."""
        if self._closed:
            raise RuntimeError("monitoring is shut down")
        if self._series is None:
            s = self.settings
            history = await open_history(
                s.historyBackend, path=Path(s.historyPath) if s.historyPath else self.data_dir / "history.db",
                prometheus_url=s.historyPrometheusUrl, labels=s.historyPrometheusLabels, clock=self.clock,
                grace_s=int(max(300.0, s.staleAfterSeconds)),
                on_drop=lambda reason, n: self.metrics.history_dropped.labels(reason).inc(n))
            if self._series is None:
                self._series = history
            else:
                await history.close()
        return self._series

    async def close(self) -> None:
        with contextlib.suppress(Exception):
            await self.flush(force=True)
        self._closed = True
        await self.fleet.stop()
        if self._not_ready_writer is not None:
            await stop_tasks([self._not_ready_writer])
        await self.history.aclose()
        if self._series is not None:
            await self._series.close()
            self._series = None
        self._started = False

    # -- clusters ----------------------------------------------------------------------------

    async def cluster(self, name: str) -> ClusterInfo | None:
        info = self.fleet.clusters.get(name)
        if info is not None:
            return info
        kv = await self.store.get(CLUSTER.key(name))  # registered a moment ago, watch not there yet
        return None if kv is None else decode_cluster(kv)

    def water_level_limit(self, cluster: str) -> float:
        info = self.fleet.clusters.get(cluster)
        if info is not None and info.water_level_limit is not None:
            return info.water_level_limit
        return self.settings.waterLevelLimit

    def _on_cluster_change(self, name: str, old: ClusterInfo | None, new: ClusterInfo | None) -> None:
        if new is None:
            self.forget(name)
            entry = self.fleet.statuses.get(name)
            if entry is not None:  # a cluster registered again under the name starts with no status of its own
                task = asyncio.create_task(self._drop_status(name, entry.revision), name=f"drop-status-{name}")
                self._dropping.add(task)
                task.add_done_callback(self._dropping.discard)
            return
        if old is not None and old.ready is not False and new.ready is False:
            when = self.clock()
            since = _ready_transition(new)
            self._not_ready.append((name, since or when, {"conditions": _conditions(new)}))
            if self._not_ready_writer is None or self._not_ready_writer.done():
                self._not_ready_writer = asyncio.create_task(self._write_not_ready(), name="failure-log-not-ready")

    async def _drop_status(self, name: str, revision: int) -> None:
        """The deleted cluster's status document, unless a report rewrote it since (the name registered again)."""
        with contextlib.suppress(CasFailed):
            await self.store.delete(status_key(name), expect_revision=revision)

    async def _write_not_ready(self) -> None:
        """The failure log's NotReady entries, written off the clusters' watch: awaited in its handler, each
        write held every informer of the clusters behind it, and when 10,000 members failed together the
        controllers saw them turn NotReady at ~17 a second (the health controller's own writes lagged and
        lost their compare-and-swap)."""
        while self._not_ready:
            batch, self._not_ready = self._not_ready, []
            await each_bounded(batch, self._log_not_ready, 16)

    async def _log_not_ready(self, entry: tuple[str, float, dict[str, Any]]) -> None:
        name, ts, details = entry
        await self._log_failure("ClusterNotReady", f"cluster {name} lost readiness", cluster=name, ts=ts,
                                details=details, dedup=f"{name}-notready")

    def forget(self, cluster: str) -> None:
        self.pipeline.forget(cluster)
        self.limits.forget(cluster)
        self.forecaster.forget(cluster)
        for d in (self._known_rev, self._last_view, self._last_pub, self._surge_pub, self._stale_logged):
            d.pop(cluster, None)

    # -- ingest ------------------------------------------------------------------------------

    async def ingest(self, report: MetricsReport, source: Source = "push", *,
                     store: Store | None = None) -> IngestOutcome:
        """Apply one report; the caller has checked that the cluster exists and may report.
        ``store``: write through this view of the store instead (a single-active collector's fence)."""
        t0 = time.perf_counter()
        cluster = report.cluster
        threshold_events: list[ThresholdEvent] = []
        sustained: list[SustainedEvent] = []
        lock = self._locks.setdefault(cluster, asyncio.Lock())
        async with lock:
            await self._sync(cluster)
            now = self.clock()
            res = self.pipeline.ingest(report, now, source)
            if res.rejection is not None:
                self.metrics.reports.labels(source, res.rejection.code).inc()
                await self._log_rejection(cluster, res.rejection.code, res.rejection.reason, source)
                return IngestOutcome(cluster, False, rejection=res.rejection)
            assert res.status is not None and res.visible is not None
            self.metrics.reports.labels(source, "accepted").inc()
            threshold_events = list(res.events)
            limit_events, limit_sustained = self.limits.observe(res.status, self.water_level_limit(cluster))
            threshold_events += limit_events
            if limit_sustained is not None:
                sustained.append(limit_sustained)
            published = await self._publish_status(cluster, res.status, report, now, store or self.store)
            if published is None:
                self.fleet.report_accepted()
        outcome = IngestOutcome(
            cluster, True,
            water_level=res.status.water_level,
            visible_water_level=self.pipeline.visible[cluster].water_level if cluster in self.pipeline.visible
            else None,
            clock_skew_clamped=res.status.clock_skew_clamped,
            published=published,
            events=len(threshold_events) + len(sustained),
        )
        if threshold_events or sustained:
            await self._publish_events(cluster, threshold_events, sustained, store)
        if res.surge is not None:
            await self._publish_surge(res.surge, store or self.store)
        # A local file is flushed inline too; a remote history only by the maintenance loop, so a
        # slow or unreachable Prometheus never delays the answer to a report.
        if self.settings.historyBackend == "sqlite" and \
                self.clock() - self._last_flush >= self.settings.flushIntervalSeconds:
            await self.flush()
        self.metrics.ingest_seconds.observe(time.perf_counter() - t0)
        return outcome

    async def _sync(self, cluster: str) -> None:
        """Make this process's state for ``cluster`` reflect the latest stored status document."""
        known = self._known_rev.get(cluster)
        entry = self.fleet.status(cluster)
        if known is None and entry is None and not self.fleet.synced:
            kv = await self.store.get(status_key(cluster))
            entry = decode_status(kv) if kv is not None else None
        if known is None:
            if entry is not None:
                self._seed(entry, first=True)
            self._known_rev[cluster] = entry.revision if entry is not None else 0
        elif entry is not None and entry.revision > known:
            self._seed(entry, first=False)

    def _seed(self, entry: StatusEntry, *, first: bool) -> None:
        """Continue from a stored document: rate control from the visible values it holds,
        threshold state from them too (so a restart doesn't announce old crossings again)."""
        self._known_rev[entry.cluster] = entry.revision
        st = entry.status
        if st is None:
            return
        c = entry.cluster
        normaliser = self.pipeline.normaliser
        if isinstance(normaliser, _SeedableNormaliser):
            normaliser.seed(st)
        damper = self.pipeline.damper
        damper.forget(c)
        visible, _ = damper.apply(st, entry.published_at)
        self.pipeline.visible[c] = visible
        view = entry.doc.get("status")
        if isinstance(view, dict):
            self._last_view[c] = comparable(view)
        self._last_pub[c] = entry.published_at
        self.pipeline.thresholds.observe_status(st)
        if first:
            self.limits.observe(st, self.water_level_limit(c))
            self.pipeline.surge.observe_status(st)

    async def _publish_status(self, cluster: str, raw: NormalisedStatus, report: MetricsReport,
                              now: float, store: Store) -> str | None:
        """Write the status document if the visible view changed or a heartbeat is due (CAS)."""
        dumped = report.model_dump(mode="json")  # once: a lost compare-and-swap changes only the visible view

        async def attempt(_n: int) -> str | None:
            visible = self.pipeline.visible[cluster]
            doc = build_doc(visible, dumped, now, raw)
            cmp = comparable(doc["status"])
            if cmp != self._last_view.get(cluster):
                reason = "changed"
            elif now - self._last_pub.get(cluster, -1e18) >= self.settings.heartbeatSeconds:
                reason = "heartbeat"
            else:
                self.metrics.suppressed.inc()
                return None
            known = self._known_rev.get(cluster, 0)
            try:
                rev = await store.put(status_key(cluster), jsondoc.dumps(doc), expect_revision=known)
            except CasFailed as e:
                cur = decode_status(e.current) if e.current is not None else None
                if cur is None:  # the document was deleted: write it again in full
                    self._known_rev[cluster] = 0
                    self._last_view.pop(cluster, None)
                    raise
                self._seed(cur, first=False)
                if cur.status is not None and cur.status.ts >= raw.ts:
                    return None  # another replica already published a newer report
                visible, _ = self.pipeline.damper.apply(raw, now)
                self.pipeline.visible[cluster] = visible
                raise
            self._known_rev[cluster] = rev
            self._last_view[cluster] = cmp
            self._last_pub[cluster] = now
            self.fleet.observe_status(StatusEntry(cluster, rev, doc, visible, now))
            self.metrics.writes.labels(reason).inc()
            return reason

        try:
            return await read_modify_write(attempt)
        except Conflict:
            log.warning("status of %s not published: too many concurrent writers", cluster)
            return None

    # -- events ------------------------------------------------------------------------------

    async def _publish_events(self, cluster: str, events: list[ThresholdEvent],
                              sustained: list[SustainedEvent], store: Store | None = None) -> None:
        writes = []
        for e in events:
            key = f"{THRESHOLD_EVENTS_PREFIX}{cluster}/{_ns(e.ts)}-{_slug(e.rule)}-{e.direction}"
            body = e.to_dict() | {"kind": "threshold"}
            writes.append(self.leases.put(key, jsondoc.dumps(body), store))
            self.metrics.events.labels("threshold").inc()
            if e.rule == LIMIT_RULE and e.direction == "up":
                writes.append(self._log_failure(
                    "WaterLevelLimitBreached",
                    f"water level {e.value:.2f} reached the limit {e.threshold:.2f}",
                    cluster=cluster, ts=e.ts, details=e.to_dict(), dedup=f"{cluster}-limit-{_ns(e.ts)}"))
        for s in sustained:
            key = f"{SUSTAINED_EVENTS_PREFIX}{cluster}/{_ns(s.ts)}-{s.kind}"
            writes.append(self.leases.put(key, json.dumps(s.to_dict()).encode(), store))
            self.metrics.events.labels(f"sustained-{s.kind}").inc()
            if s.kind == "sustained":
                writes.append(self._log_failure(
                    "SustainedAboveLimit",
                    f"water level above {s.limit:.2f} since {iso(s.since_ts)} ({s.ts - s.since_ts:.0f}s)",
                    cluster=cluster, ts=s.ts, details=s.to_dict(), dedup=f"{cluster}-sustained-{_ns(s.ts)}"))
        results = await asyncio.gather(*writes, return_exceptions=True)
        for res in results:
            if isinstance(res, BaseException):
                log.warning("event write for %s failed: %s", cluster, res)

    async def _publish_surge(self, sig: SurgeSignal, store: Store) -> None:
        """Keep ``/status/surge`` = {"fleet": {...}, "clusters": {name: signal}} for the adjuster;
        only surging clusters are listed, and only material changes are written."""
        c = sig.cluster
        prev = self._surge_pub.get(c)
        if prev is None:
            entry = (self.fleet.surge.get("clusters") or {}).get(c)
            prev = (bool(entry.get("active")), float(entry.get("magnitude", 0.0))) if isinstance(entry, dict) \
                else (False, 0.0)
            self._surge_pub[c] = prev
        cur = (sig.active, round(sig.magnitude, 3))
        if cur[0] == prev[0] and abs(cur[1] - prev[1]) < self.settings.surgeMinChange and \
                (cur[1] == 0.0) == (prev[1] == 0.0):
            return

        async def attempt(_: int) -> None:
            kv = await self.store.get(SURGE_KEY)
            doc: dict[str, Any] = {}
            if kv is not None:
                with contextlib.suppress(ValueError):
                    doc = json.loads(kv.value)
            clusters = dict(doc.get("clusters") or {})
            if sig.active or sig.magnitude > 0:
                clusters[c] = {"active": sig.active, "magnitude": round(sig.magnitude, 3), "signal": sig.signal,
                               "ratio": round(sig.ratio, 3), "zscore": round(sig.zscore, 2), "time": iso(sig.ts)}
            else:
                clusters.pop(c, None)
            new = {"timestamp": iso(self.clock()), "fleet": self._fleet_surge(clusters), "clusters": clusters}
            rev = await store.put(SURGE_KEY, json.dumps(new).encode(),
                                  expect_revision=kv.mod_revision if kv is not None else 0)
            self.fleet.observe_surge(new, rev)
            self._surge_pub[c] = cur
            self.metrics.events.labels("surge").inc()

        with contextlib.suppress(Conflict):  # too many concurrent writers: the next signal writes it
            await read_modify_write(attempt)

    def _fleet_surge(self, clusters: Mapping[str, Any]) -> dict[str, Any]:
        """Traffic-weighted mean magnitude over every cluster with a status (quiet ones count as 0)."""
        num = den = 0.0
        names = set(self.fleet.statuses) | set(clusters)
        for name in names:
            entry = self.fleet.statuses.get(name)
            w = max(entry.status.network_mbps if entry is not None and entry.status is not None else 0.0, 1.0)
            sig = clusters.get(name)
            num += w * (float(sig.get("magnitude", 0.0)) if isinstance(sig, dict) else 0.0)
            den += w
        active = sorted(n for n, s in clusters.items() if isinstance(s, dict) and s.get("active"))
        return {"active": bool(active), "magnitude": round(num / den, 3) if den else 0.0, "clusters": active}

    # -- failure log -------------------------------------------------------------------------

    async def _log_failure(self, kind: str, reason: str, **kw: Any) -> None:
        try:
            await self.failures.append(kind, reason, **kw)
        except Exception as e:  # noqa: BLE001 - the log is best effort; ingest must go on
            log.warning("failure log write (%s) failed: %s", kind, e)

    async def _log_limited(self, kind: str, cluster: str, code: str, reason: str,
                           details: Mapping[str, Any]) -> None:
        """One entry per cluster, kind and code per interval: a broken agent must not flood the store."""
        now = self.clock()
        last = self._rejection_logged.get((cluster, kind + code))
        if last is not None and now - last < self.settings.rejectionLogIntervalSeconds:
            return
        self._rejection_logged[(cluster, kind + code)] = now
        await self._log_failure(kind, reason, cluster=cluster, ts=now, details=details)

    async def _log_rejection(self, cluster: str, code: str, reason: str, source: str,
                             details: Mapping[str, Any] | None = None) -> None:
        await self._log_limited("ReportRejected", cluster, code, reason,
                                {"code": code, "source": source, **(details or {})})

    async def record_collect_failure(self, cluster: str, source: str, error: str) -> None:
        """A pull collector could not read ``cluster`` (logged at most once per interval)."""
        self.metrics.collect_errors.labels(source).inc()
        log.warning("%s collection for %s failed: %s", source, cluster, error)
        await self._log_limited("CollectFailed", cluster, source, f"{source} collection failed: {error[:200]}",
                                {"source": source, "error": error[:1000]})

    async def record_invalid(self, cluster: str, fields: list[dict[str, Any]], source: str = "push") -> None:
        """A report that failed validation (422) — for the failure log."""
        self.metrics.reports.labels(source, "VALIDATION_FAILED").inc()
        await self._log_rejection(cluster, "VALIDATION_FAILED", "report failed validation", source,
                                  {"fields": fields[:10]})

    async def record_domain_event(self, cluster: str, event: Mapping[str, Any]) -> None:
        if event.get("severity") == "critical":
            await self._log_failure("DomainEvent", str(event.get("message") or event.get("type")), cluster=cluster,
                                    details=dict(event))

    # -- maintenance -------------------------------------------------------------------------

    async def flush(self, *, force: bool = False) -> int:
        """Write buffered raw samples to metric history (one transaction / one remote write)."""
        if self._closed or (self._flush_lock.locked() and not force):
            return 0
        async with self._flush_lock:
            self._last_flush = self.clock()
            buf = self.pipeline.take_buffer()
            if not buf:
                return 0
            series = await self.series()
            n = await series.append(buf)
            self.metrics.samples.inc(n)
            return n

    async def maintain_series(self) -> tuple[int, int]:
        series = await self.series()
        return await series.maintain(self.clock())

    async def refresh_forecasts(self) -> int:
        return await self.forecaster.refresh_due(sorted(self.fleet.clusters))

    async def check_staleness(self) -> int:
        """Log ``StaleReports`` once per silence; drop status documents of deregistered clusters."""
        now = self.clock()
        logged = 0
        stale_after = self.settings.staleAfterSeconds
        for name, entry in list(self.fleet.statuses.items()):
            if name not in self.fleet.clusters:
                if self.fleet.synced and now - entry.published_at > 60:  # a deletion this process missed
                    await self._drop_status(name, entry.revision)
                continue
            st = entry.status
            if st is None or now - st.received_ts <= stale_after:
                continue
            if self._stale_logged.get(name) == st.received_ts:
                continue
            self._stale_logged[name] = st.received_ts
            await self._log_failure(
                "StaleReports", f"no report from {name} for {now - st.received_ts:.0f}s (limit {stale_after:.0f}s)",
                cluster=name, ts=st.received_ts + stale_after,
                details={"lastReportAt": iso(st.received_ts), "staleAfterSeconds": stale_after},
                dedup=f"{name}-stale-{int(st.received_ts)}")
            logged += 1
        return logged

    async def prune_history(self) -> int:
        cutoff = self.clock() - self.settings.failureRetentionDays * 86_400
        return await self.failures.prune(cutoff) + await self.operations.prune(cutoff)


def _ready_transition(info: ClusterInfo) -> float | None:
    for cond in _conditions(info):
        if cond.get("type") == "Ready":
            return parse_rfc3339(cond.get("lastTransitionTime"))
    return None


def _conditions(info: ClusterInfo) -> list[dict[str, Any]]:
    return [c for c in info.conditions if isinstance(c, dict)]
