"""Value indexes over the snapshot's cluster rows: what filters compare labels and topology against.

Single-valued attributes (labels, region, zone, provider, city, network identifier) are int32 code
arrays per key with a vocabulary, so ``label == v`` is one vector compare and a key with 10,000
distinct values costs one array, not 10,000 masks. Multi-valued attributes (capabilities, GPU
models, storage tiers, taints) keep one boolean mask per distinct value, reference-counted and
dropped with their last user; a taint also keeps when each row got it (NoExecute tolerations with
``tolerationSeconds`` run out from then). Latency to named sites is one float array per site (NaN = unknown).

Rows are the snapshot's (dense, swap-removed); every array here is allocated to its capacity and
read through ``[:n]`` views.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from drods.model.cluster import ClusterSpec
from drods.model.timefmt import parse_rfc3339
from drods.scheduler.arrays import BoolArr

TOPOLOGY_FIELDS = ("region", "zone", "provider", "city", "network")
SET_FIELDS = ("capability", "gpuModel", "storageTier")


@dataclass(slots=True)
class RowInfo:
    """What a row contributed to the value indexes, so it can be undone on update/remove."""

    labels: dict[str, str] = field(default_factory=dict)
    spec: ClusterSpec | None = None
    sets: list[tuple[str, str]] = field(default_factory=list)
    taints: list[tuple[str, str, str]] = field(default_factory=list)
    latency: list[str] = field(default_factory=list)


def _grown(a: np.ndarray, cap: int, new: int, fill: Any) -> np.ndarray:
    b = np.full((new,) + a.shape[1:], fill, dtype=a.dtype)
    b[:cap] = a
    return b


def _code(vocab: dict[str, int], value: str) -> int:
    c = vocab.get(value)
    if c is None:
        c = len(vocab)
        vocab[value] = c
    return c


class ValueIndexes:
    """Labels, topology fields, value sets, taints and profile latencies of every row."""

    def __init__(self, cap: int) -> None:
        self._cap = cap
        # single-valued topology fields → integer codes (-1 = unset) with a vocabulary each
        self.topo: dict[str, np.ndarray] = {f: np.full(cap, -1, dtype=np.int32) for f in TOPOLOGY_FIELDS}
        self.vocab: dict[str, dict[str, int]] = {f: {} for f in TOPOLOGY_FIELDS}
        self.label_codes: dict[str, np.ndarray] = {}
        self.label_vocab: dict[str, dict[str, int]] = {}
        # multi-valued attributes → one boolean mask per distinct value
        self.sets: dict[str, dict[str, np.ndarray]] = {f: {} for f in SET_FIELDS}
        self.taints: dict[tuple[str, str, str], np.ndarray] = {}
        # per taint, since when each row has it (epoch seconds, NaN where it has not): its ``timeAdded``,
        # else when this snapshot first saw it there — the failover controller's start of the episode
        self.taint_added: dict[tuple[str, str, str], np.ndarray] = {}
        # latency (ms) from each cluster to a named site/cluster, NaN when unknown (cluster profiles)
        self.latency: dict[str, np.ndarray] = {}
        self.rows: list[RowInfo] = []
        self._refs: dict[tuple[str, ...], int] = {}

    # ------------------------------------------------------------------ row lifecycle
    def grow(self, new: int) -> None:
        cap = self._cap
        self.topo = {k: _grown(v, cap, new, -1) for k, v in self.topo.items()}
        self.label_codes = {k: _grown(v, cap, new, -1) for k, v in self.label_codes.items()}
        self.sets = {f: {k: _grown(v, cap, new, False) for k, v in d.items()} for f, d in self.sets.items()}
        self.taints = {k: _grown(v, cap, new, False) for k, v in self.taints.items()}
        self.taint_added = {k: _grown(v, cap, new, np.nan) for k, v in self.taint_added.items()}
        self.latency = {k: _grown(v, cap, new, np.nan) for k, v in self.latency.items()}
        self._cap = new

    def _ref(self, key: tuple[str, ...], delta: int) -> int:
        c = self._refs.get(key, 0) + delta
        if c <= 0:
            self._refs.pop(key, None)
            return 0
        self._refs[key] = c
        return c

    def changed(self, row: int, labels: Mapping[str, str], spec: ClusterSpec) -> bool:
        prev = self.rows[row]
        return prev.labels != dict(labels) or prev.spec != spec

    def clear(self, row: int) -> None:
        info = self.rows[row]
        for key in info.labels:
            self.label_codes[key][row] = -1
        for f, v in info.sets:
            self.sets[f][v][row] = False
            if self._ref(("set", f, v), -1) == 0:
                del self.sets[f][v]
        for t in info.taints:
            self.taints[t][row] = False
            self.taint_added[t][row] = np.nan
            if self._ref(("taint", *t), -1) == 0:
                del self.taints[t]
                del self.taint_added[t]
        for target in info.latency:
            self.latency[target][row] = np.nan
            if self._ref(("lat", target), -1) == 0:
                del self.latency[target]
        for f in TOPOLOGY_FIELDS:
            self.topo[f][row] = -1

    def taint_times(self, row: int) -> dict[tuple[str, str, str], float]:
        """Since when ``row`` has each of its taints (kept across a spec change that keeps the taint)."""
        return {t: float(self.taint_added[t][row]) for t in self.rows[row].taints}

    def set(self, row: int, labels: Mapping[str, str], spec: ClusterSpec, *, now: float = 0.0,
            seen: Mapping[tuple[str, str, str], float] | None = None) -> None:
        """Index ``row``; a taint without ``timeAdded`` dates from ``seen`` (the row had it) or ``now``."""
        info = RowInfo(labels=dict(labels), spec=spec)
        for key, value in labels.items():
            codes = self.label_codes.get(key)
            if codes is None:
                codes = np.full(self._cap, -1, dtype=np.int32)
                self.label_codes[key] = codes
                self.label_vocab[key] = {}
            codes[row] = _code(self.label_vocab[key], value)
        topo_values = {
            "region": spec.region,
            "zone": spec.zone,
            "provider": spec.provider,
            "city": spec.city,
            "network": spec.network.identifier if spec.network else None,
        }
        for f, v in topo_values.items():
            if v is not None:
                self.topo[f][row] = _code(self.vocab[f], v)
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
        self._set_taints(row, spec, info, now, seen or {})
        self._set_latency(row, spec, info)
        self.rows[row] = info

    def _set_taints(self, row: int, spec: ClusterSpec, info: RowInfo, now: float,
                    seen: Mapping[tuple[str, str, str], float]) -> None:
        for t in spec.taints:
            tk = (t.key, t.value, t.effect)
            if tk in info.taints:
                continue
            m = self.taints.get(tk)
            if m is None:
                m = np.zeros(self._cap, dtype=bool)
                self.taints[tk] = m
                self.taint_added[tk] = np.full(self._cap, np.nan)
            m[row] = True
            added = parse_rfc3339(t.timeAdded)
            self.taint_added[tk][row] = added if added is not None else seen.get(tk, now)
            self._ref(("taint", *tk), 1)
            info.taints.append(tk)

    def _set_latency(self, row: int, spec: ClusterSpec, info: RowInfo) -> None:
        if not spec.network:
            return
        for target, ms in spec.network.latencyMs.items():
            arr = self.latency.get(target)
            if arr is None:
                arr = np.full(self._cap, np.nan)
                self.latency[target] = arr
            arr[row] = ms
            self._ref(("lat", target), 1)
            info.latency.append(target)

    def move(self, row: int, last: int) -> None:
        """The last row takes the place of ``row`` (already cleared); ``last`` ends unset."""
        if row != last:
            info = self.rows[last]
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
                self.taint_added[t][row] = self.taint_added[t][last]
                self.taint_added[t][last] = np.nan
            for target in info.latency:
                self.latency[target][row] = self.latency[target][last]
                self.latency[target][last] = np.nan
            self.rows[row] = info
        for f in TOPOLOGY_FIELDS:
            self.topo[f][last] = -1
        self.rows.pop()

    # ------------------------------------------------------------------ queries over the first n rows
    def field_in(self, fld: str, values: Sequence[str], n: int) -> BoolArr:
        """Rows whose topology field is one of ``values``."""
        vocab = self.vocab[fld]
        return codes_in(self.topo[fld][:n], [vocab[v] for v in values if v in vocab], len(vocab))

    def label_in(self, key: str, values: Sequence[str], n: int) -> BoolArr:
        codes_arr = self.label_codes.get(key)
        if codes_arr is None:
            return np.zeros(n, dtype=bool)
        vocab = self.label_vocab[key]
        return codes_in(codes_arr[:n], [vocab[v] for v in values if v in vocab], len(vocab))

    def label_exists(self, key: str, n: int) -> BoolArr:
        codes_arr = self.label_codes.get(key)
        if codes_arr is None:
            return np.zeros(n, dtype=bool)
        return codes_arr[:n] >= 0

    def set_mask(self, fld: str, value: str, n: int) -> BoolArr:
        m = self.sets[fld].get(value)
        if m is None:
            return np.zeros(n, dtype=bool)
        return m[:n]

    def group_codes(self, by_field: str | None, by_label: str | None, n: int) -> np.ndarray:
        """Spread-group id per cluster (-1 = not in any group)."""
        if by_label is not None:
            arr = self.label_codes.get(by_label)
            return arr[:n] if arr is not None else np.full(n, -1, dtype=np.int32)
        if by_field == "cluster" or by_field is None:
            return np.arange(n, dtype=np.int32)
        return self.topo[by_field][:n]


def codes_in(arr: np.ndarray, codes: Sequence[int] | np.ndarray, size: int) -> BoolArr:
    """Rows of ``arr`` (codes below ``size``; -1: no value) whose code is one of ``codes``, through a
    table of ``size`` flags: ``np.isin`` sorts both arrays each call, which was a tenth of a decision
    over 2,000 clusters for a binding already placed (TopologyPreference)."""
    if len(codes) == 0:
        return np.zeros(arr.shape[0], dtype=bool)
    if len(codes) == 1:
        return arr == codes[0]  # type: ignore[no-any-return]
    table = np.zeros(size + 1, dtype=bool)  # the last flag answers -1
    table[codes] = True
    table[-1] = False
    return table[arr]  # type: ignore[no-any-return]
