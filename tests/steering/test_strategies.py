"""Golden tests: the three strategies, balanced output and MAX on a fixed fleet (SPEC C5, C6).

Processing = 5 ms / (1 - load): aws-dfw 10 ms (load 0.5), gcp-ord 6.25 ms (0.2), az-lhr 7.14 ms (0.3).
End-to-end from DFW: 14 / 26.25 / 107.14 ms; from LHR: 105 / 86.25 / 10.14 ms. Prices per core-hour:
0.10 / 0.04 / 0.06.
"""

from __future__ import annotations

from typing import Any

import pytest

from drods.model.steering import ServiceRouteSpec
from drods.steering.engine import evaluate
from drods.steering.routing import Damping, render, step
from tests.steering.fixtures import fleet, plan


def routes(**spec: Any) -> dict[str, list[tuple[str, float, float | str]]]:
    ev = evaluate(fleet(), [plan(**spec)])[0]
    res = step(ev, None, 0.0, Damping())
    state = res.state
    assert res.changed.all()
    out = render(ev, state, [None, None])
    ServiceRouteSpec.model_validate({"serviceId": "x", "registration": {"apiVersion": "v1", "kind": "K", "name": "n"},
                                     "strategy": "costFirst", "evaluation": "e2eDelay", "output": "preferred",
                                     "routes": out})  # the published shape validates
    return {str(r["clientSite"]): [(i["cluster"], i["weight"], i["metric"]) for i in r["instances"]]  # type: ignore
            for r in out}


def test_experience_first_picks_the_lowest_end_to_end_delay() -> None:
    assert routes(strategy="experienceFirst") == {"DFW": [("aws-dfw", 1.0, 14.0)], "LHR": [("az-lhr", 1.0, 10.143)]}


def test_cost_first_picks_the_cheapest_instance_within_the_experience_thresholds() -> None:
    # LHR: gcp-ord (86.25 ms, 0.04/h) meets the 100 ms SLA with the 10 % hysteresis margin and is
    # cheaper than az-lhr (0.06/h).
    assert routes(strategy="costFirst") == {"DFW": [("gcp-ord", 1.0, 26.25)], "LHR": [("gcp-ord", 1.0, 86.25)]}


def test_cost_first_respects_the_cost_threshold() -> None:
    # Nothing under 0.05/h meets it except gcp-ord; with a 0.03/h ceiling nothing does: MAX.
    got = routes(strategy="costFirst", sla={"maxDelayMs": 100.0, "maxCostPerHour": 0.03})
    assert got == {"DFW": [("aws-dfw", 1.0, "MAX")], "LHR": [("az-lhr", 1.0, "MAX")]}


def test_resource_first_picks_the_most_headroom_within_experience_and_cost() -> None:
    assert routes(strategy="resourceFirst") == {"DFW": [("gcp-ord", 1.0, 26.25)], "LHR": [("gcp-ord", 1.0, 86.25)]}
    # gcp-ord priced out: the next most headroom that meets the SLA (az-lhr for LHR, aws-dfw for DFW).
    got = routes(strategy="resourceFirst", processing={"serviceTimeMs": 5.0, "instanceCores": 1.0},
                 sla={"maxDelayMs": 100.0, "maxCostPerHour": 0.03})
    assert got["DFW"][0][2] == "MAX"
    assert routes(strategy="resourceFirst", sla={"maxDelayMs": 20.0}) == {
        "DFW": [("aws-dfw", 1.0, 14.0)], "LHR": [("az-lhr", 1.0, 10.143)]}


def test_max_when_no_instance_meets_the_sla_marks_the_best_effort_route() -> None:
    ev = evaluate(fleet(), [plan(sla={"maxDelayMs": 5.0})])[0]
    state = step(ev, None, 0.0, Damping()).state
    out = render(ev, state, [None, None])
    assert [(r["clientSite"], [(i["cluster"], i["metric"]) for i in r["instances"]]) for r in out] == [  # type: ignore
        ("DFW", [("aws-dfw", "MAX")]), ("LHR", [("az-lhr", "MAX")])]
    assert "delay 14.0 ms > 5 ms" in out[0]["instances"][0]["reason"]  # type: ignore[index]


def test_balanced_output_weights_sum_to_one_and_follow_the_metric() -> None:
    got = routes(output="balanced")
    dfw = dict((c, w) for c, w, _ in got["DFW"])
    assert set(dfw) == {"aws-dfw", "gcp-ord"}  # az-lhr breaks the SLA from DFW
    assert sum(dfw.values()) == pytest.approx(1.0)
    assert dfw["aws-dfw"] == pytest.approx((1 / 14) / (1 / 14 + 1 / 26.25), abs=1e-3)


def test_max_load_threshold_and_unknown_sites() -> None:
    # aws-dfw at 80 % load breaks maxLoadPercent 70: DFW goes to gcp-ord.
    ev = evaluate(fleet(load=(0.8, 0.2, 0.3)), [plan(sla={"maxDelayMs": 100.0, "maxLoadPercent": 70.0})])[0]
    state = step(ev, None, 0.0, Damping()).state
    assert render(ev, state, [None, None])[0]["instances"][0]["cluster"] == "gcp-ord"  # type: ignore[index]
    # A client site nobody measured from has no route; a cluster the fleet does not know is no candidate.
    p = plan(clientSites=["DFW", "SIN"])
    ev = evaluate(fleet(), [p])[0]
    state = step(ev, None, 0.0, Damping()).state
    out = render(ev, state, [None, None])
    assert out[1] == {"clientSite": "SIN", "instances": [], "changedAt": None, "eligible": []}
    # a site whose paths have no delay known has no route either, with or without an SLA (not a route
    # with an infinite delay)
    inf = float("inf")
    ev = evaluate(fleet(delay=[[4.0, 20.0, 100.0], [inf, inf, inf]]), [plan(sla={})])[0]
    out = render(ev, step(ev, None, 0.0, Damping()).state, [None, None])
    assert out[1] == {"clientSite": "LHR", "instances": [], "changedAt": None, "eligible": []}
    assert out[0]["instances"][0]["cluster"] == "aws-dfw"  # type: ignore[index]


