"""A MAX route's reason says the measured value of the threshold it breaks, jitter, loss and bandwidth
as delay does (it said "jitter threshold 1.0 broken")."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from drods.steering.engine import Fleet, evaluate
from drods.steering.routing import Damping, render, step
from tests.steering.fixtures import CLIENTS, CLUSTERS, DELAY, plan


def _reason(sla: dict[str, float], **legs: Any) -> str:
    z = np.zeros_like(DELAY)
    f = Fleet(CLUSTERS, CLIENTS, DELAY, legs.get("jitter", z), legs.get("loss", z),
              legs.get("bandwidth", np.full_like(DELAY, np.inf)), np.array([0.5, 0.2, 0.3]),
              np.array([0.10, 0.04, 0.06]))
    ev = evaluate(f, [plan(sla={"maxDelayMs": 200.0, **sla})])[0]
    out = render(ev, step(ev, None, 0.0, Damping()).state, [None, None])
    inst = out[1]["instances"][0]  # type: ignore[index]
    assert inst["metric"] == "MAX", out
    return str(inst["reason"])


@pytest.mark.parametrize("sla, legs, said", [
    ({"maxJitterMs": 1.0}, {"jitter": np.full_like(DELAY, 5.0)}, "jitter 5.0 ms > 1 ms"),
    ({"maxLossPercent": 0.5}, {"loss": np.full_like(DELAY, 2.25)}, "loss 2.25 % > 0.5 %"),
    ({"minBandwidthMbps": 100.0}, {"bandwidth": np.full_like(DELAY, 40.0)}, "bandwidth 40.0 Mbit/s < 100 Mbit/s"),
])
def test_a_max_reason_names_the_measured_value(sla: dict[str, float], legs: dict[str, Any], said: str) -> None:
    reason = _reason(sla, **legs)
    assert said in reason and "threshold" not in reason, reason
