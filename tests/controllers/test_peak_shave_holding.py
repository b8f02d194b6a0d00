"""A peak-shave pass reads every Binding: what each may move is worked out once per placement policy."""

from __future__ import annotations

from typing import Any

import numpy as np

from drods.controllers.peak_shave import PeakShaver
from drods.model.cluster import ClusterSpec
from drods.monitor.autoops import AutoOpsPolicy
from drods.scheduler.arrays import BoolArr
from drods.scheduler.selection import ClusterFacts, ClusterSelection

NAMES = ["east-1", "east-2", "west-1"]
SPECS = [ClusterSpec(region=n.split("-")[0]) for n in NAMES]
FACTS = [ClusterFacts.of(n, {}, s) for n, s in zip(NAMES, SPECS, strict=True)]
INDEX = {n: i for i, n in enumerate(NAMES)}


def binding(name: str, placement: dict[str, Any] | None = None) -> dict[str, Any]:
    spec: dict[str, Any] = {"replicas": 4, "resources": {"cpu": 0.5, "memory": 1.0}}
    if placement is not None:
        spec["placement"] = placement
    return {"metadata": {"name": name}, "spec": spec,
            "status": {"placement": [{"cluster": "east-1", "replicas": 4}]}}


def test_bindings_of_one_policy_share_its_allowed_clusters() -> None:
    shaver = PeakShaver(None, None, AutoOpsPolicy())  # type: ignore[arg-type]
    masks: dict[ClusterSelection, BoolArr] = {}
    east = {"clusterAffinity": {"clusterNames": ["east-1", "east-2"]}}
    a, b, c = (shaver.holding(binding(n, p), INDEX, SPECS, FACTS, masks)
               for n, p in (("a", None), ("b", None), ("c", east)))
    assert a is not None and b is not None and c is not None
    assert len(masks) == 2  # two policies, each matched against the clusters once
    assert a.allowed is b.allowed
    assert a.allowed.tolist() == [True, True, True]
    assert c.allowed.tolist() == [True, True, False]
    alone = shaver.holding(binding("c", east), INDEX, SPECS, FACTS)  # without the pass's memo: the same answer
    assert alone is not None and np.array_equal(alone.allowed, c.allowed)
