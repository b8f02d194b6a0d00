"""NSC + CSC (SPEC C1-C3): the network and computing status the steering controller reads.

Network status lives at ``/status/network/<from>/<to>`` (one key per site pair, so a prefix watch
is the subscription); `write_measurements` merges a ``PUT /api/v1/network/status`` into it.
`build_fleet` turns the informers' caches — Clusters, their ``/status/clusters/<name>`` documents,
the network pairs — into the arrays the engine evaluates.

A measurement's ``to`` is a cluster or a site (a city code): the leg from a client site to a
cluster is the pair naming the cluster, else the pair naming its city plus the city → cluster leg
when one is measured. An unmeasured jitter or loss is not checked; an unmeasured delay means no
route there.
"""

from __future__ import annotations

import json
import math
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

import numpy as np

from drods.model import jsondoc
from drods.model import member_status as ms
from drods.model.conditions import is_false
from drods.model.keys import network_key
from drods.model.steering import Measurement
from drods.model.timefmt import parse_rfc3339, rfc3339_ms
from drods.steering.engine import Fleet
from drods.store import Put, Store

_FIELDS = ("delayMs", "jitterMs", "lossPercent", "bandwidthMbps")


MEASURED = "measured"
REPORTED = "reported"
MEASURED_FRESH_SECONDS = 60.0  # a measurement older than this yields to a report


async def write_measurements(store: Store, items: Sequence[Measurement], clock: Callable[[], float] = time.time,
                             ) -> list[dict[str, Any]]:
    """Merge ``items`` into the stored pairs; one transaction per chunk. A pair keeps its latest
    report (``reported``: a later one replaces the fields it carries) and its latest probe result
    (``measured``) apart; the top-level fields are the one that counts — measured while fresh.
    Returns what was stored per pair."""
    merged: dict[str, dict[str, Any]] = {}
    now = clock()
    for m in items:
        key = network_key(m.source_site, m.to)
        if key not in merged:
            kv = await store.get(key)
            merged[key] = _split(json.loads(kv.value)) if kv is not None else {"from": m.source_site, "to": m.to}
        doc = merged[key]
        ts = parse_rfc3339(m.measuredAt or m.timestamp or "") if (m.measuredAt or m.timestamp) else None
        stamp = rfc3339_ms(ts if ts is not None else now)
        if m.source == MEASURED:
            doc[MEASURED] = {"rttMs": m.rttMs if m.rttMs is not None else m.delayMs, "jitterMs": m.jitterMs,
                             "lossRatio": m.lossRatio if m.lossRatio is not None else
                             (m.lossPercent / 100.0 if m.lossPercent is not None else None), "measuredAt": stamp}
        else:
            rep = doc.setdefault(REPORTED, {})
            rep.update(m.values())
            rep["timestamp"] = stamp
            if m.source:
                rep["reporter"] = m.source
    for doc in merged.values():
        _effective(doc, now)
    puts = [Put(k, jsondoc.dumps(v)) for k, v in merged.items()]
    step = max(1, store.max_txn_ops)
    for start in range(0, len(puts), step):
        await store.txn([], puts[start:start + step])
    return list(merged.values())


def _split(doc: dict[str, Any]) -> dict[str, Any]:
    """A pair stored before reports and measurements were kept apart: its fields were a report."""
    if REPORTED not in doc and MEASURED not in doc:
        doc[REPORTED] = {k: doc[k] for k in (*_FIELDS, "timestamp") if k in doc}
        if isinstance(doc.get("source"), str):
            doc[REPORTED]["reporter"] = doc["source"]
    return doc


