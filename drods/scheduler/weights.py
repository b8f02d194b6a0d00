"""Static weight lists (Karmada ``staticWeightList``) evaluated in time linear in rules + clusters.

A list with one rule per cluster is the common shape (equal or hand-set weights over named
clusters), so rules that only name clusters are looked up in the snapshot's name index, and rules
that select one label value (``matchLabels`` with one pair, or one ``In`` expression) become a
per-value table indexed by the label's code array. Any other rule is an affinity term whose mask
is evaluated once. The per-cluster result is cached on the snapshot until its topology changes.
"""

from __future__ import annotations

import numpy as np

from drods.scheduler.arrays import FloatArr
from drods.scheduler.selectors import affinity_mask
from drods.scheduler.snapshot import Snapshot
from drods.scheduler.task import AffinityKey, StaticRules


def _single_label(term: AffinityKey) -> tuple[str, tuple[str, ...]] | None:
    """``(key, values)`` when the term is exactly "label ``key`` is one of ``values``"."""
    if term.cluster_names or term.exclude or term.field_exprs:
        return None
    if len(term.match_labels) == 1 and not term.label_exprs:
        k, v = term.match_labels[0]
        return k, (v,)
    if not term.match_labels and len(term.label_exprs) == 1:
        k, op, vals = term.label_exprs[0]
        if op == "In":
            return k, vals
    return None


def static_weights(snap: Snapshot, rules: StaticRules) -> FloatArr:
    """(n,) weight of every snapshot row: its highest matching rule, 0 where none matches.

    Read-only result (cached); copy before writing."""
    ck = ("static-weights", rules)
    hit = snap.cache.get(ck)
    if hit is not None:
        return hit  # type: ignore[no-any-return]
    n = snap.n
    w = np.zeros(n)
    if rules.names:
        idx = snap.index
        rows = np.fromiter((idx.get(nm, -1) for nm in rules.names), dtype=np.intp, count=len(rules.names))
        vals = np.asarray(rules.name_weights, dtype=np.float64)
        known = rows >= 0
        np.maximum.at(w, rows[known], vals[known])
    tables: dict[str, FloatArr] = {}
    for term, weight in rules.terms:
        single = _single_label(term)
        if single is None:
            np.maximum(w, np.where(affinity_mask(snap, term), float(weight), 0.0), out=w)
            continue
        key, values = single
        vocab = snap.indexes.label_vocab.get(key)
        if vocab is None:
            continue
        table = tables.get(key)
        if table is None:
            table = tables[key] = np.zeros(len(vocab) + 1)  # the extra last slot is code -1 (unset)
        for v in values:
            c = vocab.get(v)
            if c is not None:
                table[c] = max(table[c], float(weight))
    for key, table in tables.items():
        np.maximum(w, table[snap.indexes.label_codes[key][:n]], out=w)
    w.flags.writeable = False
    snap.cache[ck] = w
    return w
