"""Order-independent 64-bit digests of route rows: a row is rebuilt only when its digest moved."""

from __future__ import annotations

from typing import Any

import numpy as np
from numpy.typing import NDArray


def _mixed(x: NDArray[np.uint64]) -> NDArray[np.uint64]:
    """SplitMix64's finaliser: every input bit moves about half of the output's."""
    x = (x ^ (x >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
    x = (x ^ (x >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    return np.asarray(x ^ (x >> np.uint64(31)), dtype=np.uint64)


def _bits(a: NDArray[Any]) -> NDArray[np.uint64]:
    return np.ascontiguousarray(a, dtype=np.float64).view(np.uint64)


def digest(values: list[NDArray[Any]], tag: int) -> NDArray[np.uint64]:
    """A 64-bit hash of each position's ``values`` (float64 bit patterns, in order)."""
    h = np.full(len(values[0]), tag, dtype=np.uint64)
    for v in values:
        h = _mixed(h ^ _bits(v))
    return h


def row_digests(n_rows: int, parts: list[tuple[NDArray[np.int64], NDArray[np.uint64]]]) -> NDArray[np.uint64]:
    """Per row the sum (mod 2⁶⁴) of its positions' hashes: independent of the positions' order."""
    out = np.zeros(n_rows, dtype=np.uint64)
    for rows, h in parts:
        np.add.at(out, rows, h)
    return out
