"""The scheduler's global view (S2): one row per cluster in NumPy arrays, updated incrementally.

Rows are kept dense (``[0, n)``): removing a cluster moves the last row into the hole
(swap-remove), and arrays grow by doubling, so ``upsert_cluster``/``remove_cluster`` are O(1)
amortised in the number of clusters. Plugins read ``[:n]`` views.

Resources are columns ``cpu`` (cores), ``memory`` (GiB), ``gpu`` (count), ``pods`` (count) and
``storage`` (GiB). For each the snapshot holds

* ``alloc``   — allocatable (status ``allocatable``, defaulting to ``capacity``),
* ``load``    — observed load = max(``allocated`` requests, ``used``),
* ``assumed`` — what this scheduler placed and the status does not show yet (S7 assume).

Free = alloc - load - assumed. Missing sections: cpu/memory → 0 capacity; gpu → the GPUs the spec
counts (``spec.gpus``), else 0; pods/storage → unlimited (not enforced). The largest free node
(cpu, memory, gpu) comes from ``largestNodeFree``; when absent the whole free amount is treated
as one node. After assumes the effective largest node is min(observed largest node, cluster free).

Indexes: single-valued attributes (labels, region, zone, provider, city, network identifier) are
int32 code arrays per key with a vocabulary, so ``label == v`` is one vector compare and a key with
10,000 distinct values costs one array, not 10,000 masks; selector/affinity masks built from them
are cached until the topology changes. Multi-valued attributes (capabilities, GPU models, storage
tiers, taints) keep one boolean mask per distinct value, reference-counted and dropped with their
last user. Latency to named sites is one float array per site (NaN = unknown).

GPUs by model and storage by tier are consumed capacities in two ``OfferTable``s (``gpus``,
``tiers``; see ``offers.py``): capacity from the spec or the member's report; load = the member's
reported allocation plus what is assumed where it reports one, else what placed bindings hold.

Water level (SPEC S10): for cpu and memory, fraction_r = (load_r + assumed_r) / alloc_r; the
water level is max(fraction_cpu, fraction_mem). If the status carries ``waterLevel`` it replaces
the observed part: we keep the offset (status waterLevel - observed max fraction) and add it, so
with nothing assumed the water level equals the status value exactly and assumed placements add
on top. A pre-allocation hold (F6) raises the status value to the forecast while it lasts.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Hashable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from drods.model.binding import ReplicaRequirements, TargetCluster
from drods.model.cluster import ClusterSpec
from drods.scheduler.arrays import BoolArr, FloatArr
from drods.scheduler.offers import Cell, Draw, OfferDemand, OfferTable, draw_gpus

OfferDraws = tuple[tuple[Draw, ...], tuple[Draw, ...]]  # (GPU draws, tier draws) of one placement

RESOURCES = ("cpu", "memory", "gpu", "pods", "storage")
CPU, MEM, GPU, PODS, STORAGE = range(5)
NRES = len(RESOURCES)
TOPOLOGY_FIELDS = ("region", "zone", "provider", "city", "network")
SET_FIELDS = ("capability", "gpuModel", "storageTier")
INF = math.inf


def requirement_vector(req: ReplicaRequirements | Sequence[float] | FloatArr) -> FloatArr:
    """Per-replica demand as a resource vector; every replica needs one pod slot."""
    if isinstance(req, ReplicaRequirements):
        return np.array([req.cpu, req.memory, float(req.gpu), 1.0, req.storage], dtype=np.float64)
    vec = np.asarray(req, dtype=np.float64)
    if vec.shape != (NRES,):
        raise ValueError(f"requirement vector must have {NRES} entries {RESOURCES}")
    return vec


@dataclass(slots=True)
class ParsedStatus:
    """A status document reduced to the numbers the scheduler uses."""

    alloc: FloatArr
    load: FloatArr
    largest: FloatArr
    wl_offset: float
    net_mbps: float
    present: bool


def _num(d: Mapping[str, Any], key: str, default: float) -> float:
    v = d.get(key)
    if v is None:
        return default
    try:
        f = float(v)
    except (TypeError, ValueError):
        return default
    return f if math.isfinite(f) and f >= 0 else default


def parse_status(doc: Mapping[str, Any] | None, wl_floor: float | None = None) -> ParsedStatus:
    """Apply the documented defaults to a ``/status/clusters/<name>`` document (any field may miss).

    ``wl_floor`` (a pre-allocation hold's forecast) raises the status water level to at least it."""
    alloc = np.zeros(NRES)
    load = np.zeros(NRES)
    if not doc:
        return ParsedStatus(alloc, load, np.zeros(3), 0.0, 0.0, False)
    for i, key in enumerate(("cpu", "memory", "gpu")):
        sec = doc.get(key)
        if not isinstance(sec, Mapping):
            continue
        cap = _num(sec, "capacity", 0.0)
        alloc[i] = _num(sec, "allocatable", cap)
        allocated = _num(sec, "allocated", 0.0)
        used = _num(sec, "used", allocated)
        load[i] = max(allocated, used)
    pods = doc.get("pods")
    if isinstance(pods, Mapping) and pods.get("capacity") is not None:
        alloc[PODS] = _num(pods, "capacity", INF)
        load[PODS] = _num(pods, "used", 0.0)
    else:
        alloc[PODS] = INF
    st = doc.get("storage")
    if isinstance(st, Mapping) and (st.get("capacity") is not None or st.get("available") is not None):
        avail = _num(st, "available", INF)
        cap = _num(st, "capacity", avail)
        alloc[STORAGE] = cap
        load[STORAGE] = max(0.0, cap - avail) if math.isfinite(avail) else 0.0
    else:
        alloc[STORAGE] = INF
    free3 = np.maximum(alloc[:3] - load[:3], 0.0)
    largest = free3.copy()
    lnf = doc.get("largestNodeFree")
    if isinstance(lnf, Mapping):
        for i, key in enumerate(("cpu", "memory", "gpu")):
            if lnf.get(key) is not None:
                largest[i] = _num(lnf, key, free3[i])
    with np.errstate(divide="ignore", invalid="ignore"):
        frac = np.where(alloc[:2] > 0, load[:2] / np.where(alloc[:2] > 0, alloc[:2], 1.0), 0.0)
    observed = float(frac.max())
    offset = 0.0
    if doc.get("waterLevel") is not None:
        offset = _num(doc, "waterLevel", observed) - observed
    if wl_floor is not None and observed + offset < wl_floor:
        offset = wl_floor - observed
    net = doc.get("network")
    mbps = 0.0
    if isinstance(net, Mapping):
        mbps = _num(net, "inMbps", 0.0) + _num(net, "outMbps", 0.0)
    return ParsedStatus(alloc, load, largest, offset, mbps, True)


@dataclass(slots=True)
class _RowInfo:
    """What a row contributed to the value indexes, so it can be undone on update/remove."""

    labels: dict[str, str] = field(default_factory=dict)
    spec: ClusterSpec | None = None
    sets: list[tuple[str, str]] = field(default_factory=list)
    taints: list[tuple[str, str, str]] = field(default_factory=list)
    latency: list[str] = field(default_factory=list)


PlacementLike = Sequence[TargetCluster] | Sequence[tuple[str, int]]


def _shrunk(old: OfferDraws, new: OfferDraws) -> bool:
    """Whether any (table, cluster, key) cell of ``old`` holds more than in ``new``."""
    for o, n in zip(old, new, strict=True):
        now: dict[tuple[str, str], float] = {}
        for name, k, amount in n:
            now[(name, k)] = now.get((name, k), 0.0) + amount
        before: dict[tuple[str, str], float] = {}
        for name, k, amount in o:
            before[(name, k)] = before.get((name, k), 0.0) + amount
        if any(v > now.get(c, 0.0) + 1e-9 for c, v in before.items()):
            return True
    return False


def _derived(alloc: FloatArr, used: FloatArr, wl_offset: FloatArr,
             largest: FloatArr) -> tuple[FloatArr, FloatArr, FloatArr, FloatArr]:
    """Free amounts, cpu/memory fractions, water levels and effective largest free node of some rows."""
    free = alloc - used
    a2 = alloc[:, :2]
    frac = np.where(a2 > 0, used[:, :2] / np.where(a2 > 0, a2, 1.0), 0.0)
    wl = np.maximum(frac[:, 0], frac[:, 1]) + wl_offset
    return free, frac, wl, np.minimum(largest, np.maximum(free[:, :3], 0.0))


def _names_counts(placement: PlacementLike) -> tuple[tuple[str, ...], tuple[int, ...]]:
    """Cluster names and replica counts of a placement given as objects or (cluster, replicas)."""
    if placement and isinstance(placement[0], tuple):
        pairs: Sequence[tuple[str, int]] = placement  # type: ignore[assignment]
        return tuple(c for c, _ in pairs), tuple(int(k) for _, k in pairs)
    objs: Sequence[TargetCluster] = placement  # type: ignore[assignment]
    return tuple(t.cluster for t in objs), tuple(int(t.replicas) for t in objs)


@dataclass(slots=True)
class _Assumed:
    names: tuple[str, ...]
    counts: tuple[int, ...]
    req: FloatArr


class Snapshot:
    """Global view of the fleet as arrays; see the module docstring for the semantics."""

    def __init__(self, capacity: int = 16) -> None:
        cap = max(1, capacity)
        self._cap = cap
        self.n = 0
        self.index: dict[str, int] = {}
        self.names: list[str] = []
        self.names_arr = np.empty(cap, dtype=object)
        self.alloc = np.zeros((cap, NRES))
        self.load = np.zeros((cap, NRES))
        self.assumed = np.zeros((cap, NRES))
        self.largest = np.zeros((cap, 3))
        self.wl_offset = np.zeros(cap)
        self.net_mbps = np.zeros(cap)
        self.bandwidth = np.full(cap, np.nan)
        self.ready = np.zeros(cap, dtype=bool)
        self.has_status = np.zeros(cap, dtype=bool)
        self.unschedulable = np.zeros(cap, dtype=bool)
        self.limit = np.ones(cap)
        self.cost = np.full((cap, 4), np.nan)  # cpuCoreHour, memoryGiBHour, gpuHour, egressGiB
        # single-valued topology fields → integer codes (-1 = unset) with a vocabulary each
        self.topo: dict[str, np.ndarray] = {f: np.full(cap, -1, dtype=np.int32) for f in TOPOLOGY_FIELDS}
        self.vocab: dict[str, dict[str, int]] = {f: {} for f in TOPOLOGY_FIELDS}
        self.label_codes: dict[str, np.ndarray] = {}
        self.label_vocab: dict[str, dict[str, int]] = {}
        # multi-valued attributes → one boolean mask per distinct value
        self.sets: dict[str, dict[str, np.ndarray]] = {f: {} for f in SET_FIELDS}
        self.taints: dict[tuple[str, str, str], np.ndarray] = {}
        # latency (ms) from each cluster to a named site/cluster, NaN when unknown (cluster profiles)
        self.latency: dict[str, np.ndarray] = {}
        # F1/C2: measured network pairs (``PUT /api/v1/network/status``) by site or cluster name, both
        # directions: {a: {b: ms}} and {a: {b: Mbps}}; measured values win over the profiles
        self.measured_latency: dict[str, dict[str, float]] = {}
        self.measured_bandwidth: dict[str, dict[str, float]] = {}
        # H2: per workload class, the cpu cores each cluster gives that class's placed replicas
        self.class_cores: dict[str, np.ndarray] = {}
        self.class_placements: dict[str, tuple[str, tuple[tuple[str, float], ...]]] = {}
        # H1: decayed bytes/s between workloads ({workload: {peer: bytes/s}}, ``drods.model.traffic``)
        # and where each workload ("namespace/name") runs now, by cluster name
        self.traffic: dict[str, dict[str, float]] = {}
        self.workload_placements: dict[str, tuple[tuple[str, int], ...]] = {}
        # F3: the primary cluster of each workload placed with a stateful topology (followers go there)
        self.workload_primaries: dict[str, str] = {}
        # F4: each Dataset ("namespace/name") → the clusters holding a copy of it
        self.datasets: dict[str, tuple[str, ...]] = {}
        # F3/F4: each Dataset's Primary copy, when it names one (a stateful topology's primary goes there)
        self.dataset_primaries: dict[str, str] = {}
        # F1: GPUs by model and storage GiB by tier, and what each placed binding holds of them
        self.gpus = OfferTable(cap)
        self.tiers = OfferTable(cap)
        self.offer_placements: dict[str, OfferDraws] = {}  # held while placed, by binding key
        self.offer_assumed: dict[str, OfferDraws] = {}  # assumed with the cpu/memory of ``assume``
        self._rows: list[_RowInfo] = []
        self._refs: dict[tuple[str, ...], int] = {}
        self._assumed: dict[str, _Assumed] = {}
        self.signals: dict[str, float] = {}
        # ``version`` changes on every mutation; ``topology_version`` only when labels/spec change,
        # so caches of label/affinity/taint masks survive a burst of assumes.
        self.version = 0
        self.topology_version = 0
        self._derived_version = -1
        self._free: FloatArr = np.zeros((0, NRES))
        self._frac: FloatArr = np.zeros((0, 2))
        self._wl: FloatArr = np.zeros(0)
        self._largest_eff: FloatArr = np.zeros((0, 3))
        self.cache: dict[Any, Any] = {}
        # values derived from status and spec but not from assumed placements (per-shape
        # constants of the capacity plugins): kept across assume/forget, dropped on any other change
        self.status_cache: dict[Any, Any] = {}

    # ------------------------------------------------------------------ storage management
    def _grow(self) -> None:
        new = self._cap * 2

        def g(a: np.ndarray, fill: Any = 0) -> np.ndarray:
            shape = (new,) + a.shape[1:]
            b = np.full(shape, fill, dtype=a.dtype)
            b[: self._cap] = a
            return b

        self.names_arr = g(self.names_arr, None)
        for attr in ("alloc", "load", "assumed", "largest", "wl_offset", "net_mbps"):
            setattr(self, attr, g(getattr(self, attr)))
        self.bandwidth = g(self.bandwidth, np.nan)
        self.cost = g(self.cost, np.nan)
        self.ready = g(self.ready, False)
        self.has_status = g(self.has_status, False)
        self.unschedulable = g(self.unschedulable, False)
        self.limit = g(self.limit, 1.0)
        self.topo = {k: g(v, -1) for k, v in self.topo.items()}
        self.label_codes = {k: g(v, -1) for k, v in self.label_codes.items()}
        self.sets = {f: {k: g(v, False) for k, v in d.items()} for f, d in self.sets.items()}
        self.taints = {k: g(v, False) for k, v in self.taints.items()}
        self.latency = {k: g(v, np.nan) for k, v in self.latency.items()}
        self.class_cores = {k: g(v, 0.0) for k, v in self.class_cores.items()}
        self.gpus.grow(new)
        self.tiers.grow(new)
        self._cap = new

    def _touch(self, topology: bool) -> None:
        self.version += 1
        self.status_cache.clear()
        if topology:
            self.topology_version += 1
            self.cache.clear()

    # ------------------------------------------------------------------ GPUs and storage by tier (F1)
    def gpu_performance(self, model: str | None) -> FloatArr:
        """Best relative GPU performance per cluster (of ``model`` when named); NaN when its spec
        gives none. One column (or a row-wise max over the models), cached per topology version."""
        key = ("gpu-performance", model)
        hit = self.cache.get(key)
        if hit is not None:
            return hit  # type: ignore[no-any-return]
        perf = self.gpus.perf[: self.n]
        col = None if model is None else self.gpus.keys.get(model)
        if (model is not None and col is None) or perf.shape[1] == 0:
            out = np.full(self.n, np.nan)
        elif col is not None:
            out = perf[:, col].copy()
        else:
            out = np.fmax.reduce(perf, axis=1)  # NaN only where every model's is
        self.cache[key] = out
        return out  # type: ignore[no-any-return]

    def tier_capacity(self, tier: str) -> FloatArr:
        """Capacity (GiB) of storage ``tier`` per cluster as its spec states it; NaN when it does not."""
        col = self.tiers.keys.get(tier)
        if col is None:
            return np.full(self.n, np.nan)
        return self.tiers.spec_cap[: self.n, col].copy()

    # ------------------------------------------------------------------ network (F1, C2)
    def set_network_pair(self, a: str, b: str, delay_ms: float | None, bandwidth_mbps: float | None) -> None:
        """A measured pair (either end a site or a cluster); None clears that metric."""
        for table, v in ((self.measured_latency, delay_ms), (self.measured_bandwidth, bandwidth_mbps)):
            for x, y in ((a, b), (b, a)):
                if v is None:
                    row = table.get(x)
                    if row is not None:
                        row.pop(y, None)
                        if not row:
                            del table[x]
                else:
                    table.setdefault(x, {})[y] = float(v)
        self._touch(True)

    def latency_array(self, target: str) -> FloatArr | None:
        """Latency (ms) from each cluster to ``target`` (a site or cluster): measured where a pair
        was measured, else the clusters' profiles; None when nothing is known."""
        base = self.latency.get(target)
        meas = self.measured_latency.get(target)
        if not meas:
            return base
        key = ("latency-array", target)
        hit = self.cache.get(key)
        if hit is not None:
            return hit  # type: ignore[no-any-return]
        arr = base.copy() if base is not None else np.full(self._cap, np.nan)
        for name, ms in meas.items():
            row = self.index.get(name)
            if row is not None:
                arr[row] = ms
        self.cache[key] = arr
        return arr

    def bandwidth_between(self, row: int) -> FloatArr:
        """Mbps between cluster ``row`` and every cluster: the measured pair when there is one, else
        the narrower of the two profiles' ``bandwidthMbps`` (NaN when unknown)."""
        n = self.n
        key = ("bandwidth-between", row)
        hit = self.cache.get(key)
        if hit is not None:
            return hit  # type: ignore[no-any-return]
        bw = np.fmin(self.bandwidth[:n], self.bandwidth[row])
        both = ~np.isnan(self.bandwidth[:n]) & ~np.isnan(self.bandwidth[row])
        bw = np.where(both, bw, np.nan)
        meas = self.measured_bandwidth.get(self.names[row])
        if meas:
            for name, mbps in meas.items():
                r = self.index.get(name)
                if r is not None:
                    bw[r] = mbps
        self.cache[key] = bw
        return bw  # type: ignore[no-any-return]

    def _code(self, vocab: dict[str, int], value: str) -> int:
        c = vocab.get(value)
        if c is None:
            c = len(vocab)
            vocab[value] = c
        return c

    def _ref(self, key: tuple[str, ...], delta: int) -> int:
        c = self._refs.get(key, 0) + delta
        if c <= 0:
            self._refs.pop(key, None)
            return 0
        self._refs[key] = c
        return c

    def _clear_indexes(self, row: int) -> None:
        info = self._rows[row]
        for key in info.labels:
            self.label_codes[key][row] = -1
        for f, v in info.sets:
            self.sets[f][v][row] = False
            if self._ref(("set", f, v), -1) == 0:
                del self.sets[f][v]
        for t in info.taints:
            self.taints[t][row] = False
            if self._ref(("taint", *t), -1) == 0:
                del self.taints[t]
        for target in info.latency:
            self.latency[target][row] = np.nan
            if self._ref(("lat", target), -1) == 0:
                del self.latency[target]
        for f in TOPOLOGY_FIELDS:
            self.topo[f][row] = -1

    def _set_indexes(self, row: int, labels: Mapping[str, str], spec: ClusterSpec) -> None:
        info = _RowInfo(labels=dict(labels), spec=spec)
        for key, value in labels.items():
            codes = self.label_codes.get(key)
            if codes is None:
                codes = np.full(self._cap, -1, dtype=np.int32)
                self.label_codes[key] = codes
                self.label_vocab[key] = {}
            codes[row] = self._code(self.label_vocab[key], value)
        topo_values = {
            "region": spec.region,
            "zone": spec.zone,
            "provider": spec.provider,
            "city": spec.city,
            "network": spec.network.identifier if spec.network else None,
        }
        for f, v in topo_values.items():
            if v is not None:
                self.topo[f][row] = self._code(self.vocab[f], v)
        for f, values in (
            ("capability", spec.capabilities),
            ("gpuModel", [*spec.gpuModels, *(g.model for g in spec.gpus)]),
            ("storageTier", [*spec.storageTiers, *(t.tier for t in spec.storage)]),
        ):
            for v in dict.fromkeys(values):
                m = self.sets[f].get(v)
                if m is None:
                    m = np.zeros(self._cap, dtype=bool)
                    self.sets[f][v] = m
                m[row] = True
                self._ref(("set", f, v), 1)
                info.sets.append((f, v))
        for t in spec.taints:
            tk = (t.key, t.value, t.effect)
            if tk in info.taints:
                continue
            m = self.taints.get(tk)
            if m is None:
                m = np.zeros(self._cap, dtype=bool)
                self.taints[tk] = m
            m[row] = True
            self._ref(("taint", *tk), 1)
            info.taints.append(tk)
        if spec.network:
            for target, ms in spec.network.latencyMs.items():
                arr = self.latency.get(target)
                if arr is None:
                    arr = np.full(self._cap, np.nan)
                    self.latency[target] = arr
                arr[row] = ms
                self._ref(("lat", target), 1)
                info.latency.append(target)
        self.gpus.set_spec(row, [(g.model, float(g.count), g.relativePerformance) for g in spec.gpus])
        self.tiers.set_spec(row, [(t.tier, t.capacityGiB, math.nan) for t in spec.storage])
        self._rows[row] = info

    # ------------------------------------------------------------------ public mutation API
    def upsert_cluster(
        self,
        name: str,
        labels: Mapping[str, str] | None,
        spec: ClusterSpec | Mapping[str, Any] | None,
        ready: bool,
        status: Mapping[str, Any] | None,
        wl_floor: float | None = None,
    ) -> int:
        """Add or replace one cluster; returns its row. O(1) amortised (plus its own labels/taints)."""
        if spec is None:
            spec = ClusterSpec()
        elif not isinstance(spec, ClusterSpec):
            spec = ClusterSpec.model_validate(spec)
        labels = labels or {}
        row = self.index.get(name)
        topology_changed = True
        if row is None:
            if self.n == self._cap:
                self._grow()
            row = self.n
            self.n += 1
            self.index[name] = row
            self.names.append(name)
            self.names_arr[row] = name
            self._rows.append(_RowInfo())
        else:
            prev = self._rows[row]
            topology_changed = prev.labels != dict(labels) or prev.spec != spec
            if topology_changed:
                self._clear_indexes(row)
        if topology_changed:
            self._set_indexes(row, labels, spec)
        self.unschedulable[row] = spec.unschedulable
        self.limit[row] = spec.waterLevelLimit if spec.waterLevelLimit is not None else 1.0
        if spec.cost is not None:
            c = spec.cost
            self.cost[row] = (c.cpuCoreHour, c.memoryGiBHour, c.gpuHour, c.egressGiB)
        else:
            self.cost[row] = np.nan
        bw = spec.network.bandwidthMbps if spec.network else None
        self.bandwidth[row] = np.nan if bw is None else bw
        self.ready[row] = bool(ready)
        self.set_status(name, status, wl_floor, _touch=False)
        self._touch(topology_changed)
        return row

    def set_status(self, name: str, status: Mapping[str, Any] | None, wl_floor: float | None = None, *,
                   _touch: bool = True) -> None:
        """Replace only the observed status of a known cluster (the hot update from monitoring)."""
        row = self.index[name]
        p = parse_status(status, wl_floor)
        gpu_sec = status.get("gpu") if status else None
        if not (isinstance(gpu_sec, Mapping) and (gpu_sec.get("capacity") is not None
                                                  or gpu_sec.get("allocatable") is not None)):
            spec = self._rows[row].spec
            total = float(sum(g.count for g in spec.gpus)) if spec is not None else 0.0
            if total > 0:  # F1: a member silent on GPUs has the ones its spec counts
                p.alloc[GPU] = total
                p.largest[GPU] = total
        self.alloc[row] = p.alloc
        self.load[row] = p.load
        self.largest[row] = p.largest
        self.wl_offset[row] = p.wl_offset
        self.net_mbps[row] = p.net_mbps
        self.has_status[row] = p.present
        self.gpus.set_status(row, status.get("gpuByModel") if status else None)
        self.tiers.set_status(row, status.get("storageByTier") if status else None)
        if _touch:
            self._touch(False)

    def set_ready(self, name: str, ready: bool) -> None:
        self.ready[self.index[name]] = bool(ready)
        self._touch(False)

    def remove_cluster(self, name: str) -> None:
        """Drop a cluster by moving the last row into its place (O(1) amortised)."""
        row = self.index.pop(name)
        last = self.n - 1
        self._clear_indexes(row)
        # copy on write: decisions keep views of ``names_arr`` to name their clusters later
        self.names_arr = self.names_arr.copy()
        if row != last:
            moved = self.names[last]
            info = self._rows[last]
            for a in (self.alloc, self.load, self.assumed, self.largest, self.cost):
                a[row] = a[last]
            for v in (self.wl_offset, self.net_mbps, self.bandwidth, self.ready, self.has_status,
                      self.unschedulable, self.limit):
                v[row] = v[last]
            for f in TOPOLOGY_FIELDS:
                self.topo[f][row] = self.topo[f][last]
            for key in info.labels:
                self.label_codes[key][row] = self.label_codes[key][last]
                self.label_codes[key][last] = -1
            for sf, sv in info.sets:
                self.sets[sf][sv][row] = True
                self.sets[sf][sv][last] = False
            for t in info.taints:
                self.taints[t][row] = True
                self.taints[t][last] = False
            for target in info.latency:
                self.latency[target][row] = self.latency[target][last]
                self.latency[target][last] = np.nan
            for arr in self.class_cores.values():
                arr[row] = arr[last]
            self.gpus.move(row, last)
            self.tiers.move(row, last)
            self._rows[row] = info
            self.names[row] = moved
            self.names_arr[row] = moved
            self.index[moved] = row
        for f in TOPOLOGY_FIELDS:
            self.topo[f][last] = -1
        for arr in self.class_cores.values():
            arr[last] = 0.0
        self.gpus.clear(last)
        self.tiers.clear(last)
        self.alloc[last] = 0
        self.load[last] = 0
        self.assumed[last] = 0
        self.names_arr[last] = None
        self.ready[last] = False
        self.has_status[last] = False
        self._rows.pop()
        self.names.pop()
        self.n -= 1
        self._touch(True)

    def __len__(self) -> int:
        return self.n

    def __contains__(self, name: object) -> bool:
        return name in self.index

    def row_spec(self, name: str) -> ClusterSpec | None:
        return self._rows[self.index[name]].spec

    def spec_column(self, key: Hashable, fn: Callable[[ClusterSpec], float]) -> FloatArr:
        """``fn`` of each row's ClusterSpec as one array (NaN without a spec), built once per
        topology version: the seldom-read spec facts (GPU price of one model, spot market) cost
        one pass per spec change, not one per decision, and need no array of their own here."""
        ck = ("spec_column", key)
        hit = self.cache.get(ck)
        if hit is None or hit.shape[0] != self.n:
            hit = np.array([np.nan if r.spec is None else fn(r.spec) for r in self._rows[: self.n]],
                           dtype=np.float64)
            self.cache[ck] = hit
        return hit  # type: ignore[no-any-return]

    # ------------------------------------------------------------------ workload classes (H2)
    def set_dataset(self, name: str, obj: Mapping[str, Any] | None) -> None:
        """F4: where Dataset ``name`` ("namespace/name") has copies and which is its Primary, from the
        stored object (None: gone); DataLocality and a stateful topology's primary read them."""
        locs = [loc for loc in ((obj or {}).get("spec") or {}).get("locations") or []
                if isinstance(loc, dict) and loc.get("cluster")] if isinstance(obj, Mapping) else None
        if locs is None:
            self.datasets.pop(name, None)
            self.dataset_primaries.pop(name, None)
            return
        self.datasets[name] = tuple(str(loc["cluster"]) for loc in locs)
        primary = next((str(loc["cluster"]) for loc in locs if loc.get("kind") == "Primary"), None)
        if primary is None:
            self.dataset_primaries.pop(name, None)
        else:
            self.dataset_primaries[name] = primary

    def set_class_placement(self, key: str, cls: str | None, placement: Sequence[tuple[str, int]],
                            cores_per_replica: float) -> None:
        """Record where workload ``key`` of class ``cls`` runs (replacing what it had), so the
        Dissonance score sees the classes already on each cluster; no class → nothing kept."""
        self.drop_class_placement(key)
        if not cls or cores_per_replica <= 0:
            return
        arr = self.class_cores.get(cls)
        if arr is None:
            arr = np.zeros(self._cap)
            self.class_cores[cls] = arr
        kept: list[tuple[str, float]] = []
        for name, count in placement:
            row = self.index.get(name)
            if row is None or count <= 0:
                continue
            cores = count * cores_per_replica
            arr[row] += cores
            kept.append((name, cores))
        if kept:
            self.class_placements[key] = (cls, tuple(kept))

    def drop_class_placement(self, key: str) -> None:
        prev = self.class_placements.pop(key, None)
        if prev is None:
            return
        arr = self.class_cores.get(prev[0])
        if arr is None:
            return
        for name, cores in prev[1]:
            row = self.index.get(name)
            if row is not None:
                arr[row] = max(0.0, arr[row] - cores)

    # ------------------------------------------------------------------ assume / forget (S7)
    def assume(
        self,
        placement: PlacementLike,
        requirements: ReplicaRequirements | Sequence[float] | FloatArr,
        key: str | None = None,
        demand: OfferDemand | None = None,
        hold: bool = True,
    ) -> None:
        """Count a placement at once, before member status reflects it (S7).

        With ``key`` the placement is remembered so ``forget(key=...)`` can undo it; a second
        assume under the same key replaces the first (the workload was rescheduled). With a key,
        GPUs by model and storage by tier (``demand``, else that of ``requirements``) are assumed
        too, and with ``hold`` the placement holds them (``place_offers``) until ``forget``.
        """
        req = requirement_vector(requirements)
        if key is not None:
            self.forget(key=key, offers=False)
        names, counts = _names_counts(placement)
        self._apply(names, counts, req, 1.0)
        if key is not None:
            self._assumed[key] = _Assumed(names, counts, req)
            if demand is None and isinstance(requirements, ReplicaRequirements) and \
                    (requirements.gpu or requirements.storageTier):
                demand = OfferDemand.of(requirements)
            if demand is not None:
                pairs = tuple(zip(names, counts, strict=True))
                self.offer_assumed[key] = self._draw(pairs, demand, "assumed")
                if hold:
                    self.place_offers(key, pairs, demand)
            elif hold and key in self.offer_placements and isinstance(requirements, ReplicaRequirements):
                self.drop_offers(key)  # the same key without such needs any more

    def forget(
        self,
        placement: PlacementLike | None = None,
        requirements: ReplicaRequirements | Sequence[float] | FloatArr | None = None,
        *,
        key: str | None = None,
        offers: bool = True,
    ) -> bool:
        """Undo an assume: by ``key`` (with the GPUs and tier storage it holds unless ``offers`` is
        False), or by giving the same placement and requirements again (cpu, memory, ... only)."""
        if key is not None:
            if self.offer_assumed:
                drew = self.offer_assumed.pop(key, None)
                if drew is not None:
                    self._undraw(drew, "assumed")
            if offers and key in self.offer_placements:
                self.drop_offers(key)
            rec = self._assumed.pop(key, None)
            if rec is None:
                return False
            self._apply(rec.names, rec.counts, rec.req, -1.0)
            return True
        if placement is None or requirements is None:
            raise ValueError("forget needs a key or both placement and requirements")
        self._apply(*_names_counts(placement), requirement_vector(requirements), -1.0)
        return True

    # ------------------------------------------------------------------ GPUs by model, storage by tier
    def _draw(self, placement: Sequence[tuple[str, int]], demand: OfferDemand, which: Cell) -> OfferDraws:
        """Add what ``placement`` takes of the offer tables to their ``which`` cells; returns the draws."""
        n = self.n
        gpu: list[Draw] = []
        tier: list[Draw] = []
        for name, count in placement:
            row = self.index.get(name)
            if row is None or count <= 0:
                continue
            if demand.uses_gpus:
                for model, amount in draw_gpus(self.gpus, demand, row, n, count, which):
                    self.gpus.add(which, row, model, amount)
                    gpu.append((name, model, amount))
            if demand.storage_tier is not None and demand.uses_tier and demand.storage_tier in self.tiers.keys:
                amount = count * demand.storage_gib
                self.tiers.add(which, row, demand.storage_tier, amount)
                tier.append((name, demand.storage_tier, amount))
        return tuple(gpu), tuple(tier)

    def _undraw(self, draws: OfferDraws, which: Cell) -> None:
        for table, part in zip((self.gpus, self.tiers), draws, strict=True):
            for name, k, amount in part:
                row = self.index.get(name)
                if row is not None:
                    table.add(which, row, k, -amount)

    def place_offers(self, key: str, placement: Sequence[tuple[str, int]], demand: OfferDemand | None) -> bool:
        """Binding ``key`` holds ``demand`` per replica of ``placement`` (replacing what it held):
        GPUs drawn from its eligible models, GiB from its tier, on every cluster it is placed on.
        This is the load of clusters whose member reports no per-model / per-tier allocation.
        True when some cluster now holds less of it than before (room for parked bindings)."""
        old = self.offer_placements.get(key)
        if demand is None and old is None:
            return False
        self.drop_offers(key)
        draws: OfferDraws = ((), ())
        if demand is not None:
            draws = self._draw(placement, demand, "placed")
            if draws[0] or draws[1]:
                self.offer_placements[key] = draws
        self._bump()
        return old is not None and _shrunk(old, draws)

    def drop_offers(self, key: str) -> None:
        """Binding ``key`` holds no GPUs or tier storage any more (deleted, or placed anew)."""
        held = self.offer_placements.pop(key, None)
        if held is not None:
            self._undraw(held, "placed")
            self._bump()

    def _bump(self) -> None:
        """A change no derived cpu/memory view depends on: a new version, the views stay fresh."""
        fresh = self._derived_version == self.version
        self.version += 1
        if fresh:
            self._derived_version = self.version

    def assumed_keys(self) -> list[str]:
        return list(self._assumed)

    def _apply(self, names: Sequence[str], counts: Sequence[int], req: FloatArr, sign: float) -> None:
        idx = self.index
        fresh = self._derived_version == self.version
        rows: list[int] = []
        cs: list[int] = []
        for name, c in zip(names, counts, strict=True):
            row = idx.get(name)
            if row is None or c == 0:
                continue
            rows.append(row)
            cs.append(c)
        self.version += 1
        if not rows:
            if fresh:
                self._derived_version = self.version
            return
        r = np.asarray(rows, dtype=np.intp)
        if len(rows) > 8 and r.size == len(set(rows)):  # many clusters (Duplicated): one array update
            a = self.assumed[r] + (sign * np.asarray(cs, dtype=np.float64))[:, None] * req
            if sign < 0:
                np.maximum(a, 0.0, out=a)
            self.assumed[r] = a
        else:  # a few clusters, or one named twice: one row at a time, as given
            for row, c in zip(rows, cs, strict=True):
                a = self.assumed[row]
                a += (sign * c) * req
                if sign < 0:
                    np.maximum(a, 0.0, out=a)
        if fresh:
            # An assume touches a few rows: refresh just those instead of every row on next read.
            self._derive_rows(r)
            self._derived_version = self.version

    # ------------------------------------------------------------------ derived views
    def _derive(self) -> None:
        n = self.n
        self._free, self._frac, self._wl, self._largest_eff = _derived(
            self.alloc[:n], self.load[:n] + self.assumed[:n], self.wl_offset[:n], self.largest[:n])
        self._derived_version = self.version

    def _derive_rows(self, rows: np.ndarray) -> None:
        """``_derive`` for some rows only, written into the derived arrays."""
        free, frac, wl, largest_eff = _derived(self.alloc[rows], self.load[rows] + self.assumed[rows],
                                               self.wl_offset[rows], self.largest[rows])
        self._free[rows] = free
        self._frac[rows] = frac
        self._wl[rows] = wl
        self._largest_eff[rows] = largest_eff

    @property
    def free(self) -> FloatArr:
        """(n, 5) free amount per resource, after assumed placements."""
        if self._derived_version != self.version:
            self._derive()
        return self._free

    @property
    def fractions(self) -> FloatArr:
        """(n, 2) cpu and memory load fractions including assumed placements."""
        if self._derived_version != self.version:
            self._derive()
        return self._frac

    @property
    def water_level(self) -> FloatArr:
        """(n,) water level per cluster (module docstring), including assumed placements."""
        if self._derived_version != self.version:
            self._derive()
        return self._wl

    @property
    def largest_free(self) -> FloatArr:
        """(n, 3) effective largest free node (cpu, memory, gpu)."""
        if self._derived_version != self.version:
            self._derive()
        return self._largest_eff

    # ------------------------------------------------------------------ index helpers
    def rows_of(self, names: Sequence[str]) -> tuple[list[int], list[str]]:
        """Rows of the known names, plus the unknown names."""
        rows: list[int] = []
        missing: list[str] = []
        for nm in names:
            r = self.index.get(nm)
            if r is None:
                missing.append(nm)
            else:
                rows.append(r)
        return rows, missing

    def name_rank(self) -> np.ndarray:
        """(n,) each row's position in name order (cached until the topology changes): sorting
        rows by it sorts them by name without touching strings."""
        hit = self.cache.get("name-rank")
        if hit is not None and hit.size == self.n:
            return hit  # type: ignore[no-any-return]
        order = np.argsort(np.asarray(self.names, dtype=str), kind="stable")
        rank = np.empty(self.n, dtype=np.intp)
        rank[order] = np.arange(self.n, dtype=np.intp)
        rank.flags.writeable = False
        self.cache["name-rank"] = rank
        self.cache["name-ordered"] = bool((order == np.arange(self.n)).all())
        return rank

    def name_ordered(self) -> bool:
        """True when the rows are in name order (the store lists clusters by key, so they usually
        are): ascending rows are then already sorted by name."""
        self.name_rank()
        return bool(self.cache["name-ordered"])

    def name_mask(self, names: Sequence[str]) -> BoolArr:
        m = np.zeros(self.n, dtype=bool)
        rows, _ = self.rows_of(names)
        if rows:
            m[rows] = True
        return m

    def field_codes(self, fld: str) -> np.ndarray:
        return self.topo[fld][: self.n]

    def field_in(self, fld: str, values: Sequence[str]) -> BoolArr:
        """Clusters whose topology field is one of ``values``."""
        vocab = self.vocab[fld]
        codes = [vocab[v] for v in values if v in vocab]
        arr = self.topo[fld][: self.n]
        if not codes:
            return np.zeros(self.n, dtype=bool)
        if len(codes) == 1:
            return arr == codes[0]
        return np.isin(arr, codes)

    def label_in(self, key: str, values: Sequence[str]) -> BoolArr:
        codes_arr = self.label_codes.get(key)
        if codes_arr is None:
            return np.zeros(self.n, dtype=bool)
        vocab = self.label_vocab[key]
        codes = [vocab[v] for v in values if v in vocab]
        arr = codes_arr[: self.n]
        if not codes:
            return np.zeros(self.n, dtype=bool)
        if len(codes) == 1:
            return arr == codes[0]
        return np.isin(arr, codes)

    def label_exists(self, key: str) -> BoolArr:
        codes_arr = self.label_codes.get(key)
        if codes_arr is None:
            return np.zeros(self.n, dtype=bool)
        return codes_arr[: self.n] >= 0

    def set_mask(self, fld: str, value: str) -> BoolArr:
        m = self.sets[fld].get(value)
        if m is None:
            return np.zeros(self.n, dtype=bool)
        return m[: self.n]

    def group_codes(self, by_field: str | None, by_label: str | None) -> np.ndarray:
        """Spread-group id per cluster (-1 = not in any group)."""
        if by_label is not None:
            arr = self.label_codes.get(by_label)
            return arr[: self.n] if arr is not None else np.full(self.n, -1, dtype=np.int32)
        if by_field == "cluster" or by_field is None:
            return np.arange(self.n, dtype=np.int32)
        return self.topo[by_field][: self.n]

    def group_name(self, by_field: str | None, by_label: str | None, code: int) -> str:
        if by_label is not None:
            vocab = self.label_vocab.get(by_label, {})
        elif by_field == "cluster" or by_field is None:
            return self.names[code]
        else:
            vocab = self.vocab[by_field]
        for k, v in vocab.items():
            if v == code:
                return k
        return str(code)

    def fleet_water_level(self, mask: BoolArr | None = None) -> float:
        """Allocatable-cpu-weighted mean water level of the masked clusters."""
        wl = self.water_level
        w = self.alloc[: self.n, CPU]
        if mask is not None and mask.all():
            mask = None
        if mask is None and wl.size:
            tot = self.status_cache.get("cpu-allocatable-sum")
            if tot is None:
                tot = self.status_cache["cpu-allocatable-sum"] = float(w.sum())
            return float(wl.dot(w) / tot) if tot > 0 else float(wl.mean())
        if mask is not None:
            wl = wl[mask]
            w = w[mask]
        if wl.size == 0:
            return 0.0
        tot = float(w.sum())
        if tot <= 0:
            return float(wl.mean())
        return float((wl * w).sum() / tot)
