"""Placement quality: a seeded fleet and workload mix placed with and without each placement plugin.

    python bench/placement_quality.py [--seed 1] [--clusters 24] [--workloads 240]

* cost (F6): every workload placed blind to prices (no Cost score, no cost-first) and with
  ``placement.costFirst``; both under the same water-level limit and latency need (equal SLA:
  the same replicas placed, no cluster above its limit). ``cost_reduction`` = 1 − cost-first bill /
  blind bill (hourly, at the clusters' prices).
* classes (H2): a mix of latency-sensitive, cpu-batch, gpu-training and io-heavy workloads placed
  in arrival order with the Dissonance score and without it. A clashing pair is two workloads
  whose classes clash (matrix value ≥ 0.5) sharing a cluster; ``clash_ratio`` = clashing pairs with
  Dissonance / without (lower is better; target ≤ 1/3). The division concentrates on the fewest
  least clashing clusters when the Dissonance scores separate them (``drods/scheduler/concentrate.py``).
* traffic (H1): a service graph of chatty pairs (1–10 MB/s each; the callee placed before its
  caller). Half the workloads carry a latency need to a random site, so some callers' own need
  excludes every cluster of their callee: ``chatty_callers_blocked_by_latency`` is their share of
  callers' replicas and ``chatty_colocated_where_feasible`` the co-located share of the others at
  arrival. Then one traffic rebalance pass over the placed workloads in arrival order, with the
  verdict the descheduler uses (`drods.scheduler.rebalance.traffic_verdict`, ``--min-reduction``
  as ``autoops.trafficRebalance.minCostReduction``): a callee may move to a caller that arrived
  after it. ``chatty_colocated`` = the share of callers' replicas on a cluster that runs their
  callee after that pass (``chatty_colocated_at_arrival`` before it, ``chatty_colocated_blind``
  without TrafficAffinity); ``chatty_apart_after_rebalance`` says why the rest stay apart.
* data (F4): 30 datasets with one or two copies on random clusters; half the workloads read one
  or two of them (5–100 GiB/h). ``bytes_reduction`` = 1 − GiB/h read across clusters with the
  DataLocality score / without it.

* users: every workload declares where its users are (``placement.users``: one site, or
  two at 60/40 for a third of them) and is placed with the default profile (UserLatency on) and
  without UserLatency. ``user_latency_p95_ms`` is the 95th percentile over replicas of the
  share-weighted latency from the users to the replica's cluster; ``latency_gap_ms`` its distance
  to the lowest possible (every replica at its users' nearest cluster, room ignored: a lower bound).

Prints the conditions, then one JSON line with ``seed``, ``cost_reduction``, ``clash_ratio``,
``bytes_reduction``, ``chatty_colocated``, ``user_latency_p95_ms``, ``latency_gap_ms`` and the
figures behind them.
"""

from __future__ import annotations

import argparse
import itertools
import json
import sys
from collections import defaultdict
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.arguments import positive_int  # noqa: E402
from drods.model.binding import BindingSpec, NetworkRequirements, ReplicaRequirements  # noqa: E402
from drods.model.cluster import ClusterSpec, CostModel, NetworkProfile  # noqa: E402
from drods.model.dataset import DatasetRead  # noqa: E402
from drods.model.placement import Placement  # noqa: E402
from drods.scheduler import Profile, Scheduler, Snapshot, Task  # noqa: E402
from drods.scheduler.plugins.dissonance import build_matrix  # noqa: E402
from drods.scheduler.profile import DEFAULT_SCORES  # noqa: E402
from drods.scheduler.rebalance import DEFAULT_MIN_REDUCTION, current_of, traffic_verdict  # noqa: E402

REGIONS = ("eu", "us", "ap", "sa")
SITES = ("FRA", "IAD", "SIN", "GRU")
CLASSES = ("latency-sensitive", "cpu-batch", "gpu-training", "io-heavy")
CLASH = 0.5