def _effective(doc: dict[str, Any], now: float) -> None:
    """Top-level fields: the fresh measurement, else the report (``delayMs``/``lossPercent`` kept
    for readers of the report's names; a measured ``delayMs`` is the round trip)."""
    for k in (*_FIELDS, "timestamp", "source", "rttMs", "lossRatio", "measuredAt"):
        doc.pop(k, None)
    meas, rep = doc.get(MEASURED), doc.get(REPORTED)
    at = parse_rfc3339(meas["measuredAt"]) if meas else None
    if meas and (rep is None or (at is not None and now - at <= MEASURED_FRESH_SECONDS)):
        values = {"rttMs": meas.get("rttMs"), "delayMs": meas.get("rttMs"), "jitterMs": meas.get("jitterMs"),
                  "lossRatio": meas.get("lossRatio"),
                  "lossPercent": None if meas.get("lossRatio") is None else meas["lossRatio"] * 100.0,
                  "bandwidthMbps": (rep or {}).get("bandwidthMbps")}
        doc.update({k: v for k, v in values.items() if v is not None})
        doc.update(source=MEASURED, measuredAt=meas["measuredAt"], timestamp=meas["measuredAt"])
        return
    rep = rep or {}
    doc.update({k: rep[k] for k in _FIELDS if k in rep})
    if "lossPercent" in rep:
        doc["lossRatio"] = rep["lossPercent"] / 100.0
    doc.update(source=REPORTED, timestamp=rep.get("timestamp"), measuredAt=rep.get("timestamp"))


def utilisation(doc: Mapping[str, Any] | None) -> float:
    """CPU utilisation 0..1 from a cluster status document (its water level when CPU is absent);
    NaN when unknown."""
    st = (doc or {}).get("status") if isinstance(doc, Mapping) else None
    if not isinstance(st, Mapping):
        return math.nan
    cpu = st.get(ms.CPU) or {}
    used, cap = cpu.get(ms.USED), cpu.get(ms.CAPACITY)
    if isinstance(used, int | float) and isinstance(cap, int | float) and cap > 0:
        return float(min(max(used / cap, 0.0), 1.0))
    wl = st.get(ms.WATER_LEVEL)
    return float(wl) if isinstance(wl, int | float) else math.nan


def _num(doc: Mapping[str, Any], name: str) -> float | None:
    v = doc.get(name)
    return float(v) if isinstance(v, int | float) and not isinstance(v, bool) and math.isfinite(v) else None


def build_fleet(clusters: Mapping[str, Mapping[str, Any]], statuses: Mapping[str, Mapping[str, Any] | None],
                network: Mapping[tuple[str, str], Mapping[str, Any]], clients: Iterable[str]) -> Fleet:
    """``clusters``: name → Cluster object; ``statuses``: name → status document; ``network``:
    (from, to) → stored pair."""
    names = tuple(sorted(clusters))
    client_names = tuple(sorted(set(clients)))
    n_c, n_i = len(client_names), len(names)
    delay = np.full((n_c, n_i), np.inf)
    jitter = np.zeros((n_c, n_i))
    loss = np.zeros((n_c, n_i))
    bandwidth = np.full((n_c, n_i), np.inf)
    util = np.full(n_i, np.nan)
    core_cost = np.zeros(n_i)
    for j, name in enumerate(names):
        obj = clusters[name]
        spec = obj.get("spec") or {}
        util[j] = utilisation(statuses.get(name))
        core_cost[j] = float(((spec.get("cost") or {}).get("cpuCoreHour")) or 0.0)
        if is_false(obj) or (obj.get("metadata") or {}).get("deletionTimestamp"):
            continue  # NotReady or leaving: no route there
        city = spec.get("city")
        tail = network.get((city, name)) if city else None
        for i, client in enumerate(client_names):
            legs = [network.get((client, name))]
            if legs[0] is None and city:
                legs = [network.get((client, city)), tail]
            if legs[0] is None:
                continue
            parts = [leg for leg in legs if leg is not None]
            d = [_num(p, "delayMs") for p in parts]
            if d[0] is None:
                continue
            delay[i, j] = sum(x or 0.0 for x in d)
            jitter[i, j] = sum(_num(p, "jitterMs") or 0.0 for p in parts)
            survive = 1.0
            for p in parts:
                survive *= 1.0 - (_num(p, "lossPercent") or 0.0) / 100.0
            loss[i, j] = (1.0 - survive) * 100.0
            bws = [b for p in parts if (b := _num(p, "bandwidthMbps")) is not None]
            if bws:
                bandwidth[i, j] = min(bws)
    return Fleet(names, client_names, delay, jitter, loss, bandwidth, util, core_cost)
