"""The application-feedback PI loop (H3): hand-computed steps, then a seeded simulated application."""

from __future__ import annotations

import random

import pytest

from drods.autoscaling.feedback import FeedbackSettings, LoopState, Observation, error, step
from drods.model.autoscaling import FeedbackTargets

TARGETS = FeedbackTargets(latencyP99Ms=200.0, maxErrorRate=0.01)
S = FeedbackSettings(kp=0.6, kp_down=0.3, ki=0.1, integral_limit=2.0, deadband=0.25, tolerance=0.05, max_step=4,
                     max_step_fraction=0.25, cooldown_s=30.0, confirm_down=2)


def test_error_is_the_worst_normalised_miss() -> None:
    obs = Observation(latencyP99Ms=300.0, throughput=None, errorRate=0.005, at=0.0)
    assert error(TARGETS, obs) == 0.5  # 300/200 - 1 beats 0.005/0.01 - 1 = -0.5
    tp = FeedbackTargets(minThroughput=100.0)
    assert error(tp, Observation(None, 80.0, None, 0.0)) == pytest.approx(0.2)  # 1 - 80/100


def test_pi_step_bounded_with_cool_down_and_deadband() -> None:
    obs = Observation(latencyP99Ms=300.0, throughput=None, errorRate=0.0, at=10.0)
    s = step(TARGETS, obs, 10, LoopState(), 11.0, S, 1, 50)
    # e = 0.5, I = 0.5, u = 0.6·0.5 + 0.1·0.5 = 0.35, round(10 × 0.35) = 4 (≤ max_step 4)
    assert (s.replicas, s.state.integral, s.state.last_step_at) == (14, 0.5, 11.0)
    big = step(TARGETS, Observation(2000.0, None, 0.0, 10.0), 10, LoopState(), 11.0, S, 1, 50)
    assert big.replicas == 14  # e = 9 → capped at max(4, 10 × 0.25)
    cool = step(TARGETS, Observation(300.0, None, 0.0, 20.0), 14, s.state, 25.0, S, 1, 50)
    assert (cool.replicas, cool.reason) == (14, "cool-down")
    stale = step(TARGETS, Observation(300.0, None, 0.0, 10.5), 14, s.state, 50.0, S, 1, 50)
    assert stale.reason == "feedback predates the last step"
    met = step(TARGETS, Observation(180.0, None, 0.0, 45.0), 14, s.state, 50.0, S, 1, 50)
    # e = -0.1 inside the deadband: no move, integral halves
    assert (met.replicas, met.reason, met.state.integral) == (14, "target met", 0.25)
    first = step(TARGETS, Observation(60.0, None, 0.0, 45.0), 14, LoopState(), 50.0, S, 1, 50)
    assert (first.replicas, first.state.slack_reports) == (14, 1)  # one dip is not slack yet
    slack = step(TARGETS, Observation(60.0, None, 0.0, 55.0), 14, first.state, 60.0, S, 1, 50)
    # e = -0.7, in: u = 0.3·(-0.7) = -0.21, round(14 × -0.21) = -3
    assert (slack.replicas, slack.state.slack_reports) == (11, 0)


class App:
    """A seeded application: p99 latency grows as utilisation nears 1 (M/M/1-like), with noise."""

    def __init__(self, seed: int, load: float, per_replica: float = 10.0, base_ms: float = 50.0) -> None:
        self.rng = random.Random(seed)
        self.load, self.per_replica, self.base_ms = load, per_replica, base_ms

    def latency(self, replicas: int) -> float:
        rho = min(self.load / (replicas * self.per_replica), 0.98)
        return self.base_ms / (1 - rho) * (1 + self.rng.gauss(0, 0.03))


def simulate(seed: int, load: float, start: int, steps: int = 120, dt: float = 10.0) -> list[int]:
    app, replicas, state, trace = App(seed, load), start, LoopState(), []
    for i in range(steps):
        now = i * dt
        obs = Observation(app.latency(replicas), None, 0.0, now - 1.0)
        s = step(TARGETS, obs, replicas, state, now, S, 1, 100)
        replicas, state = s.replicas, s.state
        trace.append(replicas)
    return trace


def reversals(trace: list[int]) -> int:
    moves = [b - a for a, b in zip(trace, trace[1:], strict=False) if b != a]
    return sum(1 for x, y in zip(moves, moves[1:], strict=False) if (x > 0) != (y > 0))