def fleet(n: int, rng: np.random.Generator) -> Snapshot:
    snap = Snapshot(capacity=n)
    for i in range(n):
        r = i % len(REGIONS)
        cores = float(rng.choice([64, 128, 256]))
        spot = rng.random() < 0.25
        spec = ClusterSpec(
            region=REGIONS[r], zone=f"{REGIONS[r]}-{'ab'[i % 2]}",
            cost=CostModel(cpuCoreHour=float(rng.uniform(0.015, 0.06)) * (0.5 if spot else 1.0),
                           memoryGiBHour=float(rng.uniform(0.002, 0.006)), egressGiB=float(rng.uniform(0.02, 0.1)),
                           market="Spot" if spot else "OnDemand"),
            network=NetworkProfile(identifier=SITES[r], latencyMs={s: (3.0 if j == r else float(rng.uniform(60, 180)))
                                                                    for j, s in enumerate(SITES)}),
        )
        load = float(rng.uniform(0.1, 0.5))
        st = {"cpu": {"capacity": cores, "allocatable": cores, "allocated": cores * load},
              "memory": {"capacity": cores * 4, "allocatable": cores * 4, "allocated": cores * 4 * load * 0.8}}
        snap.upsert_cluster(f"c{i:02d}", {}, spec, True, st)
    return snap


def workloads(m: int, rng: np.random.Generator) -> list[tuple[BindingSpec, str]]:
    out: list[tuple[BindingSpec, str]] = []
    for _ in range(m):
        cls = CLASSES[int(rng.integers(len(CLASSES)))]
        net = NetworkRequirements(identifier=SITES[int(rng.integers(len(SITES)))], maxLatencyMs=100,
                                  egressGiBPerHour=float(rng.choice([0.0, 0.1, 1.0]))) \
            if rng.random() < 0.5 else None
        spec = BindingSpec(replicas=int(rng.choice([1, 2, 3, 4, 6])),
                           resources=ReplicaRequirements(cpu=float(rng.choice([0.5, 1, 2])),
                                                         memory=float(rng.choice([1, 2, 4]))),
                           network=net)
        out.append((spec, cls))
    return out


def run(snap: Snapshot, work: list[tuple[BindingSpec, str]], prof: Profile, seed: int, *, cost_first: bool,
        classes: bool, talk: dict[int, tuple[int, float]] | None = None,
        data: tuple[dict[str, tuple[str, ...]], list[list[DatasetRead]]] | None = None,
        moved: list[float] | None = None,
        blocked: list[int] | None = None) -> tuple[list[dict[str, int]], float, int]:
    """Place every workload in order; returns placements, hourly bill and replicas placed.
    ``blocked`` collects the replicas of callers whose own filters dropped every callee cluster."""
    if data is not None:
        snap.datasets = dict(data[0])
    sched = Scheduler(prof, rng_seed=seed)
    placements: list[dict[str, int]] = []
    bill = 0.0
    placed = 0
    for k, (spec, cls) in enumerate(work):
        if cost_first:
            spec = spec.model_copy(update={"placement": Placement(costFirst=True)})
        if data is not None and data[1][k]:
            spec = spec.model_copy(update={"datasets": data[1][k]})
        key = f"w{k}"
        if talk and k in talk:  # undirected, as ``drods.model.traffic.peers`` reads the graph
            callee, bps = talk[k]
            snap.traffic.setdefault(f"q/{key}", {})[f"q/w{callee}"] = bps
            snap.traffic.setdefault(f"q/w{callee}", {})[f"q/{key}"] = bps
        r = sched.schedule(Task(spec, name=key, workload_class=cls if classes else None, workload=f"q/{key}"), snap)
        pd = r.placement_dict()
        if blocked is not None and talk and k in talk:
            there = placements[talk[k][0]]
            if there and all(c in r.reasons for c in there):
                blocked.append(r.placed)
        snap.workload_placements[f"q/{key}"] = tuple(pd.items())
        placements.append(pd)
        if r.placement:
            snap.assume(r.placement, spec.resources, key=key)
            snap.set_class_placement(key, cls, list(pd.items()), spec.resources.cpu)
        bill += r.estimated_hourly_cost or 0.0
        if moved is not None:
            moved.append(r.data_moved_gib_per_hour or 0.0)
        placed += r.placed
    return placements, bill, placed


