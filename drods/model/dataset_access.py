"""Dataset hotness (F4) from access reports: who reads which Dataset from where, decaying.

``PUT /api/v1/datasets/access`` reports reads per (Dataset, reading cluster) in GiB per hour, from
the storage layer or agents. The reports live in one store document (``DATASET_ACCESS_KEY``) that
blends them exactly as the traffic graph does (`drods.model.traffic`): a report weighs
1 − 0.5^(Δt / half-life) against the stored value, and readers decay a value by 0.5^(age /
half-life), so data nobody reads any more cools down without anyone deleting it. A Dataset's
hotness is the decayed GiB/h read from all clusters; reads from a cluster without a copy are what a
cache plan (`CachePlan`) would save.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from drods.model.traffic import HALF_LIFE_S, WorkloadRef, decay

MIN_GIB_PER_HOUR = 0.01  # a decayed read rate below this is dropped on the next write


class DatasetAccess(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)

    dataset: WorkloadRef  # the Dataset by namespace/name
    cluster: str = Field(min_length=1)  # where the reads ran
    readGiBPerHour: float = Field(ge=0, allow_inf_nan=False)


class DatasetAccessReport(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)

    reads: list[DatasetAccess] = Field(min_length=1, max_length=10_000)
    timestamp: str | None = None  # RFC 3339; default: when the server receives it


def access_key(dataset: str, cluster: str) -> str:
    return f"{dataset}@{cluster}"


def merge_access(doc: Mapping[str, Any] | None, report: DatasetAccessReport, now: float,
                 half_life_s: float = HALF_LIFE_S) -> dict[str, Any]:
    """The access document after ``report`` (observed at ``now``, epoch seconds)."""
    reads: dict[str, dict[str, float]] = {}
    for k, e in ((doc or {}).get("reads") or {}).items():
        if decay(float(e.get("readGiBPerHour", 0.0)), now - float(e.get("time", now)), half_life_s) >= MIN_GIB_PER_HOUR:
            reads[k] = dict(e)
    for r in report.reads:
        k = access_key(r.dataset.key, r.cluster)
        prev = reads.get(k)
        v = r.readGiBPerHour
        if prev is not None:
            w = math.pow(0.5, max(0.0, now - float(prev["time"])) / half_life_s)
            v = w * float(prev["readGiBPerHour"]) + (1 - w) * v
        reads[k] = {"readGiBPerHour": v, "time": now}
    return {"reads": reads, "halfLifeSeconds": half_life_s}


def hotness(doc: Mapping[str, Any] | None, now: float) -> dict[str, dict[str, float]]:
    """{dataset "namespace/name": {cluster: decayed GiB/h}} at ``now``."""
    out: dict[str, dict[str, float]] = {}
    hl = float((doc or {}).get("halfLifeSeconds", HALF_LIFE_S))
    for k, e in ((doc or {}).get("reads") or {}).items():
        ds, _, cluster = k.rpartition("@")
        v = decay(float(e.get("readGiBPerHour", 0.0)), now - float(e.get("time", now)), hl)
        if ds and cluster and v >= MIN_GIB_PER_HOUR:
            out.setdefault(ds, {})[cluster] = v
    return out