def test_seeded_application_settles_without_oscillating() -> None:
    for seed in range(5):
        # load 400 at 10/replica: 200 ms p99 needs rho ≤ 0.75 → ≥ 54 replicas; start far below.
        trace = simulate(seed, load=400.0, start=10)
        final = trace[-1]
        assert 54 <= final <= 62, (seed, trace)  # met, and not far over (dead band: p99 ≥ 150 ms)
        assert max(trace) <= 62, (seed, trace)  # overshoot bounded (≤ 15 %)
        assert reversals(trace) <= 2, (seed, trace)  # direction changes bounded
        tail = trace[-80:]
        moves = sum(1 for x, y in zip(tail, tail[1:], strict=False) if x != y)
        assert moves <= 2 and max(tail) - min(tail) <= 3, (seed, trace)  # still once met (noise: ≤ 2 nudges)
        assert next(i for i, n in enumerate(trace) if n >= 53) <= 25, (seed, trace)  # steps of ≤ max(4, 25 %)
        lat = App(seed + 100, 400.0).latency(final)
        assert lat <= 200.0 * 1.1


def test_seeded_application_scales_in_when_load_drops() -> None:
    trace = simulate(3, load=100.0, start=60)
    assert 14 <= trace[-1] <= 20, trace  # 100 load: rho ≤ 0.75 at ≥ 14; slack ≥ 25 % below 150 ms at ~20
    assert reversals(trace) <= 2, trace


def test_cluster_weights_move_towards_the_worse_cluster_and_stop_when_balanced() -> None:
    from drods.autoscaling.cluster_weights import WeightSettings, rebalance
    from drods.model.autoscaling import FeedbackTargets
    from drods.model.detection import static_weight_list

    t = FeedbackTargets(latencyP99Ms=200)
    s = WeightSettings(cooldown_s=30)

    def obs(ms: float, at: float = 100.0) -> Observation:
        return Observation(ms, None, None, at)

    # east misses by 50 %, west has 50 % slack: mean 0, d = ±0.5 → ×1.25 / ×0.75 (bounded to ±25 %)
    r = rebalance(t, {"east": obs(300), "west": obs(100)}, {"east": 5, "west": 5}, None, None, 101.0, s)
    assert r.weights == {"east": 0.625, "west": 0.375} and r.errors == {"east": 0.5, "west": -0.5}
    # from the previous weights, not the shares; a small gap moves a little: d = ±0.15 → ×1.075 / ×0.925
    r = rebalance(t, {"east": obs(230), "west": obs(170)}, {"east": 6, "west": 4}, {"east": 0.5, "west": 0.5},
                  None, 101.0, s)
    assert r.weights == {"east": 0.5375, "west": 0.4625}
    # balanced (within ±0.1 of the mean), cool-down, one reporter, stale or pre-move reports: no move
    assert rebalance(t, {"east": obs(210), "west": obs(190)}, {"east": 5, "west": 5}, None, None, 101.0,
                     s).reason == "balanced"
    assert rebalance(t, {"east": obs(300), "west": obs(100)}, {"east": 5, "west": 5}, None, 90.0, 101.0,
                     s).reason == "cool-down"
    assert rebalance(t, {"east": obs(300)}, {"east": 5, "west": 5}, None, None, 101.0, s).weights is None
    assert rebalance(t, {"east": obs(300, 0.0), "west": obs(100)}, {"east": 5, "west": 5}, None, None, 200.0,
                     s).weights is None  # east's report is older than max_age
    assert rebalance(t, {"east": obs(300, 50.0), "west": obs(100)}, {"east": 5, "west": 5}, None, 60.0, 101.0,
                     s).weights is None  # east's report predates the last move
    # a reporting cluster without replicas counts, from the floor; at the floor nothing moves again
    r = rebalance(t, {"east": obs(300), "idle": obs(100)}, {"east": 5}, None, None, 101.0, s)
    assert r.weights == {"east": 0.95, "idle": 0.05}
    assert rebalance(t, {"east": obs(300), "idle": obs(100)}, {"east": 5}, r.weights, None, 101.0,
                     s).reason == "at the weight floor"
    # no cluster is starved
    r = rebalance(t, {"east": obs(400), "west": obs(50)}, {"east": 9, "west": 1}, {"east": 0.96, "west": 0.04},
                  None, 101.0, s)
    assert r.weights is not None and min(r.weights.values()) >= 0.05 - 1e-9
    assert sum(r.weights.values()) == pytest.approx(1.0, abs=1e-3) and r.weights["east"] == 0.95
    assert static_weight_list({"west": 0.375, "east": 0.625}) == [
        {"targetCluster": {"clusterNames": ["east"]}, "weight": 625},
        {"targetCluster": {"clusterNames": ["west"]}, "weight": 375}]