def rebalance_pass(snap: Snapshot, work: list[tuple[BindingSpec, str]], prof: Profile, seed: int,
                   placements: list[dict[str, int]], min_reduction: float) -> tuple[list[dict[str, int]], int]:
    """One traffic rebalance pass (H1) over the placed workloads, in arrival order, with the pure
    verdict the descheduler uses (`drods.scheduler.rebalance`); returns the placements and the moves."""
    sched = Scheduler(prof, rng_seed=seed)
    out = [dict(p) for p in placements]
    moves = 0
    for k, (spec, _cls) in enumerate(work):
        key = f"w{k}"
        if not out[k]:
            continue
        task = Task(spec, name=key, current=current_of(out[k]), workload=f"q/{key}")
        verdict = traffic_verdict(sched, task, snap, min_reduction)
        if not verdict.move:
            continue
        snap.forget(key=key)
        snap.assume(verdict.placement, spec.resources, key=key)
        snap.workload_placements[f"q/{key}"] = verdict.placement
        out[k] = dict(verdict.placement)
        moves += 1
    return out, moves


def apart_reasons(snap: Snapshot, work: list[tuple[BindingSpec, str]], prof: Profile, seed: int,
                  placements: list[dict[str, int]], talk: dict[int, tuple[int, float]],
                  min_reduction: float) -> dict[str, int]:
    """Callers' replicas still on no cluster of their callee, by why the callee's verdict keeps it."""
    sched = Scheduler(prof, rng_seed=seed)
    out: dict[str, int] = defaultdict(int)
    for caller, (callee, _bps) in talk.items():
        there = placements[callee]
        apart = sum(n for c, n in placements[caller].items() if c not in there)
        if not apart or not there:
            continue
        v = traffic_verdict(sched, Task(work[callee][0], name=f"w{callee}", current=current_of(there),
                                        workload=f"q/w{callee}"), snap, min_reduction)
        why = ("beside every significant peer" if "runs beside every" in v.reason else
               "callee's own constraints" if "own constraints" in v.reason else
               "would move (a later pass)" if v.move else "no placement saving enough")
        out[why] += apart
    return dict(out)


def with_users(work: list[tuple[BindingSpec, str]], rng: np.random.Generator) -> list[tuple[BindingSpec, str]]:
    """The same workloads, each declaring its users: one site, or two at 60/40 (a third of them)."""
    out: list[tuple[BindingSpec, str]] = []
    for spec, cls in work:
        a, b = rng.choice(len(SITES), size=2, replace=False).tolist()
        users = [{"site": SITES[a], "weight": 60}, {"site": SITES[b], "weight": 40}] if rng.random() < 1 / 3 \
            else [{"site": SITES[a]}]
        out.append((spec.model_copy(update={"placement": Placement.model_validate({"users": users})}), cls))
    return out


def user_latencies(snap: Snapshot, work: list[tuple[BindingSpec, str]],
                   placements: list[dict[str, int]]) -> tuple[list[float], list[float]]:
    """Per replica placed: the share-weighted latency from its users, and the lowest it could be."""
    got: list[float] = []
    best: list[float] = []
    lat = {s: snap.latency_array(s)[: snap.n] for s in SITES}  # type: ignore[index]
    for (spec, _), pd in zip(work, placements, strict=True):
        users = [(u.place, u.weight) for u in spec.placement.users]
        wsum = sum(w for _, w in users)
        exp = sum(lat[p] * w for p, w in users) / wsum
        for c, k in pd.items():
            got.extend([float(exp[snap.index[c]])] * k)
        best.extend([float(exp.min())] * sum(pd.values()))
    return got, best


def users_p95(fresh: Callable[[], Snapshot], work: list[tuple[BindingSpec, str]],
              seed: int) -> tuple[int, float, float, float]:
    """Replicas placed, and the users' latency p95 with UserLatency, without it, and the lowest possible."""
    no_users = Profile.from_dict({"scores": {k: v for k, v in DEFAULT_SCORES.items() if k != "UserLatency"}})
    snap = fresh()
    aware, best = user_latencies(snap, work, run(snap, work, Profile.default(), seed, cost_first=False,
                                                 classes=False)[0])
    snap_b = fresh()
    blind, _ = user_latencies(snap_b, work, run(snap_b, work, no_users, seed, cost_first=False, classes=False)[0])

    def p95(v: list[float]) -> float:
        return float(np.percentile(v, 95)) if v else 0.0

    return len(aware), p95(aware), p95(blind), p95(best)


def clashing_pairs(placements: list[dict[str, int]], work: list[tuple[BindingSpec, str]]) -> int:
    matrix = build_matrix()
    on: dict[str, list[str]] = defaultdict(list)
    for pd, (_spec, cls) in zip(placements, work, strict=True):
        for c in pd:
            on[c].append(cls)
    pairs = 0
    for members in on.values():
        for a, b in itertools.combinations(members, 2):
            if matrix.get(a, {}).get(b, 0.0) >= CLASH:
                pairs += 1
    return pairs


