"""Monitoring system core (SPEC A4, F5, F6, C1/C3/C8, S5, API6/API8).

Modules, one concept each:

* `report`       — wire model of PUT /api/v1/metrics and the normalised per-cluster status
* `rate_control` — damping of the scheduler-visible status (no oscillation)
* `thresholds`   — crossing events and "sustained above limit" detection
* `metric_history` — the metric history contract and the choice of backend (SQLite or Prometheus)
* `series`       — SQLite metric history with downsampling; Prometheus range reader
* `prom_history` — metric history in a shared Prometheus (remote-write in, PromQL out)
* `remote_write` — Prometheus remote-write requests (protobuf + snappy)
* `forecast`     — Holt-Winters vs naive baselines; cached `Forecaster`
* `surge`        — traffic surge signal for dynamic weights
* `fleet`        — GET /api/v1/monitor/realtime aggregation
* `pipeline`     — the in-process ingest path wiring the above together
"""
