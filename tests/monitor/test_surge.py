from __future__ import annotations

import numpy as np

from drods.monitor.surge import SurgeConfig, SurgeDetector


def feed(
    det: SurgeDetector, values: np.ndarray, cluster: str = "c", dt: float = 10.0, start: float = 0.0
) -> list[bool]:
    return [det.observe(cluster, start + i * dt, network_mbps=float(v)).active for i, v in enumerate(values)]


def test_no_surge_on_noise() -> None:
    rng = np.random.default_rng(1)
    det = SurgeDetector()
    noise = 1000 * (1 + rng.normal(0, 0.1, 6 * 360))  # 6 h, 10 % noise
    assert not any(feed(det, noise))
    # occasional single-sample spikes (2x) don't fire either
    spiky = noise.copy()
    spiky[::97] *= 2
    det2 = SurgeDetector()
    assert not any(feed(det2, spiky))


def test_step_fires_quickly_and_clears_with_hysteresis() -> None:
    rng = np.random.default_rng(2)
    det = SurgeDetector()
    base = 1000 * (1 + rng.normal(0, 0.05, 180))  # 30 min warm-up
    surge = 2500 * (1 + rng.normal(0, 0.05, 60))  # 10 min at 2.5x
    after = 1000 * (1 + rng.normal(0, 0.05, 120))
    states = feed(det, np.concatenate([base, surge, after]))
    assert not any(states[:180])
    first = states.index(True, 180)
    assert first - 180 <= 6  # within a minute at 10-s reports
    # stays on through the surge without flapping
    assert all(states[first:240])
    sig = det.cluster("c")
    assert sig is not None
    # once it drops, it clears and does not flap back
    off = states.index(False, 240)
    assert off - 240 <= 12
    assert not any(states[off:])
    transitions = sum(a != b for a, b in zip(states, states[1:], strict=False))
    assert transitions == 2


def test_magnitude_scales_with_ratio() -> None:
    cfg = SurgeConfig(ratio_full=3.0)
    mags = []
    for factor in (1.8, 2.5, 6.0):
        det = SurgeDetector(cfg)
        feed(det, np.full(60, 100.0))
        feed(det, np.full(30, 100.0 * factor), start=600)
        sig = det.cluster("c")
        assert sig is not None and sig.active and sig.signal == "network"
        mags.append(sig.magnitude)
    assert 0 < mags[0] < mags[1] < mags[2] == 1.0


def test_request_rate_surge_and_fleet() -> None:
    det = SurgeDetector()
    for i in range(60):
        det.observe("a", i * 10.0, network_mbps=100, request_rate=50)
        det.observe("b", i * 10.0, network_mbps=300, request_rate=50)
    for i in range(60, 80):
        det.observe("a", i * 10.0, network_mbps=100, request_rate=200)
        det.observe("b", i * 10.0, network_mbps=300, request_rate=50)
    a = det.cluster("a")
    assert a is not None and a.active and a.signal == "requests"
    fleet = det.fleet()
    assert fleet.active and fleet.clusters == ("a",)
    # traffic-weighted: a carries 1/4 of the network traffic
    assert fleet.magnitude == a.magnitude * 100 / 400
    det.forget("a")
    assert not det.fleet().active


def test_tiny_traffic_never_surges() -> None:
    det = SurgeDetector()
    assert not any(feed(det, np.concatenate([np.full(60, 0.01), np.full(30, 0.5)])))


def test_no_input_returns_quiet_signal() -> None:
    sig = SurgeDetector().observe("x", 0.0)
    assert not sig.active and sig.magnitude == 0.0