def data_mix(rng: np.random.Generator, clusters: int, m: int) -> tuple[dict[str, tuple[str, ...]],
                                                                       list[list[DatasetRead]]]:
    sets = {f"default/ds{i}": tuple(f"c{int(c):02d}" for c in rng.choice(clusters, size=int(rng.integers(1, 3)),
                                                                        replace=False))
            for i in range(30)}
    reads: list[list[DatasetRead]] = []
    for _ in range(m):
        if rng.random() < 0.5:
            picks = rng.choice(30, size=int(rng.integers(1, 3)), replace=False)
            reads.append([DatasetRead(name=f"ds{int(i)}", readGiBPerHour=float(rng.uniform(5, 100))) for i in picks])
        else:
            reads.append([])
    return sets, reads


def chatty(rng: np.random.Generator, m: int) -> dict[int, tuple[int, float]]:
    """Caller → (callee placed earlier, bytes/s) for a third of the workloads."""
    out: dict[int, tuple[int, float]] = {}
    for k in range(1, m):
        if rng.random() < 1 / 3:
            out[k] = (int(rng.integers(k)), float(rng.uniform(1e6, 1e7)))
    return out


def colocated(placements: list[dict[str, int]], talk: dict[int, tuple[int, float]]) -> float:
    near = total = 0
    for caller, (callee, _bps) in talk.items():
        there = placements[callee]
        for c, n in placements[caller].items():
            total += n
            near += n if c in there else 0
    return near / total if total else 0.0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--clusters", type=positive_int, default=24)
    ap.add_argument("--workloads", type=positive_int, default=240)
    ap.add_argument("--min-reduction", type=float, default=DEFAULT_MIN_REDUCTION,
                    help="traffic rebalance: share of the traffic-weighted network cost a move must save "
                         "(the configuration's default)")
    args = ap.parse_args(argv)
    rng = np.random.default_rng(args.seed)
    work = workloads(args.workloads, rng)
    fleet_seed = int(rng.integers(1 << 30))

    def fresh() -> Snapshot:
        return fleet(args.clusters, np.random.default_rng(fleet_seed))

    no_cost = Profile.from_dict({"scores": {k: v for k, v in DEFAULT_SCORES.items() if k not in ("Cost",)}})
    no_both = Profile.from_dict({"scores": {k: v for k, v in DEFAULT_SCORES.items()
                                            if k not in ("Cost", "Dissonance")}})
    default = Profile.default()
    snap_b = fresh()
    _, blind_bill, blind_placed = run(snap_b, work, no_both, args.seed, cost_first=False, classes=False)
    snap_c = fresh()
    _, cf_bill, cf_placed = run(snap_c, work, no_cost, args.seed, cost_first=True, classes=False)
    limit_ok = bool((snap_b.water_level <= 0.85 + 1e-9).all() and (snap_c.water_level <= 0.85 + 1e-9).all())
    snap_x = fresh()
    blind_pl, _, _ = run(snap_x, work, no_both, args.seed, cost_first=False, classes=False)
    snap_d = fresh()
    aware_pl, _, _ = run(snap_d, work, default, args.seed, cost_first=False, classes=True)
    talk = chatty(np.random.default_rng(args.seed + 7), args.workloads)
    no_traffic = Profile.from_dict({"scores": {k: v for k, v in DEFAULT_SCORES.items() if k != "TrafficAffinity"}})
    tb_pl, _, _ = run(fresh(), work, no_traffic, args.seed, cost_first=False, classes=False, talk=talk)
    blocked: list[int] = []
    snap_t = fresh()
    arrival_pl, _, _ = run(snap_t, work, default, args.seed, cost_first=False, classes=False, talk=talk,
                           blocked=blocked)
    ta_pl, moves = rebalance_pass(snap_t, work, default, args.seed, arrival_pl, args.min_reduction)
    chat_blind = colocated(tb_pl, talk)
    chat_arrival = colocated(arrival_pl, talk)
    chat_aware = colocated(ta_pl, talk)
    caller_replicas = sum(sum(arrival_pl[k].values()) for k in talk)
    reachable = caller_replicas - sum(blocked)
    chat_feasible = chat_arrival * caller_replicas / reachable if reachable else 0.0
    recovered = round((chat_aware - chat_arrival) * caller_replicas)
    still_apart = apart_reasons(snap_t, work, default, args.seed, ta_pl, talk, args.min_reduction)
    data = data_mix(np.random.default_rng(args.seed + 11), args.clusters, args.workloads)
    no_data = Profile.from_dict({"scores": {k: v for k, v in DEFAULT_SCORES.items() if k != "DataLocality"}})
    moved_blind: list[float] = []
    moved_aware: list[float] = []
    run(fresh(), work, no_data, args.seed, cost_first=False, classes=False, data=data, moved=moved_blind)
    run(fresh(), work, default, args.seed, cost_first=False, classes=False, data=data, moved=moved_aware)
    gib_blind = float(sum(moved_blind))
    gib_aware = float(sum(moved_aware))
    clash_blind = clashing_pairs(blind_pl, work)
    clash_aware = clashing_pairs(aware_pl, work)
    n_users, p95, p95_blind, p95_best = users_p95(fresh, with_users(work, np.random.default_rng(args.seed + 13)),
                                                   args.seed)
    print(f"# conditions: seed {args.seed}, {args.clusters} clusters in {len(REGIONS)} regions (25 % spot), "
          f"{args.workloads} workloads of {len(CLASSES)} classes, half with a latency need (≤ 100 ms to a site)")
    print(f"#   blind bill {blind_bill:.2f}/h ({blind_placed} replicas), cost-first {cf_bill:.2f}/h "
          f"({cf_placed} replicas), every cluster under its limit: {limit_ok}")
    print(f"#   dataset reads across clusters: blind {gib_blind:.0f} GiB/h, with DataLocality {gib_aware:.0f} GiB/h")
    print(f"#   {len(talk)} chatty pairs: callers' replicas beside their callee: blind {chat_blind:.3f}, "
          f"with TrafficAffinity at arrival {chat_arrival:.3f}; {sum(blocked)} of {caller_replicas} callers' "
          f"replicas have a latency need no callee cluster meets ({chat_feasible:.3f} of the rest are beside "
          f"their callee)")
    print(f"#   after one traffic rebalance pass (cost down by more than {args.min_reduction:.0%}): {chat_aware:.3f} "
          f"({moves} workloads moved, {recovered} callers' replicas newly beside their callee); still apart: "
          + ", ".join(f"{n} ({why})" for why, n in sorted(still_apart.items())))
    print(f"#   clashing pairs (matrix ≥ {CLASH}): blind {clash_blind}, with Dissonance {clash_aware}")
    print(f"#   users' latency p95 over {n_users} replicas: with UserLatency {p95:.1f} ms, without "
          f"{p95_blind:.1f} ms, lowest possible {p95_best:.1f} ms (each replica at its users' nearest cluster)")
    out: dict[str, Any] = {
        "seed": args.seed,
        "cost_reduction": round(1.0 - cf_bill / blind_bill, 4) if blind_bill > 0 else None,
        "clash_ratio": round(clash_aware / clash_blind, 4) if clash_blind else None,
        "bytes_reduction": round(1.0 - gib_aware / gib_blind, 4) if gib_blind > 0 else None,
        "cross_domain_gib_per_hour_blind": round(gib_blind, 1),
        "cross_domain_gib_per_hour_data_locality": round(gib_aware, 1),
        "chatty_colocated": round(chat_aware, 4),
        "chatty_colocated_at_arrival": round(chat_arrival, 4),
        "traffic_rebalance_moves": moves,
        "chatty_apart_after_rebalance": still_apart,
        "chatty_colocated_blind": round(chat_blind, 4),
        "chatty_callers_blocked_by_latency": round(sum(blocked) / caller_replicas, 4) if caller_replicas else None,
        "chatty_colocated_where_feasible": round(chat_feasible, 4),
        "equal_sla": limit_ok and cf_placed == blind_placed,
        "blind_bill": round(blind_bill, 3), "cost_first_bill": round(cf_bill, 3),
        "clashing_pairs_blind": clash_blind, "clashing_pairs_dissonance": clash_aware,
        "user_latency_p95_ms": round(p95, 1), "latency_gap_ms": round(p95 - p95_best, 1),
        "user_latency_p95_ms_blind": round(p95_blind, 1),
    }
    print(json.dumps(out))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
