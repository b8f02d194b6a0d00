"""A small fleet the steering unit tests share: three cities of instances, two client sites."""

from __future__ import annotations

from typing import Any

import numpy as np

from drods.model.steering import ServiceRegistrationSpec
from drods.steering.engine import Fleet, ServicePlan
from drods.steering.plans import compile_plan

CLUSTERS = ("aws-dfw", "gcp-ord", "az-lhr")
CLIENTS = ("DFW", "LHR")
# DFW → 4 / 20 / 100 ms; LHR → 95 / 80 / 3 ms
DELAY = np.array([[4.0, 20.0, 100.0], [95.0, 80.0, 3.0]])


def fleet(load: tuple[float, float, float] = (0.5, 0.2, 0.3), delay: Any = None) -> Fleet:
    d = DELAY if delay is None else np.asarray(delay, dtype=float)
    return Fleet(CLUSTERS, CLIENTS, d, np.zeros_like(d), np.zeros_like(d), np.full_like(d, np.inf),
                 np.array(load, dtype=float), np.array([0.10, 0.04, 0.06]))


def plan(**spec: Any) -> ServicePlan:
    body: dict[str, Any] = {"serviceId": "video.example",
                            "workload": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "video",
                                         "namespace": "default"},
                            "sla": {"maxDelayMs": 100.0}, "clientSites": list(CLIENTS)} | spec
    return compile_plan(ServiceRegistrationSpec.model_validate(body), CLUSTERS)