def test_composite_evaluation_is_an_l2_score_on_0_to_100() -> None:
    ev = evaluate(fleet(), [plan(evaluation="composite", sensitiveAttributes=["delay", "cost", "load"])])[0]
    finite = ev.metric[ev.valid]
    assert ((finite >= 0) & (finite <= 100)).all()
    for method in ("minMax", "zScore", "sigmoid"):
        ev2 = evaluate(fleet(), [plan(evaluation="composite", sensitiveAttributes=["delay", "load"],
                                      normalisation={"computing": method, "service": method})])[0]
        assert ev2.metric[ev2.valid].max() <= 100


def test_a_render_reuses_the_client_sites_whose_route_did_not_change() -> None:
    """One cluster's saturation moves only the sites using it: the next render shares the others'
    routes with the previous one (and, in one chunk, services share equal sites' routes), and always
    equals a render of each service alone from nothing (MAX, balanced, held)."""
    import dataclasses

    import numpy as np

    from drods.steering.engine import evaluate_chunks
    from drods.steering.routing import Rendered, render_chunk, step_chunk

    plans = [plan(sla={"maxDelayMs": 100.0, "maxLoadPercent": 70.0}),
             plan(serviceId="e.example", sla={"maxDelayMs": 100.0, "maxLoadPercent": 70.0}),  # a's chunk
             plan(serviceId="b.example", output="balanced", sla={"maxDelayMs": 120.0}),
             plan(serviceId="c.example", strategy="costFirst", sla={"maxDelayMs": 100.0, "maxLoadPercent": 70.0}),
             # min-max over the instances: another cluster's load moves a site's metric, not its route
             plan(serviceId="d.example", evaluation="composite", sensitiveAttributes=["delay", "load"],
                  normalisation={"computing": "minMax", "service": "minMax"})]
    d = Damping(minIntervalSeconds=3.0)
    states: list[Any] = [None] * len(plans)
    last: list[Rendered | None] = [None] * len(plans)
    rng = np.random.default_rng(5)
    shared = 0
    for k in range(40):
        load = (float(rng.choice([0.2, 0.5, 0.95])), 0.2, float(rng.choice([0.3, 0.99])))
        delay = [[4.0, 20.0 + 5 * float(rng.integers(3)), 100.0], [95.0, 80.0, 3.0 + 200 * float(rng.integers(2))]]
        for chunk in evaluate_chunks(fleet(load=load, delay=delay), plans):
            stepped = step_chunk(chunk, [states[n] for n in chunk.positions], float(k), d)
            picks = list(range(len(chunk.positions)))
            texts = [[f"t{t}" for t in r.state.changed_at.tolist()] for r in stepped.results]
            previous = [last[n] for n in chunk.positions]
            reused = render_chunk(chunk, stepped, picks, texts, previous)
            alone = [render_chunk(chunk, stepped, [p], [texts[p]])[0].routes for p in picks]
            assert [r.routes for r in reused] == alone
            if len(picks) > 1:  # services with equal sites share the route object
                assert all(a is b for a, b, x, y in zip(reused[0].routes, reused[1].routes, reused[0].digests,
                                                         reused[1].digests, strict=True) if x == y
                           and a["instances"] and a["instances"][0]["metric"] != "MAX")  # type: ignore[index]
                shared += sum(a is b for a, b in zip(reused[0].routes, reused[1].routes, strict=True))
            for n, now, before in zip(chunk.positions, reused, previous, strict=True):
                if before is not None:
                    same = now.digests == before.digests
                    has_max = [any(i["metric"] == "MAX" for i in r["instances"]) for r in now.routes]  # type: ignore
                    for r, route in enumerate(now.routes):
                        assert (route is before.routes[r]) == (bool(same[r]) and not has_max[r])
                        shared += route is before.routes[r]
                last[n] = now
            for n, r in zip(chunk.positions, stepped.results, strict=True):
                states[n] = r.state
    assert shared > 20  # most steps leave most sites as they were
    # Two client sites with the same measurements: equal values, but each keeps its own site's name.
    twins = next(iter(evaluate_chunks(fleet(delay=[[4.0, 20.0, 100.0], [4.0, 20.0, 100.0]]), plans[:2])))
    stepped = step_chunk(twins, [None, None], 0.0, d)
    done = render_chunk(twins, stepped, [0, 1], [[None, None], [None, None]])
    assert [[r["clientSite"] for r in x.routes] for x in done] == [["DFW", "LHR"], ["DFW", "LHR"]]
    assert done[0].routes[0] is done[1].routes[0] and done[0].routes[0] is not done[0].routes[1]
    # Only the pairs flows may stay on changed (a recently used instance meets the SLA again).
    chunk = next(iter(evaluate_chunks(fleet(), plans[:1])))
    stepped = step_chunk(chunk, [None], 0.0, d)
    first = render_chunk(chunk, stepped, [0], [[None, None]])
    every = np.ones((1, 2, 3), dtype=bool)
    wider = dataclasses.replace(stepped, recent=np.nonzero(every), eligible=np.nonzero(every & chunk.valid))
    again = render_chunk(chunk, wider, [0], [[None, None]], first)
    assert [r["eligible"] for r in again[0].routes] == [["aws-dfw", "gcp-ord"], ["az-lhr", "gcp-ord"]]
