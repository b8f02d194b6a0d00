"""C8: a flapping status produces a bounded number of route changes (injected clock, no sleeping)."""

from __future__ import annotations

from drods.steering.engine import evaluate
from drods.steering.routing import Damping, RouteState, step
from tests.steering.fixtures import fleet, plan

SLA = {"maxDelayMs": 100.0, "maxLoadPercent": 70.0}


def run(loads: list[float], damping: Damping, dt: float = 1.0) -> tuple[int, list[str]]:
    """Feed aws-dfw's load, one status per ``dt`` seconds; the DFW client's chosen cluster each time."""
    p = plan(sla=SLA)
    state: RouteState | None = None
    chosen: list[str] = []
    for k, load in enumerate(loads):
        ev = evaluate(fleet(load=(load, 0.2, 0.3)), [p])[0]
        res = step(ev, state, k * dt, damping)
        state = res.state
        chosen.append(p.instances[int(state.weights[0].argmax())])
    assert state is not None
    return state.changes, chosen


def test_flapping_load_changes_routes_a_bounded_number_of_times() -> None:
    flapping = [0.95 if k % 2 else 0.2 for k in range(120)]  # crosses 70 % every second for 2 minutes
    undamped, _ = run(flapping, Damping(minIntervalSeconds=0.0, changeThreshold=0.0, hysteresis=0.0))
    damped, chosen = run(flapping, Damping(minIntervalSeconds=10.0))
    # Two client sites' first routes are 2 changes; DFW then flips on every report without damping.
    assert undamped >= 100
    # Damped: DFW leaves aws-dfw at the first breach and never comes back while it keeps flapping.
    assert damped <= 3
    assert chosen[-1] == "gcp-ord"


def test_routes_return_once_the_status_has_been_calm_for_the_interval() -> None:
    loads = [0.2] * 5 + [0.9] * 5 + [0.2] * 30
    changes, chosen = run(loads, Damping(minIntervalSeconds=10.0))
    assert chosen[4] == "aws-dfw" and chosen[5] == "gcp-ord"  # the breach moves the route at once
    back = chosen.index("aws-dfw", 6)
    assert back == 20  # calm from t=10, back at t=20 (the hold-down), not before
    assert changes == 2 + 2  # two first routes, away, back


def test_change_threshold_keeps_a_valid_route_against_a_marginal_improvement() -> None:
    p = plan(sla={"maxDelayMs": 100.0})
    damping = Damping(minIntervalSeconds=0.0, changeThreshold=0.2)
    # DFW: aws-dfw 4 + 10 = 14 ms vs gcp-ord 20 + 6.25; make gcp-ord slightly better (12.5 ms).
    s1 = step(evaluate(fleet(), [p])[0], None, 0.0, damping)
    better = fleet(delay=[[4.0, 6.0, 100.0], [95.0, 80.0, 3.0]])
    s2 = step(evaluate(better, [p])[0], s1.state, 100.0, damping)
    assert not s2.changed[0] and s2.state.held[0]  # 12.25 ms is not 20 % better than 14 ms
    much_better = fleet(delay=[[4.0, 1.0, 100.0], [95.0, 80.0, 3.0]])
    s3 = step(evaluate(much_better, [p])[0], s2.state, 200.0, damping)
    assert s3.changed[0]


def test_recheck_deadline_when_a_better_route_waits_for_the_hold_down() -> None:
    p = plan(sla=SLA)
    d = Damping(minIntervalSeconds=10.0)
    s1 = step(evaluate(fleet(load=(0.2, 0.2, 0.3)), [p])[0], None, 0.0, d)
    s2 = step(evaluate(fleet(load=(0.9, 0.2, 0.3)), [p])[0], s1.state, 1.0, d)
    assert s2.changed[0]
    s3 = step(evaluate(fleet(load=(0.2, 0.2, 0.3)), [p])[0], s2.state, 2.0, d)
    assert not s3.changed[0] and s3.recheck_at == 12.0  # calm since 2.0, allowed at 12.0


def test_a_chunk_steps_like_its_services_one_by_one() -> None:
    from drods.steering.engine import evaluate_chunks
    from drods.steering.routing import step_chunk

    plans = [plan(sla=SLA), plan(serviceId="b.example", output="balanced", clientSites=["LHR"]),
             plan(serviceId="c.example", strategy="costFirst")]
    d = Damping(minIntervalSeconds=5.0)
    singles: list[RouteState | None] = [None, None, None]
    batch: list[RouteState | None] = [None, None, None]
    for k, load in enumerate([0.2, 0.9, 0.2, 0.2, 0.2, 0.2, 0.2, 0.2]):
        f = fleet(load=(load, 0.2, 0.3))
        evs = evaluate(f, plans)
        one = [step(ev, st, float(k), d) for ev, st in zip(evs, singles, strict=True)]
        many: list = [None] * len(plans)
        for chunk in evaluate_chunks(f, plans):
            stepped = step_chunk(chunk, [batch[n] for n in chunk.positions], float(k), d)
            for n, r in zip(chunk.positions, stepped.results, strict=True):
                many[n] = r
        for a, b in zip(one, many, strict=True):
            assert (a.state.weights == b.state.weights).all() and (a.changed == b.changed).all()
            assert a.recheck_at == b.recheck_at and a.state.changes == b.state.changes
        singles = [r.state for r in one]
        batch = [r.state for r in many]


def test_remapped_state_keeps_known_pairs_and_renormalises() -> None:
    import numpy as np

    st = RouteState(("X", "Y"), ("a", "b"), np.array([[0.5, 0.5], [0.0, 1.0]]), np.array([1.0, 2.0]),
                    valid_since=np.array([[3.0, 4.0], [5.0, 6.0]]), recent_until=np.array([[7.0, 8.0], [9.0, 10.0]]))
    r = st.remapped(("Y", "Z", "X"), ("b", "c"))
    assert r.weights.tolist() == [[1.0, 0.0], [0.0, 0.0], [1.0, 0.0]]  # X lost a: b takes all of it
    assert r.changed_at.tolist() == [2.0, -np.inf, 1.0]
    assert r.valid_since.tolist() == [[6.0, np.inf], [np.inf, np.inf], [4.0, np.inf]]
    assert r.recent_until.tolist() == [[10.0, -np.inf], [-np.inf, -np.inf], [8.0, -np.inf]]
