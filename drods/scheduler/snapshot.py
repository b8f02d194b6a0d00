"""The scheduler's global view (S2): one row per cluster in NumPy arrays, updated incrementally.

Rows are kept dense (``[0, n)``): removing a cluster moves the last row into the hole
(swap-remove), and arrays grow by doubling, so ``upsert_cluster``/``remove_cluster`` are O(1)
amortised in the number of clusters. Plugins read ``[:n]`` views.

Resources are columns ``cpu`` (cores), ``memory`` (GiB), ``gpu`` (count), ``pods`` (count) and
``storage`` (GiB). For each the snapshot holds

* ``alloc``   — allocatable (status ``allocatable``, defaulting to ``capacity``),
* ``load``    — observed load = max(``allocated`` requests, ``used``),
* ``ledger.arr`` — assumed: what this scheduler placed and the status does not show yet (S7).

Free = alloc - load - assumed. Missing sections: cpu/memory → 0 capacity; gpu → the GPUs the spec
counts (``spec.gpus``), else 0; pods/storage → unlimited (not enforced). The largest free node
(cpu, memory, gpu) comes from ``largestNodeFree``; when absent the whole free amount is treated
as one node. After assumes the effective largest node is min(observed largest node, cluster free).

The snapshot composes its parts, one job each: ``status.py`` reduces a status document to the
row's numbers; ``indexes.py`` (``indexes``) holds the label/topology/value-set/taint/latency indexes
(masks built from them are cached until the topology changes); ``assumed.py`` (``ledger``) the S7
assumed load by binding key; ``offer_book.py`` (``offers``) the GPU-by-model and storage-by-tier
tables and each binding's draws on them. The snapshot keeps the rows themselves, the derived views
and the versions every cache is keyed on.

Water level (SPEC S10): for cpu and memory, fraction_r = (load_r + assumed_r) / alloc_r; the
water level is max(fraction_cpu, fraction_mem). If the status carries ``waterLevel`` it replaces
the observed part: we keep the offset (status waterLevel - observed max fraction) and add it, so
with nothing assumed the water level equals the status value exactly and assumed placements add
on top. A pre-allocation hold (F6) raises the status value to the forecast while it lasts.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Hashable, Mapping, Sequence
from typing import Any, NamedTuple

import numpy as np

from drods.model.binding import ReplicaRequirements
from drods.model.cluster import ClusterSpec
from drods.scheduler.arrays import BoolArr, FloatArr
from drods.scheduler.assumed import Assumed, AssumedLoad, PlacementLike, names_counts
from drods.scheduler.indexes import RowInfo, ValueIndexes
from drods.scheduler.offer_book import OfferBook
from drods.scheduler.offers import OfferDemand
from drods.scheduler.resources import CPU, GPU, NRES, requirement_vector
from drods.scheduler.status import parse_status
from drods.scheduler.workload_groups import WorkloadGroups


class LiftedLoad(NamedTuple):
    """What `Snapshot.lift_load` replaced on some rows, for `Snapshot.restore_load` (``largest``: None when
    only the load is restored)."""

    rows: np.ndarray
    load: FloatArr
    largest: FloatArr | None = None


def _derived(alloc: FloatArr, used: FloatArr, wl_offset: FloatArr,
             largest: FloatArr) -> tuple[FloatArr, FloatArr, FloatArr, FloatArr]:
    """Free amounts, cpu/memory fractions, water levels and effective largest free node of some rows."""
    free = alloc - used
    a2 = alloc[:, :2]
    frac = np.where(a2 > 0, used[:, :2] / np.where(a2 > 0, a2, 1.0), 0.0)
    wl = np.maximum(frac[:, 0], frac[:, 1]) + wl_offset
    return free, frac, wl, np.minimum(largest, np.maximum(free[:, :3], 0.0))


class Snapshot:
    """Global view of the fleet as arrays; see the module docstring for the semantics."""

    def __init__(self, capacity: int = 16, clock: Callable[[], float] = time.time) -> None:
        cap = max(1, capacity)
        # when a taint without ``timeAdded`` was first seen, and whether a NoExecute toleration's
        # ``tolerationSeconds`` ran out (TaintToleration): the only wall-clock reads of the snapshot
        self.clock = clock
        self._cap = cap
        self.n = 0
        self.index: dict[str, int] = {}
        self.names: list[str] = []
        self.names_arr = np.empty(cap, dtype=object)
        self.alloc = np.zeros((cap, NRES))
        self.load = np.zeros((cap, NRES))
        self.ledger = AssumedLoad(cap, self.index)  # S7: assumed load and what it came from
        self.largest = np.zeros((cap, 3))
        self.wl_offset = np.zeros(cap)
        self.net_mbps = np.zeros(cap)
        self.bandwidth = np.full(cap, np.nan)
        self.ready = np.zeros(cap, dtype=bool)
        self.has_status = np.zeros(cap, dtype=bool)
        self.unschedulable = np.zeros(cap, dtype=bool)
        self.limit = np.ones(cap)
        self.cost = np.full((cap, 4), np.nan)  # cpuCoreHour, memoryGiBHour, gpuHour, egressGiB
        self.indexes = ValueIndexes(cap)  # labels, topology, value sets, taints, profile latency
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
        # Karmada 1.17 workloadAffinity: each group's workloads (where they run: workload_placements)
        self.workload_groups = WorkloadGroups()
        # F4: each Dataset ("namespace/name") → the clusters holding a copy of it
        self.datasets: dict[str, tuple[str, ...]] = {}
        # F3/F4: each Dataset's Primary copy, when it names one (a stateful topology's primary goes there)
        self.dataset_primaries: dict[str, str] = {}
        self.dataset_sizes: dict[str, float] = {}  # F4: declared spec.sizeGiB (absent: unknown)
        # F1: GPUs by model and storage GiB by tier, and what each placed binding holds of them
        self.offers = OfferBook(cap, self.index)
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
        for attr in ("alloc", "load", "largest", "wl_offset", "net_mbps"):
            setattr(self, attr, g(getattr(self, attr)))
        self.bandwidth = g(self.bandwidth, np.nan)
        self.cost = g(self.cost, np.nan)
        self.ready = g(self.ready, False)
        self.has_status = g(self.has_status, False)
        self.unschedulable = g(self.unschedulable, False)
        self.limit = g(self.limit, 1.0)
        self.ledger.grow(new)
        self.indexes.grow(new)
        self.class_cores = {k: g(v, 0.0) for k, v in self.class_cores.items()}
        self.offers.grow(new)
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
        perf = self.offers.gpus.perf[: self.n]
        col = None if model is None else self.offers.gpus.keys.get(model)
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
        tiers = self.offers.tiers
        col = tiers.keys.get(tier)
        if col is None:
            return np.full(self.n, np.nan)
        return tiers.spec_cap[: self.n, col].copy()

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
        base = self.indexes.latency.get(target)
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
        seen: dict[tuple[str, str, str], float] = {}
        if row is None:
            if self.n == self._cap:
                self._grow()
            row = self.n
            self.n += 1
            self.index[name] = row
            self.names.append(name)
            self.names_arr[row] = name
            self.indexes.rows.append(RowInfo())
        else:
            topology_changed = self.indexes.changed(row, labels, spec)
            if topology_changed:
                seen = self.indexes.taint_times(row)  # a taint that stays keeps its first-seen time
                self.indexes.clear(row)
        if topology_changed:
            self.indexes.set(row, labels, spec, now=self.clock() if spec.taints else 0.0, seen=seen)
            self.offers.set_spec(row, spec)
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
        if not p.gpu_stated:
            spec = self.indexes.rows[row].spec
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
        self.offers.set_status(row, p.gpu_by_model, p.storage_by_tier)
        if _touch:
            self._touch(False)

    def set_ready(self, name: str, ready: bool) -> None:
        self.ready[self.index[name]] = bool(ready)
        self._touch(False)

    def remove_cluster(self, name: str) -> None:
        """Drop a cluster by moving the last row into its place (O(1) amortised)."""
        row = self.index.pop(name)
        last = self.n - 1
        self.indexes.clear(row)
        # copy on write: decisions keep views of ``names_arr`` to name their clusters later
        self.names_arr = self.names_arr.copy()
        if row != last:
            moved = self.names[last]
            for a in (self.alloc, self.load, self.ledger.arr, self.largest, self.cost):
                a[row] = a[last]
            for v in (self.wl_offset, self.net_mbps, self.bandwidth, self.ready, self.has_status,
                      self.unschedulable, self.limit):
                v[row] = v[last]
            for arr in self.class_cores.values():
                arr[row] = arr[last]
            self.offers.move(row, last)
            self.names[row] = moved
            self.names_arr[row] = moved
            self.index[moved] = row
        self.indexes.move(row, last)
        for arr in self.class_cores.values():
            arr[last] = 0.0
        self.offers.clear(last)
        self.alloc[last] = 0
        self.load[last] = 0
        self.ledger.arr[last] = 0
        self.names_arr[last] = None
        self.ready[last] = False
        self.has_status[last] = False
        self.names.pop()
        self.n -= 1
        self._touch(True)

    def __len__(self) -> int:
        return self.n

    def __contains__(self, name: object) -> bool:
        return name in self.index

    def row_spec(self, name: str) -> ClusterSpec | None:
        return self.indexes.rows[self.index[name]].spec

    def spec_column(self, key: Hashable, fn: Callable[[ClusterSpec], float]) -> FloatArr:
        """``fn`` of each row's ClusterSpec as one array (NaN without a spec), built once per
        topology version: the seldom-read spec facts (GPU price of one model, spot market) cost
        one pass per spec change, not one per decision, and need no array of their own here."""
        ck = ("spec_column", key)
        hit = self.cache.get(ck)
        if hit is None or hit.shape[0] != self.n:
            hit = np.array([np.nan if r.spec is None else fn(r.spec) for r in self.indexes.rows[: self.n]],
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
            self.dataset_sizes.pop(name, None)
            return
        self.datasets[name] = tuple(str(loc["cluster"]) for loc in locs)
        size = ((obj or {}).get("spec") or {}).get("sizeGiB")
        if isinstance(size, (int, float)) and not isinstance(size, bool) and size >= 0:
            self.dataset_sizes[name] = float(size)
        else:
            self.dataset_sizes.pop(name, None)
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
        names, counts = names_counts(placement)
        self._apply(names, counts, req, 1.0)
        if key is None:
            return
        self.ledger.records[key] = Assumed(names, counts, req)
        if demand is None and isinstance(requirements, ReplicaRequirements) and \
                (requirements.gpu or requirements.storageTier):
            demand = OfferDemand.of(requirements)
        if demand is not None:
            pairs = tuple(zip(names, counts, strict=True))
            self.offers.assume(key, pairs, demand, self.n)
            if hold:
                self.place_offers(key, pairs, demand)
        elif hold and key in self.offers.placements and isinstance(requirements, ReplicaRequirements):
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
            self.offers.forget(key)
            if offers and key in self.offers.placements:
                self.drop_offers(key)
            rec = self.ledger.records.pop(key, None)
            if rec is None:
                return False
            self._apply(rec.names, rec.counts, rec.req, -1.0)
            return True
        if placement is None or requirements is None:
            raise ValueError("forget needs a key or both placement and requirements")
        self._apply(*names_counts(placement), requirement_vector(requirements), -1.0)
        return True

    def assumed_keys(self) -> list[str]:
        return list(self.ledger.records)

    def _apply(self, names: Sequence[str], counts: Sequence[int], req: FloatArr, sign: float) -> None:
        fresh = self._derived_version == self.version
        rows = self.ledger.add(names, counts, req, sign)
        self.version += 1
        if fresh:
            if rows is not None:
                # An assume touches a few rows: refresh just those instead of every row on next read.
                self._derive_rows(rows)
            self._derived_version = self.version

    # ------------------------------------------------------------------ GPUs by model, storage by tier
    def place_offers(self, key: str, placement: Sequence[tuple[str, int]], demand: OfferDemand | None) -> bool:
        """Binding ``key`` holds ``demand`` per replica of ``placement`` (replacing what it held):
        GPUs drawn from its eligible models, GiB from its tier, on every cluster it is placed on.
        This is the load of clusters whose member reports no per-model / per-tier allocation.
        True when some cluster now holds less of it than before (room for parked bindings)."""
        held = key in self.offers.placements
        if demand is None and not held:
            return False
        shrunk = self.offers.place(key, placement, demand, self.n)
        if held:
            self._bump()
        self._bump()
        return shrunk

    def drop_offers(self, key: str) -> None:
        """Binding ``key`` holds no GPUs or tier storage any more (deleted, or placed anew)."""
        if self.offers.drop(key):
            self._bump()

    def lift_load(self, placement: PlacementLike, requirements: ReplicaRequirements | Sequence[float] | FloatArr,
                  used: Mapping[str, Sequence[float]] | None = None) -> LiftedLoad:
        """Take ``placement``'s replicas off their clusters' observed load (never below 0) — a binding's
        own replicas, which their status shows, while it is divided afresh; `restore_load` puts back
        exactly what was there. ``used``: its measured (cpu cores, memory GiB) per cluster, lifted where
        more than its requests, as the observed load counts use above requests. A lifted replica's node
        has room for one again: the largest free node there is at least a replica (the status' own
        figure counts those pods, and a drained cluster's kept copy was no room for its own replicas)."""
        names, counts = names_counts(placement)
        pairs = [(self.index[c], k, c) for c, k in zip(names, counts, strict=True) if c in self.index and k > 0]
        rows = np.asarray([r for r, _, _ in pairs], dtype=np.intp)
        saved = self.load[rows].copy()
        if rows.size:
            req = requirement_vector(requirements)
            lift = np.asarray([n for _, n, _ in pairs], dtype=np.float64)[:, None] * req
            for i, (_, _, c) in enumerate(pairs):
                if used and (u := used.get(c)) is not None:
                    lift[i, :2] = np.maximum(lift[i, :2], np.asarray(u[:2], dtype=np.float64))
            self.load[rows] = np.maximum(saved - lift, 0.0)
            largest = self.largest[rows].copy()
            self.largest[rows] = np.maximum(largest, req[None, :3])
            self._load_changed(rows)
            return LiftedLoad(rows, saved, largest)
        return LiftedLoad(rows, saved)

    def lower_load(self, name: str, amount: FloatArr) -> None:
        """Take ``amount`` off a cluster's observed load (never below 0) until its next status: replicas a
        decision removed that the status still counts (``SchedulerCache`` releases them)."""
        row = self.index[name]
        self.load[row] = np.maximum(self.load[row] - amount, 0.0)
        self._load_changed(np.asarray([row], dtype=np.intp))

    def set_offsets(self, rows: np.ndarray, offsets: FloatArr) -> FloatArr:
        """Replace the rows' water-level offsets (what a status or a hold adds to the observed level);
        the ones replaced."""
        saved = self.wl_offset[rows].copy()
        if rows.size:
            self.wl_offset[rows] = offsets
            self._load_changed(rows)
            self.status_cache.clear()  # the replica shapes' room is the limit less the offset
        return saved

    def restore_load(self, lifted: LiftedLoad) -> None:
        rows, saved, largest = lifted
        if rows.size:
            self.load[rows] = saved
            if largest is not None:
                self.largest[rows] = largest
            self._load_changed(rows)

    def _load_changed(self, rows: np.ndarray) -> None:
        fresh = self._derived_version == self.version
        self.version += 1
        if fresh:
            self._derive_rows(rows)
            self._derived_version = self.version

    def _bump(self) -> None:
        """A change no derived cpu/memory view depends on: a new version, the views stay fresh."""
        fresh = self._derived_version == self.version
        self.version += 1
        if fresh:
            self._derived_version = self.version

    # ------------------------------------------------------------------ derived views
    def _derive(self) -> None:
        n = self.n
        self._free, self._frac, self._wl, self._largest_eff = _derived(
            self.alloc[:n], self.load[:n] + self.ledger.arr[:n], self.wl_offset[:n], self.largest[:n])
        self._derived_version = self.version

    def _derive_rows(self, rows: np.ndarray) -> None:
        """``_derive`` for some rows only, written into the derived arrays."""
        free, frac, wl, largest_eff = _derived(self.alloc[rows], self.load[rows] + self.ledger.arr[rows],
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

    def field_in(self, fld: str, values: Sequence[str]) -> BoolArr:
        """Clusters whose topology field is one of ``values``."""
        return self.indexes.field_in(fld, values, self.n)

    def label_in(self, key: str, values: Sequence[str]) -> BoolArr:
        return self.indexes.label_in(key, values, self.n)

    def label_exists(self, key: str) -> BoolArr:
        return self.indexes.label_exists(key, self.n)

    def set_mask(self, fld: str, value: str) -> BoolArr:
        return self.indexes.set_mask(fld, value, self.n)

    def group_codes(self, by_field: str | None, by_label: str | None) -> np.ndarray:
        """Spread-group id per cluster (-1 = not in any group)."""
        return self.indexes.group_codes(by_field, by_label, self.n)

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
        if mask is None or not mask.any():
            return 0.0
        w = np.where(mask, w, 0.0)  # both zeroed outside the mask: no gather of a strided column, and
        tot = float(w.sum())        # no level of a cluster left out (whatever it is) in the sum
        if tot <= 0:
            return float(wl[mask].mean())
        return float(np.where(mask, wl, 0.0).dot(w) / tot)
